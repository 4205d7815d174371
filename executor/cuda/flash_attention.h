// Tensor-core flash attention (bf16 in, fp32 accumulation and online softmax, bf16 out) for
// the head dimensions of the catalog models. Backend-internal: the cuda Kernels call it.
#ifndef DITUNE_EXECUTOR_CUDA_FLASH_ATTENTION_H_
#define DITUNE_EXECUTOR_CUDA_FLASH_ATTENTION_H_

#include <cuda_runtime.h>

#include "core/status.h"
#include "executor/kernels.h"

namespace ditune::exec::cuda {

// Whether FlashAttention takes this head dimension (64, 72, 88, 128).
bool FlashAttentionSupports(int head_dim);

// Launches `args` (see AttentionArgs) on `stream`; InvalidArgument for an unsupported head
// dimension or inconsistent sizes, the CUDA error otherwise.
Status FlashAttention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace ditune::exec::cuda

#endif  // DITUNE_EXECUTOR_CUDA_FLASH_ATTENTION_H_
