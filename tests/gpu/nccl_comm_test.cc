// The NCCL communicator on one GPU (a one-rank world under mpirun -np 1): bootstrap over MPI,
// every transfer, a split, transfers ordered after queued kernels, and the watchdog — a transfer that can never complete ends in an
// error after the timeout and aborts the communicator, whose later calls fail at once. NCCL
// refuses two ranks on one GPU, so transfers between GPUs are not tested here.
#include "executor/nccl_comm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "executor/cuda/cuda_backend.h"
#include "executor/device_comm.h"
#include "tests/executor/mpi_test_util.h"

namespace ditune::exec {
namespace {

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (World()->size() != 1) GTEST_SKIP() << "runs as one rank (mpirun -np 1)";
    auto d = cuda::NewCudaDevice(0);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dev_ = std::move(d).value();
    auto c = NewNcclWorld(World());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    nccl_ = std::move(c).value();
  }
  // A device array of `values`.
  float* Up(const std::vector<float>& values) {
    auto b = dev_->Alloc(static_cast<int64_t>(values.size() * sizeof(float)));
    EXPECT_TRUE(b.ok());
    float* p = static_cast<float*>((*b)->data());
    EXPECT_TRUE(cuda::UploadF32(dev_.get(), values.data(), p, static_cast<int64_t>(values.size())).ok());
    buffers_.push_back(std::move(b).value());
    return p;
  }
  std::vector<float> Down(const float* p, size_t n) {
    std::vector<float> v(n);
    EXPECT_TRUE(cuda::DownloadF32(dev_.get(), p, v.data(), static_cast<int64_t>(n)).ok());
    return v;
  }

  std::unique_ptr<Device> dev_;
  std::unique_ptr<Comm> nccl_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

TEST_F(NcclTest, EveryTransferOnOneRank) {
  EXPECT_EQ(nccl_->backend(), "nccl");
  EXPECT_TRUE(nccl_->device_memory());
  ASSERT_NE(nccl_->host(), nullptr);
  EXPECT_EQ(nccl_->host()->backend(), "mpi");
  const std::vector<float> v = {1, -2, 3.5f, 4, 5, 6, 7, 8};
  float* send = Up(v);
  float* recv = Up(std::vector<float>(v.size(), 0));
  ASSERT_TRUE(nccl_->AllToAll(send, recv, v.size()).ok());
  EXPECT_EQ(Down(recv, v.size()), v);
  float* gathered = Up(std::vector<float>(v.size(), 0));
  ASSERT_TRUE(nccl_->AllGather(send, gathered, v.size()).ok());
  EXPECT_EQ(Down(gathered, v.size()), v);
  ASSERT_TRUE(nccl_->AllReduceSum(send, v.size()).ok());
  EXPECT_EQ(Down(send, v.size()), v);
  // bf16 pairs: 8 floats hold 16 bf16 values, summed over one rank: unchanged bits.
  ASSERT_TRUE(nccl_->AllReduceSumBf16(send, 2 * v.size()).ok());
  EXPECT_EQ(Down(send, v.size()), v);
  float* shifted = Up(std::vector<float>(v.size(), 0));
  auto shift = nccl_->SendRecv(send, v.size(), 0, shifted, v.size(), 0, 1);
  ASSERT_TRUE(shift.ok()) << shift.status().ToString();
  ASSERT_TRUE((*shift)->Wait().ok());
  EXPECT_EQ(Down(shifted, v.size()), v);
  auto gather = nccl_->IAllGatherInPlace(send, v.size());
  ASSERT_TRUE(gather.ok()) << gather.status().ToString();
  ASSERT_TRUE((*gather)->Wait().ok());
  EXPECT_EQ(Down(send, v.size()), v);
  EXPECT_TRUE(nccl_->Barrier().ok());
  auto sub = nccl_->Split({0});
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  EXPECT_EQ((*sub)->size(), 1);
  EXPECT_EQ((*sub)->timeout_s(), nccl_->timeout_s());
  ASSERT_TRUE((*sub)->AllReduceSum(send, v.size()).ok());
  EXPECT_EQ(Down(send, v.size()), v);
}

// Transfers are ordered after the kernels queued before them by an event, not a drained
// stream: a ring shift issued right behind a long fill moves the filled values, every time.
TEST_F(NcclTest, TransfersStartAfterTheKernelsQueuedBeforeThem) {
  auto k = cuda::NewCudaKernels(dev_.get());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  DeviceComm dc(nccl_.get(), k->get());
  const int64_t n = int64_t{1} << 26;  // bf16 elements: 128 MiB, a fill of a millisecond or more
  auto src = dev_->Alloc(n * 2), dst = dev_->Alloc(n * 2);
  ASSERT_TRUE(src.ok() && dst.ok());
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    ASSERT_TRUE(cuda::Zero(dev_.get(), (*dst)->data(), n * 2).ok());
    ASSERT_TRUE(cuda::FillRandom(dev_.get(), (*src)->data(), n, 1.0f, seed, 0).ok());  // queued, not waited for
    auto shift = dc.SendRecv((*src)->data(), (*dst)->data(), n, 0, 0, 0);
    ASSERT_TRUE(shift.ok()) << shift.status().ToString();
    ASSERT_TRUE((*shift)->Wait().ok());
    ASSERT_TRUE(cuda::Download(dev_.get(), (*src)->data(), a.data(), n).ok());
    ASSERT_TRUE(cuda::Download(dev_.get(), (*dst)->data(), b.data(), n).ok());
    EXPECT_TRUE(a == b) << "seed " << seed << ": the shift moved data the fill had not written yet";
    EXPECT_NE(a[static_cast<size_t>(n - 1)], 0.0f);
  }
}

// A send with no receive can never complete: the wait ends after the timeout (or NCCL refuses
// the call), the communicator is aborted, and the next call fails at once instead of hanging.
TEST_F(NcclTest, ATransferThatCannotCompleteEndsInAnErrorAndAborts) {
  nccl_->set_timeout_s(2);
  float* data = Up(std::vector<float>(16, 1.0f));
  const auto start = std::chrono::steady_clock::now();
  auto send = nccl_->Isend(data, 16, 0, 0);
  Status st = send.ok() ? (*send)->Wait() : send.status();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  EXPECT_LT(waited, 30.0) << st.ToString();
  std::printf("lone send: %s after %.1f s\n", st.ToString().c_str(), waited);
  const Status after = nccl_->Barrier();
  EXPECT_EQ(after.code(), Status::Code::kUnavailable);
  EXPECT_NE(after.message().find("aborted"), std::string::npos) << after.ToString();
  // The GPU stays usable once the communicator is gone.
  nccl_.reset();
  EXPECT_TRUE(dev_->stream()->Synchronize().ok());
}

}  // namespace
}  // namespace ditune::exec
