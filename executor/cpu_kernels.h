// The cpu kernels: the Kernels contract (kernels.h) on host memory with fp32 storage and fp32
// math — act buffers hold float (element_bytes() 4), Upload/Download are plain copies. The
// products, attention, norm and GELU run on the per-ISA kernels of cpu_kernels_isa.h (the ISA
// cpu_isa.h picks, looked up on every call so SetCpuIsa takes effect); the rest are plain
// loops. Semantics are the ref kernels' (ref_kernels.h) without their bf16 rounding: same
// argument checks (InvalidArgument naming the call and sizes) but no bounds check of each
// access against the device's buffers — this is the fast path. Single-threaded: every call
// runs on the calling thread (one MPI rank, one thread); not thread-safe (scratch is reused).
#ifndef DITUNE_EXECUTOR_CPU_KERNELS_H_
#define DITUNE_EXECUTOR_CPU_KERNELS_H_

#include <memory>

#include "executor/kernels.h"

namespace ditune::exec {

// On a device of the cpu backend (InvalidArgument otherwise, and for a DITUNE_CPU_ISA value
// this CPU cannot run).
StatusOr<std::unique_ptr<Kernels>> NewCpuKernels(Device* device);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_CPU_KERNELS_H_
