// The cuda Kernels (executor/kernels.h): each method is one of the backend's launchers
// (gemm.cc, kernels.cu), which validate their arguments and run on the device's stream.
#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_device_impl.h"

namespace ditune::exec::cuda {
namespace {

class CudaKernels final : public Kernels {
 public:
  explicit CudaKernels(Device* device) : device_(device) {}

  std::string_view name() const override { return "cuda"; }
  int64_t element_bytes() const override { return 2; }
  Device* device() override { return device_; }

  Status Gemm(const GemmArgs& args) override { return cuda::Gemm(device_, args); }
  Status Attention(const AttentionArgs& args) override { return cuda::Attention(device_, args); }
  Status MergeAttention(const AttentionMergeArgs& args) override { return cuda::MergeAttention(device_, args); }
  Status NormModulate(const NormArgs& args) override { return cuda::NormModulate(device_, args); }
  Status GatedResidual(void* x, int64_t ldx, const float* gate, const void* y, int64_t ldy, int64_t rows,
                       int64_t cols) override {
    return cuda::GatedResidual(device_, x, ldx, gate, y, ldy, rows, cols);
  }
  Status Activate(Activation kind, const void* in, int64_t ld_in, void* out, int64_t ld_out, int64_t rows,
                  int64_t cols) override {
    return cuda::Activate(device_, kind, in, ld_in, out, ld_out, rows, cols);
  }
  Status QkNormRope(void* qk, int64_t ld, int64_t rows, int heads, int head_dim, int64_t first_position) override {
    return cuda::QkNormRope(device_, qk, ld, rows, heads, head_dim, first_position);
  }
  Status Copy(void* dst, int64_t ld_dst, const void* src, int64_t ld_src, int64_t rows, int64_t cols) override {
    return cuda::Copy2D(device_, dst, ld_dst, src, ld_src, rows, cols);
  }
  Status Zero(void* data, int64_t count) override {
    if (count < 0 || count > std::numeric_limits<int64_t>::max() / 2) {
      return Status::InvalidArgument(fmt::format("zeroing {} bf16 elements", count));
    }
    return cuda::Zero(device_, data, count * 2);
  }
  Status FillRandom(void* data, int64_t count, float stddev, uint64_t seed, uint64_t stream) override {
    return cuda::FillRandom(device_, data, count, stddev, seed, stream);
  }
  Status EulerStep(float* x, void* xb, const void* pred, int64_t pred_stride, int64_t uncond_offset, bool guidance_on,
                   float guidance, float dt, int prompts, int64_t count) override {
    return cuda::EulerStep(device_, x, xb, pred, pred_stride, uncond_offset, guidance_on, guidance, dt, prompts, count);
  }
  Status Upload(const float* host, void* dev, int64_t count) override {
    return cuda::Upload(device_, host, dev, count);
  }
  Status UploadF32(const float* host, float* dev, int64_t count) override {
    return cuda::UploadF32(device_, host, dev, count);
  }
  Status Download(const void* dev, float* host, int64_t count) override {
    return cuda::Download(device_, dev, host, count);
  }
  Status DownloadF32(const float* dev, float* host, int64_t count) override {
    return cuda::DownloadF32(device_, dev, host, count);
  }

 private:
  Device* device_;
};

}  // namespace

StatusOr<std::unique_ptr<Kernels>> NewCudaKernels(Device* device) {
  if (device == nullptr) return Status::InvalidArgument("cuda kernels need a device");
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  (void)d;
  return std::unique_ptr<Kernels>(new CudaKernels(device));
}

}  // namespace ditune::exec::cuda
