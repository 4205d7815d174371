// A whole single-GPU generation on the CUDA backend: the CPU executor's model (same seed,
// same weights, uploaded as bf16), its blocks run with cuBLASLt GEMMs and the fused kernels,
// the flow-matching Euler loop with classifier-free guidance on the host.
#ifndef DITUNE_EXECUTOR_CUDA_CUDA_DIT_H_
#define DITUNE_EXECUTOR_CUDA_CUDA_DIT_H_

#include <cstdint>
#include <vector>

#include "core/model_spec.h"
#include "core/workload.h"
#include "executor/device.h"
#include "executor/tensor.h"

namespace ditune::exec::cuda {

struct GpuGeneration {
  std::vector<Mat> latents;  // per prompt (tokens x C p^2)
  double dit_seconds = 0;    // device time of the denoising loops (CUDA events)
  int64_t peak_bytes = 0;    // device memory high-water mark
};

// Requires a device of the cuda backend.
StatusOr<GpuGeneration> GenerateOnGpu(Device* device, const ModelSpec& model, const Workload& workload, uint64_t seed);

}  // namespace ditune::exec::cuda

#endif  // DITUNE_EXECUTOR_CUDA_CUDA_DIT_H_
