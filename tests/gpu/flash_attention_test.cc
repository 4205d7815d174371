// The tensor-core FlashAttention (executor/cuda/flash_attention.h) against the CPU
// reference: every head dim, query/key counts off the tile sizes, batches with strides,
// fused-QKV column slices and a wide output, and the argument checks.
#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include "executor/cuda/cuda_device_impl.h"
#include "executor/cuda/flash_attention.h"
#include "executor/kernels.h"
#include "executor/tensor.h"
#include "tests/gpu/cuda_test_util.h"

namespace ditune::exec {
namespace {

class FlashAttentionTest : public CudaKernelsTest {
 protected:
  cudaStream_t Stream() {
    auto d = cuda::AsCuda(dev_.get());
    EXPECT_TRUE(d.ok());
    return d.ok() ? (*d)->raw_stream() : nullptr;
  }
  // Runs `a` and waits for it; the status of the launch or of the stream.
  Status Run(const AttentionArgs& a) {
    DITUNE_RETURN_IF_ERROR(cuda::FlashAttention(a, Stream()));
    return dev_->stream()->Synchronize();
  }
  // Packed q (sq x heads d), k and v (skv x heads d): max-norm relative error of the kernel
  // against the CPU reference.
  double PackedError(int64_t sq, int64_t skv, int heads, int d, uint64_t seed) {
    const int64_t w = static_cast<int64_t>(heads) * d;
    const Mat q = RandomMat(sq, w, 1.0f, seed, 1), k = RandomMat(skv, w, 1.0f, seed, 2),
              v = RandomMat(skv, w, 1.0f, seed, 3);
    auto dq = Up(q), dk = Up(k), dv = Up(v);
    auto o = dev_->Alloc(sq * w * 2);
    EXPECT_TRUE(o.ok());
    if (!o.ok()) return 1e9;
    AttentionArgs a;
    a.q = dq->data();
    a.k = dk->data();
    a.v = dv->data();
    a.o = (*o)->data();
    a.ldq = a.ldk = a.ldv = a.ldo = w;
    a.q_rows = sq;
    a.kv_rows = skv;
    a.heads = heads;
    a.head_dim = d;
    const Status s = Run(a);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return MaxRelativeError(Down(o->get(), sq, w), Attention(q, k, v, heads, d));
  }
};

TEST_F(FlashAttentionTest, MatchesCpuForEveryHeadDimAndTail) {
  struct Case {
    int64_t sq, skv;
    int heads;
  };
  // Tiles are 16 kWarps query rows x 64 keys: exact tiles, one past, one short, a single
  // query over fewer keys than one MMA n-tile, and the attention test's 333 x 1000.
  const std::vector<Case> cases = {{333, 1000, 4}, {1, 7, 3}, {128, 64, 2}, {129, 65, 2}, {127, 63, 2}, {16, 200, 1}};
  for (int d : {64, 72, 88, 128}) {
    EXPECT_TRUE(cuda::FlashAttentionSupports(d)) << d;
    for (const Case& c : cases) {
      EXPECT_LE(PackedError(c.sq, c.skv, c.heads, d, 11 + d), 2e-2)
          << "d " << d << ", " << c.sq << " queries over " << c.skv << " keys, " << c.heads << " heads";
    }
  }
}

TEST_F(FlashAttentionTest, MatchesCpuAtDiTLength) {
  EXPECT_LE(PackedError(4096, 4096, 2, 128, 21), 2e-2) << "4096 x 4096, 2 x 128";
  EXPECT_LE(PackedError(4096, 4096, 1, 72, 22), 2e-2) << "4096 x 4096, 1 x 72";
  EXPECT_LE(PackedError(4608, 4608, 1, 88, 23), 2e-2) << "4608 x 4608, 1 x 88";
  EXPECT_LE(PackedError(4429, 4429, 1, 64, 24), 2e-2) << "4429 x 4429, 1 x 64";
}

// Self-attention of a batch of 2 over one fused [rows x 3H] QKV buffer (ld 3H, a gap of rows
// between the sequences), written into an output of ld > H whose other elements must keep
// their sentinel value; then cross-attention with K and V in a fused [rows x 2H] buffer.
TEST_F(FlashAttentionTest, BatchedStridedAndFusedLayouts) {
  const float kSentinel = 5.0f;  // exact in bf16
  for (int d : {64, 72, 88, 128}) {
    const int heads = 3;
    const int64_t h = static_cast<int64_t>(heads) * d;
    const int batch = 2;
    {
      const int64_t s = 300, in_rows = s + 5, out_rows = s + 3;  // rows per sequence in the buffers
      const int64_t ldqkv = 3 * h, ldo = h + 24;
      const Mat qkv = RandomMat(batch * in_rows, ldqkv, 1.0f, 31, d);
      auto dqkv = Up(qkv);
      const Mat o_init = Mat::Constant(batch * out_rows, ldo, kSentinel);
      auto dout = Up(o_init);
      const auto* base = static_cast<const uint16_t*>(dqkv->data());  // bf16 elements
      AttentionArgs a;
      a.q = base;
      a.k = base + h;
      a.v = base + 2 * h;
      a.o = dout->data();
      a.ldq = a.ldk = a.ldv = ldqkv;
      a.ldo = ldo;
      a.q_rows = a.kv_rows = s;
      a.batch = batch;
      a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = in_rows * ldqkv;
      a.o_batch_stride = out_rows * ldo;
      a.heads = heads;
      a.head_dim = d;
      const Status st = Run(a);
      ASSERT_TRUE(st.ok()) << st.ToString();
      const Mat out = Down(dout.get(), batch * out_rows, ldo);
      for (int b = 0; b < batch; ++b) {
        const Mat q = qkv.block(b * in_rows, 0, s, h), k = qkv.block(b * in_rows, h, s, h),
                  v = qkv.block(b * in_rows, 2 * h, s, h);
        const Mat got = out.block(b * out_rows, 0, s, h);
        EXPECT_LE(MaxRelativeError(got, Attention(q, k, v, heads, d)), 2e-2) << "self, d " << d << ", sequence " << b;
      }
      int64_t touched = 0;
      for (int64_t r = 0; r < out.rows(); ++r) {
        for (int64_t c = 0; c < out.cols(); ++c) {
          const bool written = r % out_rows < s && c < h;
          if (!written && out(r, c) != kSentinel) ++touched;
        }
      }
      EXPECT_EQ(touched, 0) << "elements outside the output written, d " << d;
    }
    {
      const int64_t sq = 77, skv = 1000;
      const int64_t ldq = h + 8, ldkv = 2 * h, ldo = h + 40;
      const Mat q_all = RandomMat(batch * sq, ldq, 1.0f, 32, d), kv_all = RandomMat(batch * skv, ldkv, 1.0f, 33, d);
      auto dq = Up(q_all), dkv = Up(kv_all);
      auto dout = Up(Mat::Constant(batch * sq, ldo, kSentinel));
      const auto* kv_base = static_cast<const uint16_t*>(dkv->data());
      AttentionArgs a;
      a.q = dq->data();
      a.k = kv_base;
      a.v = kv_base + h;
      a.o = dout->data();
      a.ldq = ldq;
      a.ldk = a.ldv = ldkv;
      a.ldo = ldo;
      a.q_rows = sq;
      a.kv_rows = skv;
      a.batch = batch;
      a.q_batch_stride = sq * ldq;
      a.k_batch_stride = a.v_batch_stride = skv * ldkv;
      a.o_batch_stride = sq * ldo;
      a.heads = heads;
      a.head_dim = d;
      const Status st = Run(a);
      ASSERT_TRUE(st.ok()) << st.ToString();
      const Mat out = Down(dout.get(), batch * sq, ldo);
      for (int b = 0; b < batch; ++b) {
        const Mat q = q_all.block(b * sq, 0, sq, h), k = kv_all.block(b * skv, 0, skv, h),
                  v = kv_all.block(b * skv, h, skv, h);
        EXPECT_LE(MaxRelativeError(out.block(b * sq, 0, sq, h), Attention(q, k, v, heads, d)), 2e-2)
            << "cross, d " << d << ", sequence " << b;
        EXPECT_TRUE((out.block(b * sq, h, sq, ldo - h).array() == kSentinel).all()) << "cross, d " << d;
      }
    }
  }
}

TEST_F(FlashAttentionTest, RejectsBadArguments) {
  for (int d : {16, 32, 80, 96, 256}) EXPECT_FALSE(cuda::FlashAttentionSupports(d)) << d;
  auto buf = dev_->Alloc(64 * 1024 * 2);
  ASSERT_TRUE(buf.ok());
  auto* p = static_cast<uint16_t*>((*buf)->data());
  AttentionArgs good;
  good.q = good.k = good.v = p;
  good.o = p + 32 * 1024;
  good.ldq = good.ldk = good.ldv = good.ldo = 128;
  good.q_rows = good.kv_rows = 100;
  good.heads = 2;
  good.head_dim = 64;
  ASSERT_TRUE(Run(good).ok());
  // Each case: `good` with one thing wrong.
  auto bad = [&](const char* what, auto&& change) {
    AttentionArgs a = good;
    change(a);
    const Status s = cuda::FlashAttention(a, Stream());
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << what << ": " << s.ToString();
  };
  bad("head_dim 96", [](AttentionArgs& a) {
    a.head_dim = 96;
    a.ldq = a.ldk = a.ldv = a.ldo = 192;
  });
  bad("no heads", [](AttentionArgs& a) { a.heads = 0; });
  bad("no batch", [](AttentionArgs& a) { a.batch = 0; });
  bad("batch over the grid limit", [](AttentionArgs& a) { a.batch = 70000; });
  bad("heads over the grid limit", [](AttentionArgs& a) {
    a.heads = 70000;
    a.ldq = a.ldk = a.ldv = a.ldo = 70000 * 64;
  });
  bad("ldk below heads x head_dim", [](AttentionArgs& a) { a.ldk = 120; });
  bad("ldo not a multiple of 8", [](AttentionArgs& a) { a.ldo = 132; });
  bad("q not 16-byte aligned", [p](AttentionArgs& a) { a.q = p + 4; });
  bad("batch stride not a multiple of 8", [](AttentionArgs& a) {
    a.batch = 2;
    a.v_batch_stride = 100 * 128 + 4;
  });
  bad("null v", [](AttentionArgs& a) { a.v = nullptr; });
  bad("no keys", [](AttentionArgs& a) { a.kv_rows = 0; });
  AttentionArgs a = good;
  a.q_rows = 0;
  a.q = nullptr;
  a.o = nullptr;
  EXPECT_TRUE(cuda::FlashAttention(a, Stream()).ok()) << "no queries is a no-op";
}

}  // namespace
}  // namespace ditune::exec
