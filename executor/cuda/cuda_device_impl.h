// The CUDA device class, for the backend's own files only.
#ifndef DITUNE_EXECUTOR_CUDA_CUDA_DEVICE_IMPL_H_
#define DITUNE_EXECUTOR_CUDA_CUDA_DEVICE_IMPL_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>

#include "executor/device.h"

namespace ditune::exec::cuda {

// cuBLASLt plans (descriptors and the heuristic's algorithm) by GEMM description; gemm.cc.
class GemmPlanCache;
struct GemmPlanCacheDeleter {
  void operator()(GemmPlanCache* cache) const;
};

class CudaStream : public Stream {
 public:
  // `ordinal`: the device the stream belongs to, made current before creating an event for
  // it (an event is created on the calling thread's current device).
  CudaStream(cudaStream_t s, int ordinal) : s_(s), ordinal_(ordinal) {}
  Status Synchronize() override;
  StatusOr<std::unique_ptr<Event>> Record() override;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_;
  int ordinal_;
};

class CudaDevice : public Device {
 public:
  // Takes ownership of the stream and the cuBLASLt handle.
  CudaDevice(int ordinal, DeviceProps props, cudaStream_t stream, cublasLtHandle_t lt);
  ~CudaDevice() override;
  const DeviceProps& props() const override { return props_; }
  Stream* stream() override { return &stream_; }
  StatusOr<std::unique_ptr<Buffer>> Alloc(int64_t bytes) override;
  int64_t allocated_bytes() const override { return allocated_; }
  int64_t peak_bytes() const override { return peak_; }

  int ordinal() const { return ordinal_; }
  cudaStream_t raw_stream() const { return stream_.get(); }
  cublasLtHandle_t lt() const { return lt_; }
  // A workspace for cuBLASLt (on this device's stream), grown on demand and counted in
  // allocated_bytes().
  StatusOr<void*> Workspace(size_t bytes);
  // Device scratch for the kernels' temporaries (staged conversions, merged log-sum-exps):
  // at least `bytes`, grown on demand and counted. One buffer serves every caller in the
  // stream's order; growing frees the old one in that order too.
  StatusOr<void*> Scratch(size_t bytes);
  // Makes this device current on the calling thread.
  Status Use() const;
  // This device's GEMM plans, created on first use (gemm.cc).
  GemmPlanCache* gemm_plans();

 private:
  friend class CudaBuffer;
  // Counts `bytes` against props().memory_bytes, or InvalidArgument naming `what` and the sizes.
  Status Count(int64_t bytes, const char* what);
  StatusOr<void*> Grow(void** p, size_t* have, size_t bytes, bool stream_ordered, const char* what);
  int ordinal_;
  DeviceProps props_;
  CudaStream stream_;
  cublasLtHandle_t lt_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::unique_ptr<GemmPlanCache, GemmPlanCacheDeleter> gemm_plans_;
  int64_t allocated_ = 0;
  int64_t peak_ = 0;
};

// The CUDA device behind `device`, or InvalidArgument.
StatusOr<CudaDevice*> AsCuda(Device* device);

}  // namespace ditune::exec::cuda

#endif  // DITUNE_EXECUTOR_CUDA_CUDA_DEVICE_IMPL_H_
