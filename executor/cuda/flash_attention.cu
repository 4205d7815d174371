// Placeholder while the tensor-core kernel is written.
#include "executor/cuda/flash_attention.h"

namespace ditune::exec::cuda {

bool FlashAttentionSupports(int) { return false; }

Status FlashAttention(const AttentionArgs&, cudaStream_t) { return Status::NotSupported("flash attention"); }

}  // namespace ditune::exec::cuda
