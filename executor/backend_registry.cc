// The only file that names the concrete backends. The GPU ones (cuda, nccl) live in a module
// loaded on first use (executor/gpu_module.h).
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "executor/comm.h"
#include "executor/cpu_device.h"
#include "executor/cpu_kernels.h"
#include "executor/device.h"
#include "executor/kernels.h"
#include "executor/local_comm.h"
#include "executor/ref_kernels.h"
#ifdef DITUNE_HAVE_CUDA
#include "executor/gpu_module.h"
#endif
#ifdef DITUNE_HAVE_MPI
#include "executor/mpi_comm.h"
#endif

namespace ditune::exec {

std::vector<std::string> CommBackends() {
  std::vector<std::string> b = {"local"};
#ifdef DITUNE_HAVE_MPI
  b.push_back("mpi");
#endif
#ifdef DITUNE_HAVE_NCCL
  b.push_back("nccl");
#endif
  return b;
}

std::string DefaultCommBackend() {
#ifdef DITUNE_HAVE_MPI
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
      std::getenv("PMIX_RANK") != nullptr) {
    return "mpi";
  }
#endif
  return "local";
}

StatusOr<std::unique_ptr<Comm>> CreateComm(std::string_view backend, int* argc, char*** argv) {
  if (backend == "local") return NewLocalComm();
#ifdef DITUNE_HAVE_MPI
  if (backend == "mpi") return NewMpiWorld(argc, argv);
#endif
#ifdef DITUNE_HAVE_NCCL
  if (backend == "nccl") {
    // NCCL rides on an MPI world that lives as long as the process.
    static std::unique_ptr<Comm> mpi;
    if (!mpi) {
      DITUNE_ASSIGN_OR_RETURN(mpi, NewMpiWorld(argc, argv));
    }
    DITUNE_ASSIGN_OR_RETURN(const GpuModule* gpu, LoadGpuModule());
    if (gpu->new_nccl_world == nullptr) return Status::Unavailable("the GPU backend module was built without NCCL");
    return gpu->new_nccl_world(mpi.get());
  }
#endif
#ifndef DITUNE_HAVE_MPI
  (void)argc;
  (void)argv;
#endif
  return Status::InvalidArgument(
      fmt::format("communication backend '{}' is not built; built: {}", backend, fmt::join(CommBackends(), ", ")));
}

std::vector<std::string> DeviceBackends() {
  std::vector<std::string> b = {"cpu"};
#ifdef DITUNE_HAVE_CUDA
  b.push_back("cuda");
#endif
  return b;
}

StatusOr<std::unique_ptr<Device>> CreateDevice(std::string_view backend) {
  if (backend == "cpu") return NewCpuDevice();
#ifdef DITUNE_HAVE_CUDA
  if (backend == "cuda") {
    // One GPU per rank on a node: the node-local rank picks it, as NCCL's world does.
    DITUNE_ASSIGN_OR_RETURN(const GpuModule* gpu, LoadGpuModule());
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    const int gpus = gpu->device_count();
    return gpu->new_cuda_device(local != nullptr && gpus > 0 ? std::atoi(local) % gpus : 0);
  }
#endif
  return Status::InvalidArgument(
      fmt::format("compute backend '{}' is not built; built: {}", backend, fmt::join(DeviceBackends(), ", ")));
}

std::vector<std::string> KernelBackends() {
  std::vector<std::string> b = {"ref", "cpu"};
#ifdef DITUNE_HAVE_CUDA
  b.push_back("cuda");
#endif
  return b;
}

StatusOr<std::unique_ptr<Kernels>> CreateKernels(std::string_view backend, Device* device) {
  if (backend == "ref") return NewRefKernels(device);
  if (backend == "cpu") return NewCpuKernels(device);
#ifdef DITUNE_HAVE_CUDA
  if (backend == "cuda") {
    DITUNE_ASSIGN_OR_RETURN(const GpuModule* gpu, LoadGpuModule());
    return gpu->new_cuda_kernels(device);
  }
#endif
  (void)device;
  return Status::InvalidArgument(
      fmt::format("kernel backend '{}' is not built; built: {}", backend, fmt::join(KernelBackends(), ", ")));
}

}  // namespace ditune::exec
