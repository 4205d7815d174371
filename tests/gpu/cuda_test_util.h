// The fixture of the GPU tests: a CUDA device, bf16 uploads and downloads of host matrices.
#ifndef DITUNE_TESTS_GPU_CUDA_TEST_UTIL_H_
#define DITUNE_TESTS_GPU_CUDA_TEST_UTIL_H_

#include <memory>

#include <gtest/gtest.h>

#include "executor/cuda/cuda_backend.h"
#include "executor/device.h"
#include "executor/tensor.h"

namespace ditune::exec {

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
    EXPECT_TRUE(cuda::Upload(dev_.get(), m.data(), (*b)->data(), m.size()).ok());
    return std::move(b).value();
  }
  Mat Down(Buffer* b, int64_t rows, int64_t cols) {
    Mat m(rows, cols);
    EXPECT_TRUE(cuda::Download(dev_.get(), b->data(), m.data(), m.size()).ok());
    return m;
  }
  std::unique_ptr<Device> dev_;
};

}  // namespace ditune::exec

#endif  // DITUNE_TESTS_GPU_CUDA_TEST_UTIL_H_
