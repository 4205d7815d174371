// The CUDA backend's kernels against the CPU backend's on the same inputs: bf16 storage,
// fp32 accumulation, relative error <= 2e-2 (max-norm). Runs only where a GPU is.
#include <gtest/gtest.h>

#include "executor/cuda/cuda_backend.h"
#include "executor/device.h"
#include "executor/tensor.h"

namespace ditune::exec {
namespace {

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = cuda::NewCudaDevice(0);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dev_ = std::move(d).value();
  }
  // A device copy (bf16) of `m`.
  std::unique_ptr<Buffer> Up(const Mat& m) {
    auto b = dev_->Alloc(m.size() * 2);
    EXPECT_TRUE(b.ok());
    EXPECT_TRUE(cuda::UploadBf16(dev_.get(), m.data(), (*b)->data(), m.size()).ok());
    return std::move(b).value();
  }
  Mat Down(Buffer* b, int64_t rows, int64_t cols) {
    Mat m(rows, cols);
    EXPECT_TRUE(cuda::DownloadBf16(dev_.get(), b->data(), m.data(), m.size()).ok());
    return m;
  }
  std::unique_ptr<Device> dev_;
};

TEST_F(CudaKernelsTest, GemmMatchesCpu) {
  for (auto [m, k, n] : std::vector<std::tuple<int, int, int>>{{64, 64, 64}, {1000, 1152, 4608}, {4096, 3072, 3072}}) {
    const Mat a = RandomMat(m, k, 1.0f, 1, 1), b = RandomMat(k, n, 1.0f / std::sqrt(k), 1, 2);
    auto da = Up(a), db = Up(b);
    auto dc = dev_->Alloc(static_cast<int64_t>(m) * n * 2);
    ASSERT_TRUE(dc.ok());
    ASSERT_TRUE(cuda::Gemm(dev_.get(), da->data(), db->data(), (*dc)->data(), m, k, n).ok());
    EXPECT_LE(MaxRelativeError(Down(dc->get(), m, n), a * b), 2e-2) << m << "x" << k << "x" << n;
  }
}

TEST_F(CudaKernelsTest, AttentionMatchesCpuForEveryHeadDim) {
  for (int d : {64, 72, 88, 128}) {
    const int heads = 4;
    const Mat q = RandomMat(333, heads * d, 1.0f, 2, 1), k = RandomMat(1000, heads * d, 1.0f, 2, 2),
              v = RandomMat(1000, heads * d, 1.0f, 2, 3);
    auto dq = Up(q), dk = Up(k), dv = Up(v);
    auto o = dev_->Alloc(q.size() * 2);
    ASSERT_TRUE(o.ok());
    ASSERT_TRUE(cuda::Attention(dev_.get(), dq->data(), dk->data(), dv->data(), (*o)->data(), 333, 1000, heads, d).ok());
    EXPECT_LE(MaxRelativeError(Down(o->get(), 333, heads * d), Attention(q, k, v, heads, d)), 2e-2) << d;
  }
}

TEST_F(CudaKernelsTest, NormGeluResidualMatchCpu) {
  const Mat x = RandomMat(257, 1152, 1.0f, 3, 1), y = RandomMat(257, 1152, 1.0f, 3, 2);
  const Vec shift = RandomMat(1, 1152, 0.1f, 3, 3), scale = RandomMat(1, 1152, 0.1f, 3, 4), gate = RandomMat(1, 1152, 1.0f, 3, 5);
  auto dx = Up(x), dy = Up(y);
  auto dout = dev_->Alloc(x.size() * 2);
  auto dshift = dev_->Alloc(1152 * 4), dscale = dev_->Alloc(1152 * 4), dgate = dev_->Alloc(1152 * 4);
  ASSERT_TRUE(cuda::UploadF32(dev_.get(), shift.data(), static_cast<float*>((*dshift)->data()), 1152).ok());
  ASSERT_TRUE(cuda::UploadF32(dev_.get(), scale.data(), static_cast<float*>((*dscale)->data()), 1152).ok());
  ASSERT_TRUE(cuda::UploadF32(dev_.get(), gate.data(), static_cast<float*>((*dgate)->data()), 1152).ok());
  ASSERT_TRUE(cuda::NormModulate(dev_.get(), dx->data(), static_cast<float*>((*dshift)->data()),
                                 static_cast<float*>((*dscale)->data()), (*dout)->data(), 257, 1152).ok());
  EXPECT_LE(MaxRelativeError(Down(dout->get(), 257, 1152), NormModulate(x, shift, scale)), 2e-2);
  ASSERT_TRUE(cuda::Gelu(dev_.get(), dx->data(), x.size()).ok());
  EXPECT_LE(MaxRelativeError(Down(dx.get(), 257, 1152), Gelu(x)), 2e-2);
  auto dx2 = Up(x);
  ASSERT_TRUE(cuda::GatedResidual(dev_.get(), dx2->data(), static_cast<float*>((*dgate)->data()), dy->data(), 257, 1152).ok());
  Mat expect = x;
  expect.array() += y.array().rowwise() * gate.array();
  EXPECT_LE(MaxRelativeError(Down(dx2.get(), 257, 1152), expect), 2e-2);
}

TEST_F(CudaKernelsTest, DeviceAccountingAndEvents) {
  const auto& p = dev_->props();
  EXPECT_EQ(p.backend, "cuda");
  EXPECT_GT(p.memory_bytes, 0);
  EXPECT_TRUE(p.async);
  auto e0 = dev_->stream()->Record();
  auto big = dev_->Alloc(1 << 30);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(dev_->allocated_bytes(), 1 << 30);
  auto e1 = dev_->stream()->Record();
  EXPECT_GE(*(*e1)->SecondsSince(**e0), 0.0);
  EXPECT_FALSE(dev_->Alloc(p.memory_bytes * 2).ok());
}

}  // namespace
}  // namespace ditune::exec

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/cuda/cuda_dit.h"
#include "executor/parallel.h"

namespace ditune::exec {
namespace {

// The whole generation on the GPU equals the CPU backend's within bf16 tolerance.
TEST_F(CudaKernelsTest, GenerationMatchesTheCpuBackend) {
  auto catalog = Catalog::Load(DITUNE_TEST_DATA_DIR);
  ASSERT_TRUE(catalog.ok());
  for (const char* id : {"tiny-pixart", "tiny-sd3", "tiny-flux"}) {
    const ModelSpec& m = **catalog->Model(id);
    const Workload w{id, 64, 64, 1, 3, 1, OutputType::kLatent};
    auto gpu = cuda::GenerateOnGpu(dev_.get(), m, w, 42);
    ASSERT_TRUE(gpu.ok()) << id << ": " << gpu.status().ToString();
    auto local = CreateComm("local", nullptr, nullptr);
    auto runner = ParallelRunner::Create(m, w, ParallelConfig{}, local->get(), 42);
    ASSERT_TRUE(runner.ok());
    auto cpu = (*runner)->Generate();
    ASSERT_TRUE(cpu.ok());
    EXPECT_LE(MaxRelativeError(gpu->latents[0], cpu->latents[0]), 2e-2) << id;
    EXPECT_GT(gpu->dit_seconds, 0.0);
  }
}

}  // namespace
}  // namespace ditune::exec
