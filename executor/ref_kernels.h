// The ref kernels (host memory, bf16 storage, fp32 math, every access bounds-checked): the
// semantics of executor/kernels.h that every other backend is tested against.
#ifndef DITUNE_EXECUTOR_REF_KERNELS_H_
#define DITUNE_EXECUTOR_REF_KERNELS_H_

#include <memory>

#include "executor/kernels.h"

namespace ditune::exec {

// On a device of the cpu backend.
StatusOr<std::unique_ptr<Kernels>> NewRefKernels(Device* device);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_REF_KERNELS_H_
