// The GPU backends as a module loaded at run time: the CUDA device and kernels and the NCCL
// communicator live in libditune_gpu.so, which the backend registry opens (dlopen) the first
// time a command asks for one of them. A command that never touches a GPU (plan, whatif,
// check, models, ...) never loads CUDA, cuBLASLt or NCCL — as ggml loads its backends.
//
// The module exports one C function, ditune_gpu_module(), returning this table. The module
// and the binary are built together from the same headers; `abi` guards against a module of
// another build.
#ifndef DITUNE_EXECUTOR_GPU_MODULE_H_
#define DITUNE_EXECUTOR_GPU_MODULE_H_

#include <memory>

#include "core/status.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/kernels.h"

namespace ditune::exec {

inline constexpr int kGpuModuleAbi = 1;

struct GpuModule {
  int abi = kGpuModuleAbi;
  StatusOr<std::unique_ptr<Device>> (*new_cuda_device)(int ordinal) = nullptr;
  int (*device_count)() = nullptr;
  StatusOr<std::unique_ptr<Kernels>> (*new_cuda_kernels)(Device* device) = nullptr;
  // Null where the module was built without NCCL.
  StatusOr<std::unique_ptr<Comm>> (*new_nccl_world)(Comm* mpi_world) = nullptr;
};

// The loaded module: opened once per process, from $DITUNE_GPU_MODULE when set, else the
// path the build configured, else beside the binary. Unavailable naming the path and the
// loader's error when it cannot be opened.
StatusOr<const GpuModule*> LoadGpuModule();

}  // namespace ditune::exec

extern "C" const ditune::exec::GpuModule* ditune_gpu_module();

#endif  // DITUNE_EXECUTOR_GPU_MODULE_H_
