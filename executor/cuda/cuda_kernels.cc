// Placeholder while the cuda Kernels are written.
#include "executor/cuda/cuda_backend.h"

namespace ditune::exec::cuda {

StatusOr<std::unique_ptr<Kernels>> NewCudaKernels(Device*) { return Status::NotSupported("cuda kernels"); }

}  // namespace ditune::exec::cuda
