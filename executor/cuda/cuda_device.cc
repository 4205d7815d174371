#include <algorithm>

#include <fmt/format.h>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/cuda_device_impl.h"

namespace ditune::exec::cuda {
namespace {

// An event on the device's timeline; cudaEventElapsedTime between two gives device time.
class CudaEvent : public Event {
 public:
  explicit CudaEvent(cudaEvent_t e) : e_(e) {}
  ~CudaEvent() override { cudaEventDestroy(e_); }
  StatusOr<double> SecondsSince(const Event& earlier) const override {
    const auto* other = dynamic_cast<const CudaEvent*>(&earlier);
    if (other == nullptr) return Status::InvalidArgument("events of different devices");
    DITUNE_CUDA_CHECK(cudaEventSynchronize(e_));
    float ms = 0;
    DITUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, other->e_, e_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t e_;
};

}  // namespace

class CudaBuffer : public Buffer {
 public:
  CudaBuffer(CudaDevice* d, void* p, int64_t n) : d_(d), p_(p), n_(n) {}
  ~CudaBuffer() override {
    cudaSetDevice(d_->ordinal());  // cudaFree frees on the current device
    cudaFree(p_);
    d_->allocated_ -= n_;
  }
  void* data() override { return p_; }
  int64_t bytes() const override { return n_; }

 private:
  CudaDevice* d_;
  void* p_;
  int64_t n_;
};

Status CudaStream::Synchronize() {
  DITUNE_CUDA_CHECK(cudaStreamSynchronize(s_));
  return Status::Ok();
}

StatusOr<std::unique_ptr<Event>> CudaStream::Record() {
  cudaEvent_t e;
  DITUNE_CUDA_CHECK(cudaSetDevice(ordinal_));
  DITUNE_CUDA_CHECK(cudaEventCreate(&e));
  auto event = std::unique_ptr<Event>(new CudaEvent(e));
  DITUNE_CUDA_CHECK(cudaEventRecord(e, s_));
  return event;
}

CudaDevice::CudaDevice(int ordinal, DeviceProps props, cudaStream_t stream, cublasLtHandle_t lt)
    : ordinal_(ordinal), props_(std::move(props)), stream_(stream, ordinal), lt_(lt) {}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  gemm_plans_.reset();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (scratch_ != nullptr) cudaFreeAsync(scratch_, stream_.get());
  cublasLtDestroy(lt_);
  cudaStreamDestroy(stream_.get());
}

Status CudaDevice::Use() const {
  DITUNE_CUDA_CHECK(cudaSetDevice(ordinal_));
  return Status::Ok();
}

Status CudaDevice::Count(int64_t bytes, const char* what) {
  if (bytes < 0) return Status::InvalidArgument("negative allocation");
  if (allocated_ + bytes > props_.memory_bytes) {
    return Status::InvalidArgument(fmt::format(
        "allocating {:.2f} GB ({}) on {} would exceed its {:.2f} GB ({:.2f} GB in use)", bytes / 1e9, what,
        props_.name, props_.memory_bytes / 1e9, allocated_ / 1e9));
  }
  allocated_ += bytes;
  peak_ = std::max(peak_, allocated_);
  return Status::Ok();
}

StatusOr<std::unique_ptr<Buffer>> CudaDevice::Alloc(int64_t bytes) {
  DITUNE_RETURN_IF_ERROR(Use());
  DITUNE_RETURN_IF_ERROR(Count(bytes, "a tensor"));
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))); e != cudaSuccess) {
    allocated_ -= bytes;
    DITUNE_CUDA_CHECK(e);
  }
  return std::unique_ptr<Buffer>(new CudaBuffer(this, p, bytes));
}

// The workspace and the scratch are counted like tensors and only ever grow. The scratch is
// allocated and freed in the stream's order (the old one goes once the work queued on it is
// done), so growing it mid-run never waits for the device, nor for a transfer in flight on a
// communicator's stream. The workspace keeps cudaMalloc's 256-byte alignment for cuBLASLt; it
// is allocated once, at the first GEMM.
StatusOr<void*> CudaDevice::Grow(void** p, size_t* have, size_t bytes, bool stream_ordered, const char* what) {
  if (bytes <= *have) return *p;
  DITUNE_RETURN_IF_ERROR(Use());
  if (*p != nullptr) {
    DITUNE_CUDA_CHECK(stream_ordered ? cudaFreeAsync(*p, stream_.get()) : cudaFree(*p));
  }
  *p = nullptr;
  allocated_ -= static_cast<int64_t>(*have);
  *have = 0;
  DITUNE_RETURN_IF_ERROR(Count(static_cast<int64_t>(bytes), what));
  const cudaError_t e = stream_ordered ? cudaMallocAsync(p, bytes, stream_.get()) : cudaMalloc(p, bytes);
  if (e != cudaSuccess) {
    *p = nullptr;
    allocated_ -= static_cast<int64_t>(bytes);
    DITUNE_CUDA_CHECK(e);
  }
  *have = bytes;
  return *p;
}

StatusOr<void*> CudaDevice::Workspace(size_t bytes) {
  return Grow(&workspace_, &workspace_bytes_, bytes, false, "the GEMM workspace");
}

StatusOr<void*> CudaDevice::Scratch(size_t bytes) { return Grow(&scratch_, &scratch_bytes_, bytes, true, "scratch"); }

StatusOr<CudaDevice*> AsCuda(Device* device) {
  auto* d = dynamic_cast<CudaDevice*>(device);
  if (d == nullptr) return Status::InvalidArgument("a CUDA kernel was given a device of another backend");
  return d;
}

StatusOr<void*> RawStream(Device* device) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  return static_cast<void*>(d->raw_stream());
}

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

StatusOr<std::unique_ptr<Device>> NewCudaDevice(int ordinal) {
  const int count = DeviceCount();
  if (count == 0) return Status::Unavailable("no CUDA device is available (driver or GPU missing)");
  if (ordinal < 0 || ordinal >= count) {
    return Status::InvalidArgument(fmt::format("CUDA device {} does not exist; this process sees {}", ordinal, count));
  }
  DITUNE_CUDA_CHECK(cudaSetDevice(ordinal));
  cudaDeviceProp p{};
  DITUNE_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
  size_t free_bytes = 0, total = 0;
  DITUNE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  DeviceProps props;
  props.backend = "cuda";
  props.name = p.name;
  props.memory_bytes = static_cast<int64_t>(free_bytes);
  props.compute_units = p.multiProcessorCount;
  props.bf16 = p.major >= 8;
  props.async = true;
  cudaStream_t stream;
  DITUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasLtHandle_t lt;
  if (cublasStatus_t s = cublasLtCreate(&lt); s != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    DITUNE_CUBLAS_CHECK(s);
  }
  return std::unique_ptr<Device>(new CudaDevice(ordinal, std::move(props), stream, lt));
}

}  // namespace ditune::exec::cuda
