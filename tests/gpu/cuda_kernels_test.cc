// The CUDA backend's kernels against the CPU backend's on the same inputs: bf16 storage,
// fp32 accumulation, relative error <= 2e-2 (max-norm). Runs only where a GPU is.
#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>

#include "executor/cuda/cuda_backend.h"
#include "executor/device.h"
#include "executor/kernels.h"
#include "executor/random_hash.h"
#include "executor/tensor.h"
#include "tests/gpu/cuda_test_util.h"

namespace ditune::exec {
namespace {

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

// Host transfers larger than the 4M-element staging chunk round-trip exactly (bf16 values),
// and the staging scratch shows in the device's accounting.
TEST_F(CudaKernelsTest, LargeTransfersGoThroughCountedScratch) {
  const int64_t n = (int64_t{1} << 22) * 2 + 12345;  // two whole chunks and a tail
  Mat host(1, n);
  // Multiples of 1/64 with at most 8 significant bits (|k| <= 255), so exact in bf16's 8-bit
  // significand: a round trip must return them unchanged.
  for (int64_t i = 0; i < n; ++i) host(0, i) = static_cast<float>((i % 511) - 255) / 64.0f;
  auto b = dev_->Alloc(n * 2);
  ASSERT_TRUE(b.ok());
  const int64_t before = dev_->allocated_bytes();
  ASSERT_TRUE(cuda::Upload(dev_.get(), host.data(), (*b)->data(), n).ok());
  EXPECT_EQ(dev_->allocated_bytes(), before + (int64_t{1} << 22) * 4) << "the staging scratch is counted";
  EXPECT_GE(dev_->peak_bytes(), dev_->allocated_bytes());
  Mat back(1, n);
  ASSERT_TRUE(cuda::Download(dev_.get(), (*b)->data(), back.data(), n).ok());
  EXPECT_EQ((back - host).cwiseAbs().maxCoeff(), 0.0f);
  EXPECT_EQ(dev_->allocated_bytes(), before + (int64_t{1} << 22) * 4) << "the scratch is reused, not grown";
}

// The cuda Kernels interface (executor/kernels.h) against host math: leading dimensions
// wider than the columns used, strided batches, nullable vectors, and the argument checks.

// rows x cols at `offset` of a flat (1 x N) matrix, rows `ld` apart.
Mat StridedView(const Mat& flat, int64_t offset, int64_t rows, int64_t cols, int64_t ld) {
  return Eigen::Map<const Mat, 0, Eigen::OuterStride<>>(flat.data() + offset, rows, cols, Eigen::OuterStride<>(ld));
}

// Element `e` (bf16) past the start of `b`.
void* ElementPtr(Buffer* b, int64_t e) { return static_cast<char*>(b->data()) + e * 2; }

class CudaKernelsIfaceTest : public CudaKernelsTest {
 protected:
  void SetUp() override {
    CudaKernelsTest::SetUp();
    if (HasFatalFailure()) return;
    auto k = cuda::NewCudaKernels(dev_.get());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    k_ = std::move(k).value();
  }
  std::unique_ptr<Buffer> Alloc(int64_t bytes) {
    auto b = dev_->Alloc(bytes);
    EXPECT_TRUE(b.ok());
    return std::move(b).value();
  }
  std::unique_ptr<Buffer> UpF32(const Mat& m) {
    auto b = Alloc(m.size() * 4);
    EXPECT_TRUE(k_->UploadF32(m.data(), static_cast<float*>(b->data()), m.size()).ok());
    return b;
  }
  Mat DownF32(Buffer* b, int64_t rows, int64_t cols) {
    Mat m(rows, cols);
    EXPECT_TRUE(k_->DownloadF32(static_cast<const float*>(b->data()), m.data(), m.size()).ok());
    return m;
  }
  // `m` rounded to bf16 as the device stores it.
  Mat Bf16(const Mat& m) {
    auto b = Up(m);
    return Down(b.get(), m.rows(), m.cols());
  }
  // Waits for the stream; the status of what ran.
  Status Sync() { return dev_->stream()->Synchronize(); }

  std::unique_ptr<Kernels> k_;
};

TEST_F(CudaKernelsIfaceTest, NameAndDevice) {
  EXPECT_EQ(k_->name(), "cuda");
  EXPECT_EQ(k_->device(), dev_.get());
  EXPECT_FALSE(cuda::NewCudaKernels(nullptr).ok());
}

// A (m x k of lda), B (k x n of ldb), C (m x n of ldc), all wider than used: C = A B, C += A B,
// the GELU epilogue, and C in fp32; the columns of C past n keep their values.
TEST_F(CudaKernelsIfaceTest, GemmLeadingDimensionsAccumulateF32AndGelu) {
  const int64_t m = 67, k = 96, n = 80, lda = 104, ldb = 88, ldc = 96;
  const Mat a = Bf16(RandomMat(m, lda, 1.0f, 41, 1)), b = Bf16(RandomMat(k, ldb, 1.0f / std::sqrt(96.0f), 41, 2));
  const Mat c0 = Bf16(RandomMat(m, ldc, 1.0f, 41, 3));
  const Mat ab = a.leftCols(k) * b.leftCols(n);
  auto da = Up(a), db = Up(b);
  GemmArgs g;
  g.a = da->data();
  g.lda = lda;
  g.b = db->data();
  g.ldb = ldb;
  g.ldc = ldc;
  g.m = m;
  g.k = k;
  g.n = n;
  for (int mode = 0; mode < 3; ++mode) {  // plain, accumulate, GELU
    auto dc = Up(c0);
    g.c = dc->data();
    g.accumulate = mode == 1;
    g.epilogue = mode == 2 ? Epilogue::kGelu : Epilogue::kNone;
    const Status s = k_->Gemm(g);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const Mat c = Down(dc.get(), m, ldc);
    const Mat expect = mode == 0 ? ab : mode == 1 ? Mat(c0.leftCols(n) + ab) : Gelu(ab);
    EXPECT_LE(MaxRelativeError(c.leftCols(n), expect), 2e-2) << "mode " << mode;
    EXPECT_TRUE(c.rightCols(ldc - n) == c0.rightCols(ldc - n)) << "mode " << mode;
  }
  // fp32 C: C = A B, then C += A B, then the GELU epilogue into fp32.
  auto dc = UpF32(c0);
  g.c = dc->data();
  g.c_f32 = true;
  g.accumulate = false;
  g.epilogue = Epilogue::kNone;
  Status s = k_->Gemm(g);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Mat c = DownF32(dc.get(), m, ldc);
  EXPECT_LE(MaxRelativeError(c.leftCols(n), ab), 2e-2);
  EXPECT_TRUE(c.rightCols(ldc - n) == c0.rightCols(ldc - n));
  g.accumulate = true;
  s = k_->Gemm(g);
  ASSERT_TRUE(s.ok()) << s.ToString();
  c = DownF32(dc.get(), m, ldc);
  EXPECT_LE(MaxRelativeError(c.leftCols(n), 2.0f * ab), 2e-2);
  g.accumulate = false;
  g.epilogue = Epilogue::kGelu;
  s = k_->Gemm(g);
  ASSERT_TRUE(s.ok()) << s.ToString();
  c = DownF32(dc.get(), m, ldc);
  EXPECT_LE(MaxRelativeError(c.leftCols(n), Gelu(ab)), 2e-2);
  // The same GEMM again (a cached plan) gives the same result.
  ASSERT_TRUE(k_->Gemm(g).ok());
  EXPECT_LE(MaxRelativeError(DownF32(dc.get(), m, ldc), c), 1e-6);
}

// A strided batch of 3: shared weights (stride_b 0) with gaps between the entries of A and C,
// shared weights over back-to-back entries (one tall GEMM), and a weight per entry.
TEST_F(CudaKernelsIfaceTest, GemmStridedBatch) {
  const int64_t m = 50, k = 64, n = 72, lda = 64, ldb = 72, ldc = 80;
  const int batch = 3;
  struct Case {
    int64_t sa, sb, sc;
  };
  for (const Case& cs : {Case{m * lda + 64, 0, m * ldc + 16}, Case{m * lda, 0, m * ldc},
                         Case{m * lda + 8, k * ldb + 8, m * ldc}}) {
    const Mat a = Bf16(RandomMat(1, cs.sa * (batch - 1) + m * lda, 1.0f, 42, 1));
    const Mat b = Bf16(RandomMat(1, cs.sb * (batch - 1) + k * ldb, 1.0f / 8.0f, 42, 2));
    const int64_t c_size = cs.sc * (batch - 1) + m * ldc;
    auto da = Up(a), db = Up(b), dc = Up(Mat::Zero(1, c_size));
    GemmArgs g;
    g.a = da->data();
    g.lda = lda;
    g.b = db->data();
    g.ldb = ldb;
    g.c = dc->data();
    g.ldc = ldc;
    g.m = m;
    g.k = k;
    g.n = n;
    g.batch = batch;
    g.stride_a = cs.sa;
    g.stride_b = cs.sb;
    g.stride_c = cs.sc;
    const Status s = k_->Gemm(g);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const Mat c = Down(dc.get(), 1, c_size);
    for (int i = 0; i < batch; ++i) {
      const Mat expect = StridedView(a, i * cs.sa, m, k, lda) * StridedView(b, i * cs.sb, k, n, ldb);
      EXPECT_LE(MaxRelativeError(StridedView(c, i * cs.sc, m, n, ldc), expect), 2e-2)
          << "entry " << i << ", strides " << cs.sa << "/" << cs.sb << "/" << cs.sc;
    }
  }
}

// Odd leading dimensions (rows only 2-byte aligned): cuBLASLt is asked for an algorithm for
// that alignment.
TEST_F(CudaKernelsIfaceTest, GemmOddLeadingDimensions) {
  const int64_t m = 33, k = 45, n = 29, lda = 47, ldb = 31, ldc = 35;
  const Mat a = Bf16(RandomMat(m, lda, 1.0f, 43, 1)), b = Bf16(RandomMat(k, ldb, 0.15f, 43, 2));
  auto da = Up(a), db = Up(b), dc = Up(Mat::Zero(m, ldc));
  GemmArgs g;
  g.a = da->data();
  g.lda = lda;
  g.b = db->data();
  g.ldb = ldb;
  g.c = dc->data();
  g.ldc = ldc;
  g.m = m;
  g.k = k;
  g.n = n;
  const Status s = k_->Gemm(g);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LE(MaxRelativeError(Down(dc.get(), m, ldc).leftCols(n), a.leftCols(k) * b.leftCols(n)), 2e-2);
}

TEST_F(CudaKernelsIfaceTest, BadArgumentsReturnAStatus) {
  auto buf = Alloc(1 << 20);
  GemmArgs good;
  good.a = good.b = buf->data();
  good.c = ElementPtr(buf.get(), 1 << 18);
  good.m = good.k = good.n = 16;
  good.lda = good.ldb = good.ldc = 16;
  ASSERT_TRUE(k_->Gemm(good).ok());
  auto bad_gemm = [&](const char* what, auto&& change) {
    GemmArgs g = good;
    change(g);
    const Status s = k_->Gemm(g);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << what << ": " << s.ToString();
  };
  bad_gemm("lda < k", [](GemmArgs& g) { g.lda = 15; });
  bad_gemm("ldb < n", [](GemmArgs& g) { g.ldb = 8; });
  bad_gemm("ldc < n", [](GemmArgs& g) { g.ldc = 1; });
  bad_gemm("m 0", [](GemmArgs& g) { g.m = 0; });
  bad_gemm("k negative", [](GemmArgs& g) { g.k = -1; });
  bad_gemm("null a", [](GemmArgs& g) { g.a = nullptr; });
  bad_gemm("null c", [](GemmArgs& g) { g.c = nullptr; });
  bad_gemm("batch 0", [](GemmArgs& g) { g.batch = 0; });
  bad_gemm("batch with stride_c 0", [](GemmArgs& g) {
    g.batch = 2;
    g.stride_a = 256;
  });
  bad_gemm("accumulate with GELU", [](GemmArgs& g) {
    g.accumulate = true;
    g.epilogue = Epilogue::kGelu;
  });

  AttentionArgs a;
  a.q = a.k = a.v = buf->data();
  a.o = ElementPtr(buf.get(), 1 << 18);
  a.ldq = a.ldk = a.ldv = a.ldo = 128;
  a.q_rows = a.kv_rows = 10;
  a.heads = 2;
  a.head_dim = 64;
  ASSERT_TRUE(k_->Attention(a).ok());
  auto bad_attention = [&](const char* what, auto&& change) {
    AttentionArgs b = a;
    change(b);
    const Status s = k_->Attention(b);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << what << ": " << s.ToString();
  };
  bad_attention("ldq < heads x head_dim", [](AttentionArgs& b) { b.ldq = 100; });
  bad_attention("head_dim 20", [](AttentionArgs& b) { b.head_dim = 20; });
  bad_attention("no heads", [](AttentionArgs& b) { b.heads = 0; });
  bad_attention("no keys", [](AttentionArgs& b) { b.kv_rows = 0; });
  bad_attention("null v", [](AttentionArgs& b) { b.v = nullptr; });

  void* p = buf->data();
  EXPECT_EQ(k_->Copy(p, 8, p, 16, 4, 16).code(), Status::Code::kInvalidArgument) << "ld_dst < cols";
  EXPECT_EQ(k_->GatedResidual(p, 8, nullptr, p, 16, 4, 16).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(k_->Activate(Activation::kSwiGlu, p, 24, p, 16, 4, 16).code(), Status::Code::kInvalidArgument)
      << "SwiGLU input narrower than 2 cols";
  EXPECT_EQ(k_->QkNormRope(p, 256, 4, 2, 63, 0).code(), Status::Code::kInvalidArgument) << "odd head_dim";
  EXPECT_EQ(k_->QkNormRope(p, 100, 4, 2, 64, 0).code(), Status::Code::kInvalidArgument) << "ld < 2 heads head_dim";
  NormArgs norm;
  norm.x = p;
  norm.y = p;
  norm.ldx = 16;
  norm.ldy = 8;
  norm.rows = 4;
  norm.cols = 16;
  EXPECT_EQ(k_->NormModulate(norm).code(), Status::Code::kInvalidArgument) << "ldy < cols";
  EXPECT_EQ(k_->FillRandom(nullptr, 10, 1.0f, 1, 1).code(), Status::Code::kInvalidArgument);
  // Zero sizes are no-ops, whatever the pointers.
  EXPECT_TRUE(k_->Copy(nullptr, 0, nullptr, 0, 0, 0).ok());
  EXPECT_TRUE(k_->Activate(Activation::kGelu, nullptr, 0, nullptr, 0, 0, 16).ok());
  EXPECT_TRUE(k_->Zero(nullptr, 0).ok());
  EXPECT_TRUE(Sync().ok());
}

// Attention through the Kernels (FlashAttention where it applies) and the simple kernel, for
// every head dim: a batch of 2 with q, o wider than heads x head_dim and K, V fused in one
// [rows x 2H] buffer, gaps between the sequences.
TEST_F(CudaKernelsIfaceTest, AttentionWithLeadingDimensionsAndBatchStrides) {
  const float kSentinel = 3.0f;
  for (int d : {16, 32, 64, 72, 88, 128}) {
    const int heads = 3, batch = 2;
    const int64_t h = static_cast<int64_t>(heads) * d;
    const int64_t sq = 77, skv = 150, ldq = h + 8, ldkv = 2 * h, ldo = h + 16;
    const int64_t q_stride = sq * ldq + 24, kv_stride = skv * ldkv + 32, o_stride = sq * ldo + 8;
    const Mat q_all = RandomMat(1, q_stride * batch, 1.0f, 44, d);
    const Mat kv_all = RandomMat(1, kv_stride * batch, 1.0f, 45, d);
    auto dq = Up(q_all), dkv = Up(kv_all);
    AttentionArgs a;
    a.q = dq->data();
    a.k = dkv->data();
    a.v = ElementPtr(dkv.get(), h);
    a.ldq = ldq;
    a.ldk = a.ldv = ldkv;
    a.ldo = ldo;
    a.q_rows = sq;
    a.kv_rows = skv;
    a.batch = batch;
    a.q_batch_stride = q_stride;
    a.k_batch_stride = a.v_batch_stride = kv_stride;
    a.o_batch_stride = o_stride;
    a.heads = heads;
    a.head_dim = d;
    for (int path = 0; path < 3; ++path) {  // the Kernels, the simple kernel, the Kernels forced simple
      auto dout = Up(Mat::Constant(1, o_stride * batch, kSentinel));
      a.o = dout->data();
      Status s;
      if (path == 0) s = k_->Attention(a);
      if (path == 1) s = cuda::SimpleAttention(dev_.get(), a);
      if (path == 2) {
        setenv("DITUNE_ATTENTION", "simple", 1);
        s = k_->Attention(a);
        unsetenv("DITUNE_ATTENTION");
      }
      ASSERT_TRUE(s.ok()) << "d " << d << ", path " << path << ": " << s.ToString();
      const Mat out = Down(dout.get(), 1, o_stride * batch);
      for (int i = 0; i < batch; ++i) {
        const Mat q = StridedView(q_all, i * q_stride, sq, h, ldq);
        const Mat k = StridedView(kv_all, i * kv_stride, skv, h, ldkv);
        const Mat v = StridedView(kv_all, i * kv_stride + h, skv, h, ldkv);
        EXPECT_LE(MaxRelativeError(StridedView(out, i * o_stride, sq, h, ldo), Attention(q, k, v, heads, d)), 2e-2)
            << "d " << d << ", path " << path << ", sequence " << i;
      }
      int64_t touched = 0;
      for (int64_t e = 0; e < out.size(); ++e) {
        const int64_t in_seq = e % o_stride, r = in_seq / ldo, c = in_seq % ldo;
        const bool written = r < sq && c < h;
        if (!written && out(0, e) != kSentinel) ++touched;
      }
      EXPECT_EQ(touched, 0) << "elements outside the output written, d " << d << ", path " << path;
    }
  }
}

TEST_F(CudaKernelsIfaceTest, NormModulateWithLeadingDimensionsAndNullVectors) {
  const int64_t rows = 37, cols = 200, ldx = 216, ldy = 208;
  const float kSentinel = 7.0f;
  const Mat x = Bf16((RandomMat(rows, ldx, 2.0f, 46, 1).array() + 3.0f).matrix());
  const Vec shift = RandomMat(1, cols, 0.1f, 46, 2), scale = RandomMat(1, cols, 0.1f, 46, 3);
  const Vec zero = Vec::Zero(cols);
  auto dx = Up(x), dshift = UpF32(shift), dscale = UpF32(scale);
  for (int mode = 0; mode < 4; ++mode) {  // none, shift only, scale only, both
    const bool with_shift = mode == 1 || mode == 3, with_scale = mode == 2 || mode == 3;
    auto dy = Up(Mat::Constant(rows, ldy, kSentinel));
    NormArgs a;
    a.x = dx->data();
    a.ldx = ldx;
    a.y = dy->data();
    a.ldy = ldy;
    a.rows = rows;
    a.cols = cols;
    a.shift = with_shift ? static_cast<const float*>(dshift->data()) : nullptr;
    a.scale = with_scale ? static_cast<const float*>(dscale->data()) : nullptr;
    const Status s = k_->NormModulate(a);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const Mat y = Down(dy.get(), rows, ldy);
    const Mat expect = NormModulate(x.leftCols(cols), with_shift ? shift : zero, with_scale ? scale : zero);
    EXPECT_LE(MaxRelativeError(y.leftCols(cols), expect), 2e-2) << "mode " << mode;
    EXPECT_TRUE((y.rightCols(ldy - cols).array() == kSentinel).all()) << "mode " << mode;
  }
}

TEST_F(CudaKernelsIfaceTest, GatedResidualWithLeadingDimensionsAndNullGate) {
  const int64_t rows = 45, cols = 300, ldx = 320, ldy = 312;
  const Mat x = Bf16(RandomMat(rows, ldx, 1.0f, 47, 1)), y = Bf16(RandomMat(rows, ldy, 1.0f, 47, 2));
  const Vec gate = RandomMat(1, cols, 1.0f, 47, 3);
  auto dy = Up(y), dgate = UpF32(gate);
  for (bool with_gate : {false, true}) {
    auto dx = Up(x);
    const Status s = k_->GatedResidual(dx->data(), ldx, with_gate ? static_cast<const float*>(dgate->data()) : nullptr,
                                       dy->data(), ldy, rows, cols);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const Mat got = Down(dx.get(), rows, ldx);
    Mat expect = x.leftCols(cols);
    if (with_gate) {
      expect.array() += y.leftCols(cols).array().rowwise() * gate.array();
    } else {
      expect += y.leftCols(cols);
    }
    EXPECT_LE(MaxRelativeError(got.leftCols(cols), expect), 2e-2) << "gate " << with_gate;
    EXPECT_TRUE(got.rightCols(ldx - cols) == x.rightCols(ldx - cols)) << "gate " << with_gate;
  }
}

TEST_F(CudaKernelsIfaceTest, GeluAndSwiGlu) {
  const int64_t rows = 29, cols = 130, ld_in = 2 * cols + 6, ld_out = cols + 10;
  const float kSentinel = -2.0f;
  const Mat in = Bf16(RandomMat(rows, ld_in, 2.0f, 48, 1));
  auto din = Up(in);
  // GELU out of place into a wider output, then in place.
  auto dout = Up(Mat::Constant(rows, ld_out, kSentinel));
  Status s = k_->Activate(Activation::kGelu, din->data(), ld_in, dout->data(), ld_out, rows, cols);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Mat out = Down(dout.get(), rows, ld_out);
  EXPECT_LE(MaxRelativeError(out.leftCols(cols), Gelu(in.leftCols(cols))), 2e-2);
  EXPECT_TRUE((out.rightCols(ld_out - cols).array() == kSentinel).all());
  auto dinplace = Up(in);
  s = k_->Activate(Activation::kGelu, dinplace->data(), ld_in, dinplace->data(), ld_in, rows, cols);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const Mat inplace = Down(dinplace.get(), rows, ld_in);
  EXPECT_LE(MaxRelativeError(inplace.leftCols(cols), Gelu(in.leftCols(cols))), 2e-2);
  EXPECT_TRUE(inplace.rightCols(ld_in - cols) == in.rightCols(ld_in - cols));
  // SwiGLU: silu(in[:, :cols]) * in[:, cols:2 cols].
  dout = Up(Mat::Constant(rows, ld_out, kSentinel));
  s = k_->Activate(Activation::kSwiGlu, din->data(), ld_in, dout->data(), ld_out, rows, cols);
  ASSERT_TRUE(s.ok()) << s.ToString();
  out = Down(dout.get(), rows, ld_out);
  const auto a = in.leftCols(cols).array(), b = in.middleCols(cols, cols).array();
  const Mat expect = (a / (1.0f + (-a).exp()) * b).matrix();
  EXPECT_LE(MaxRelativeError(out.leftCols(cols), expect), 2e-2);
  EXPECT_TRUE((out.rightCols(ld_out - cols).array() == kSentinel).all());
}

// Host reference of QkNormRope (kernels.h), in double.
Mat HostQkNormRope(const Mat& qk, int64_t rows, int heads, int head_dim, int64_t first_position) {
  Mat out = qk;
  for (int64_t r = 0; r < rows; ++r) {
    for (int h = 0; h < 2 * heads; ++h) {
      const int64_t c0 = static_cast<int64_t>(h) * head_dim;
      double ms = 0;
      for (int i = 0; i < head_dim; ++i) ms += static_cast<double>(qk(r, c0 + i)) * qk(r, c0 + i);
      const double inv = 1.0 / std::sqrt(ms / head_dim + 1e-6);
      for (int j = 0; j < head_dim / 2; ++j) {
        const double angle =
            static_cast<double>(first_position + r) * std::pow(10000.0, -2.0 * j / static_cast<double>(head_dim));
        const double x0 = qk(r, c0 + 2 * j) * inv, x1 = qk(r, c0 + 2 * j + 1) * inv;
        out(r, c0 + 2 * j) = static_cast<float>(x0 * std::cos(angle) - x1 * std::sin(angle));
        out(r, c0 + 2 * j + 1) = static_cast<float>(x0 * std::sin(angle) + x1 * std::cos(angle));
      }
    }
  }
  return out;
}

TEST_F(CudaKernelsIfaceTest, QkNormRopeMatchesHostLoop) {
  // head_dim 72 and 128 give more pairs (36, 64) than a warp has lanes.
  for (int head_dim : {64, 72, 128}) {
    for (int64_t first_position : {int64_t{0}, int64_t{4093}}) {
      const int heads = 3;
      const int64_t rows = 19, width = 2 * static_cast<int64_t>(heads) * head_dim, ld = width + 8;
      const Mat qk = Bf16(RandomMat(rows, ld, 1.5f, 49, head_dim));
      auto dqk = Up(qk);
      const Status s = k_->QkNormRope(dqk->data(), ld, rows, heads, head_dim, first_position);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const Mat got = Down(dqk.get(), rows, ld);
      const Mat expect = HostQkNormRope(qk, rows, heads, head_dim, first_position);
      EXPECT_LE(MaxRelativeError(got.leftCols(width), expect.leftCols(width)), 2e-2)
          << "head_dim " << head_dim << ", first position " << first_position;
      EXPECT_TRUE(got.rightCols(ld - width) == qk.rightCols(ld - width)) << "head_dim " << head_dim;
    }
  }
}

TEST_F(CudaKernelsIfaceTest, CopyBetweenStridedViewsAndZero) {
  const int64_t rows = 23, cols = 70, ld_src = 96, ld_dst = 88, src_col = 9, dst_col = 13;
  const float kSentinel = 1.5f;
  const Mat src = Bf16(RandomMat(rows, ld_src, 1.0f, 50, 1));
  auto dsrc = Up(src), ddst = Up(Mat::Constant(rows, ld_dst, kSentinel));
  const Status s =
      k_->Copy(ElementPtr(ddst.get(), dst_col), ld_dst, ElementPtr(dsrc.get(), src_col), ld_src, rows, cols);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const Mat dst = Down(ddst.get(), rows, ld_dst);
  EXPECT_TRUE(dst.middleCols(dst_col, cols) == src.middleCols(src_col, cols));
  EXPECT_TRUE((dst.leftCols(dst_col).array() == kSentinel).all());
  EXPECT_TRUE((dst.rightCols(ld_dst - dst_col - cols).array() == kSentinel).all());
  // Zero: `count` elements from element 5 of the first row.
  ASSERT_TRUE(k_->Zero(ElementPtr(ddst.get(), 5), 100).ok());
  const Mat z = Down(ddst.get(), 1, rows * ld_dst);
  for (int64_t e = 0; e < z.size(); ++e) {
    if (e >= 5 && e < 105) {
      EXPECT_EQ(z(0, e), 0.0f) << e;
    } else {
      EXPECT_EQ(z(0, e), dst.data()[e]) << e;
    }
  }
}

TEST_F(CudaKernelsIfaceTest, FillRandomMatchesTheHostGenerator) {
  const int64_t count = 100003;
  const float stddev = 0.5f;
  const uint64_t seed = 42, stream = 7;
  auto buf = Alloc(count * 2);
  ASSERT_TRUE(k_->FillRandom(buf->data(), count, stddev, seed, stream).ok());
  const Mat got = Down(buf.get(), 1, count);
  int64_t bad = 0;
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float host = RandomNormal(seed, stream, static_cast<uint64_t>(i)) * stddev;
    // bf16 rounding of the same fp32 value, give or take an ulp of the fp32 math.
    if (std::abs(got(0, i) - host) > 1e-2f * std::abs(host) + 1e-30f) {
      if (++bad <= 5) ADD_FAILURE() << "element " << i << ": device " << got(0, i) << ", host " << host;
    }
    sum += got(0, i);
    sq += static_cast<double>(got(0, i)) * got(0, i);
  }
  EXPECT_EQ(bad, 0);
  EXPECT_NEAR(sum / count, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / count), stddev, 0.01);
}

// Two prompts: with guidance, the conditional predictions in rows [0, 2) and the unconditional
// ones two rows later; without, the conditional ones interleaved with unused rows.
TEST_F(CudaKernelsIfaceTest, EulerStepWithAndWithoutGuidance) {
  const int64_t count = 1000;
  const int prompts = 2;
  const float dt = -0.05f, guidance = 4.5f;
  const Mat x0 = RandomMat(prompts, count, 1.0f, 51, 1);
  const Mat pred = Bf16(RandomMat(4, count, 1.0f, 51, 2));
  auto dpred = Up(pred);
  for (bool guidance_on : {true, false}) {
    auto dx = UpF32(x0);
    auto dxb = Alloc(prompts * count * 2);
    const int64_t pred_stride = guidance_on ? count : 2 * count, uncond_offset = guidance_on ? 2 * count : count;
    const Status s = k_->EulerStep(static_cast<float*>(dx->data()), dxb->data(), dpred->data(), pred_stride,
                                   uncond_offset, guidance_on, guidance, dt, prompts, count);
    ASSERT_TRUE(s.ok()) << s.ToString();
    Mat expect = x0;
    for (int p = 0; p < prompts; ++p) {
      for (int64_t i = 0; i < count; ++i) {
        const float c = pred.data()[p * pred_stride + i];
        float v = c;
        if (guidance_on) {
          const float u = pred.data()[p * pred_stride + uncond_offset + i];
          v = u + guidance * (c - u);
        }
        expect(p, i) += dt * v;
      }
    }
    const Mat x = DownF32(dx.get(), prompts, count);
    EXPECT_LE(MaxRelativeError(x, expect), 1e-5) << "guidance " << guidance_on;
    const Mat xb = Down(dxb.get(), prompts, count);
    EXPECT_LE(MaxRelativeError(xb, x), 1e-2) << "guidance " << guidance_on;
    EXPECT_TRUE(xb == Bf16(x)) << "the bf16 copy is x rounded, guidance " << guidance_on;
  }
}

}  // namespace
}  // namespace ditune::exec

namespace ditune::exec {
namespace {

// The log-sum-exp both attention kernels write (Ring attention's merge weights) equals the
// host's ln sum e^(q.k / sqrt d) of the bf16 inputs, and merging the attention over two key
// blocks gives the attention over both.
TEST_F(CudaKernelsIfaceTest, AttentionLogSumExpAndMerge) {
  for (int d : {16, 64, 72, 88, 128}) {
    const int heads = 3, batch = 2;
    const int64_t h = static_cast<int64_t>(heads) * d, sq = 77, ka = 64, kb = 86, skv = ka + kb;
    const Mat q = Bf16(RandomMat(batch * sq, h, 1.0f, 46, d)), kv = Bf16(RandomMat(batch * skv, 2 * h, 1.0f, 47, d));
    auto dq = Up(q), dkv = Up(kv);
    const int64_t n_lse = batch * heads * sq;
    for (int path = 0; path < 2; ++path) {  // the Kernels (FlashAttention where it applies), the simple kernel
      auto whole = Alloc(batch * sq * h * 2), pa = Alloc(batch * sq * h * 2), pb = Alloc(batch * sq * h * 2);
      auto lw = Alloc(n_lse * 4), la = Alloc(n_lse * 4), lb = Alloc(n_lse * 4);
      auto attend = [&](int64_t key0, int64_t keys, Buffer* o, Buffer* l) {
        AttentionArgs a;
        a.q = dq->data();
        a.ldq = h;
        a.q_batch_stride = sq * h;
        a.k = ElementPtr(dkv.get(), key0 * 2 * h);
        a.v = ElementPtr(dkv.get(), key0 * 2 * h + h);
        a.ldk = a.ldv = 2 * h;
        a.k_batch_stride = a.v_batch_stride = skv * 2 * h;
        a.o = o->data();
        a.ldo = h;
        a.o_batch_stride = sq * h;
        a.q_rows = sq;
        a.kv_rows = keys;
        a.batch = batch;
        a.heads = heads;
        a.head_dim = d;
        a.lse = static_cast<float*>(l->data());
        return path == 0 ? k_->Attention(a) : cuda::SimpleAttention(dev_.get(), a);
      };
      ASSERT_TRUE(attend(0, skv, whole.get(), lw.get()).ok()) << "d " << d << " path " << path;
      ASSERT_TRUE(attend(0, ka, pa.get(), la.get()).ok());
      ASSERT_TRUE(attend(ka, kb, pb.get(), lb.get()).ok());
      AttentionMergeArgs m;
      m.o = pa->data();
      m.ldo = m.ldo2 = h;
      m.o_batch_stride = m.o2_batch_stride = sq * h;
      m.lse = static_cast<float*>(la->data());
      m.o2 = pb->data();
      m.lse2 = static_cast<const float*>(lb->data());
      m.q_rows = sq;
      m.batch = batch;
      m.heads = heads;
      m.head_dim = d;
      ASSERT_TRUE(k_->MergeAttention(m).ok());
      ASSERT_TRUE(Sync().ok());
      EXPECT_LE(MaxRelativeError(Down(pa.get(), batch * sq, h), Down(whole.get(), batch * sq, h)), 2e-2)
          << "d " << d << " path " << path;
      const Mat got_whole = DownF32(lw.get(), 1, n_lse), got_merged = DownF32(la.get(), 1, n_lse);
      for (int i = 0; i < batch; ++i) {
        OnlineSoftmax s(sq, heads, d);
        s.Add(q.middleRows(i * sq, sq), kv.middleRows(i * skv, skv).leftCols(h), kv.middleRows(i * skv, skv).rightCols(h));
        for (int hh = 0; hh < heads; ++hh) {
          for (int64_t r = 0; r < sq; ++r) {
            const double want = s.m(r, hh) + std::log(s.l(r, hh));
            const int64_t at = (i * heads + hh) * sq + r;
            ASSERT_NEAR(got_whole(0, at), want, 2e-3 * std::max(1.0, std::abs(want))) << "d " << d << " path " << path;
            ASSERT_NEAR(got_merged(0, at), want, 2e-3 * std::max(1.0, std::abs(want))) << "d " << d << " path " << path;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ditune::exec
