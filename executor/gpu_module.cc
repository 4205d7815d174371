// The table the GPU module exports (executor/gpu_module.h); built only into libditune_gpu.so.
#include "executor/gpu_module.h"

#include "executor/cuda/cuda_backend.h"
#ifdef DITUNE_HAVE_NCCL
#include "executor/nccl_comm.h"
#endif

extern "C" __attribute__((visibility("default"))) const ditune::exec::GpuModule* ditune_gpu_module() {
  static const ditune::exec::GpuModule module = [] {
    ditune::exec::GpuModule m;
    m.new_cuda_device = &ditune::exec::cuda::NewCudaDevice;
    m.device_count = &ditune::exec::cuda::DeviceCount;
    m.new_cuda_kernels = &ditune::exec::cuda::NewCudaKernels;
#ifdef DITUNE_HAVE_NCCL
    m.new_nccl_world = &ditune::exec::NewNcclWorld;
#endif
    return m;
  }();
  return &module;
}
