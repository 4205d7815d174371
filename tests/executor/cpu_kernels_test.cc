// The cpu kernels (fp32 host) against the ref kernels (bf16 storage: agreement to bf16
// rounding) and, for the GEMM and attention, against double-precision computations written
// here (tight: a real bug cannot hide inside the bf16 tolerance). Odd sizes, leading
// dimensions wider than the matrices, several sequences with strides; and the whole DiT
// engine on both backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/config_rules.h"
#include "executor/cpu_device.h"
#include "executor/engine.h"
#include "executor/kernels.h"
#include "executor/random_hash.h"
#include "executor/tensor.h"

namespace ditune::exec {
namespace {

template <class T>
T Must(StatusOr<T> s) {
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    std::abort();
  }
  return std::move(*s);
}

std::vector<float> Random(int64_t n, uint64_t seed, float stddev = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// max_i |a_i - b_i| / max_i |b_i| over the elements of rows x cols matrices (ld), `batch` of
// them `stride` apart: the tolerance scales with the result, not with each element.
double MaxRel(const std::vector<float>& a, const std::vector<double>& b, int64_t rows, int64_t cols, int64_t ld,
              int batch = 1, int64_t stride = 0) {
  double diff = 0, scale = 0;
  for (int i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const size_t at = static_cast<size_t>(i * stride + r * ld + c);
        diff = std::max(diff, std::abs(a[at] - b[at]));
        scale = std::max(scale, std::abs(b[at]));
      }
    }
  }
  return scale > 0 ? diff / scale : diff;
}
double MaxRel(const std::vector<float>& a, const std::vector<float>& b, int64_t rows, int64_t cols, int64_t ld,
              int batch = 1, int64_t stride = 0) {
  return MaxRel(a, std::vector<double>(b.begin(), b.end()), rows, cols, ld, batch, stride);
}

// Whether the elements outside the rows x cols matrices (the leading-dimension padding and the
// gaps between sequences) still hold `before`: a kernel writes only what it is asked to.
bool PaddingKept(const std::vector<float>& after, const std::vector<float>& before, int64_t rows, int64_t cols,
                 int64_t ld, int batch = 1, int64_t stride = 0) {
  std::vector<bool> inside(after.size(), false);
  for (int i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) inside[static_cast<size_t>(i * stride + r * ld + c)] = true;
    }
  }
  for (size_t j = 0; j < after.size(); ++j) {
    if (!inside[j] && after[j] != before[j]) return false;
  }
  return true;
}

double GeluD(double v) { return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

// One backend on a device of its own; buffers live as long as it.
class Side {
 public:
  explicit Side(const char* backend) : dev_(NewCpuDevice()), k_(Must(CreateKernels(backend, dev_.get()))) {}
  Kernels* k() { return k_.get(); }

  void* Act(const std::vector<float>& host) {
    void* p = Alloc(static_cast<int64_t>(host.size()) * k_->element_bytes());
    EXPECT_TRUE(k_->Upload(host.data(), p, static_cast<int64_t>(host.size())).ok());
    return p;
  }
  float* F32(const std::vector<float>& host) {
    auto* p = static_cast<float*>(Alloc(static_cast<int64_t>(host.size()) * 4));
    EXPECT_TRUE(k_->UploadF32(host.data(), p, static_cast<int64_t>(host.size())).ok());
    return p;
  }
  std::vector<float> Get(const void* p, size_t n) {
    std::vector<float> h(n);
    EXPECT_TRUE(k_->Download(p, h.data(), static_cast<int64_t>(n)).ok());
    return h;
  }
  std::vector<float> GetF32(const float* p, size_t n) {
    std::vector<float> h(n);
    EXPECT_TRUE(k_->DownloadF32(p, h.data(), static_cast<int64_t>(n)).ok());
    return h;
  }

 private:
  void* Alloc(int64_t bytes) {
    bufs_.push_back(Must(dev_->Alloc(std::max<int64_t>(bytes, 4))));
    return bufs_.back()->data();
  }
  std::unique_ptr<Device> dev_;
  std::unique_ptr<Kernels> k_;
  std::vector<std::unique_ptr<Buffer>> bufs_;
};

TEST(CpuKernelsTest, Registry) {
  auto dev = NewCpuDevice();
  auto k = CreateKernels("cpu", dev.get());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ((*k)->name(), "cpu");
  EXPECT_EQ((*k)->element_bytes(), 4);
  EXPECT_EQ((*k)->device(), dev.get());
  const auto backends = KernelBackends();
  EXPECT_NE(std::find(backends.begin(), backends.end(), "cpu"), backends.end());
  auto none = CreateKernels("cpu", nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
  // Only the ref kernels count FLOPs.
  EXPECT_FALSE(RefKernelCounts(k->get()).ok());
}

struct GemmCase {
  int64_t m, k, n;
  int batch;
  bool share_b, accumulate, c_f32;
  Epilogue epilogue;
};

TEST(CpuKernelsTest, GemmMatchesDoubleAndRef) {
  const std::vector<GemmCase> cases = {
      {7, 13, 11, 1, false, false, false, Epilogue::kNone},
      {7, 13, 11, 3, false, false, false, Epilogue::kNone},
      {5, 9, 6, 2, true, true, false, Epilogue::kNone},
      {1, 33, 17, 2, false, false, true, Epilogue::kNone},  // a modulation vector (GEMV) in fp32
      {3, 8, 10, 2, false, true, true, Epilogue::kNone},
      {9, 21, 15, 2, true, false, false, Epilogue::kGelu},
      {70, 150, 90, 2, false, false, false, Epilogue::kGelu},  // past Eigen's blocking thresholds
  };
  uint64_t seed = 1;
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(testing::Message() << c.m << "x" << c.k << "x" << c.n << " batch " << c.batch << " accumulate "
                                    << c.accumulate << " c_f32 " << c.c_f32 << " gelu "
                                    << (c.epilogue == Epilogue::kGelu));
    GemmArgs g;
    g.m = c.m, g.k = c.k, g.n = c.n, g.batch = c.batch;
    g.lda = c.k + 3, g.ldb = c.n + 2, g.ldc = c.n + 5;
    g.stride_a = c.m * g.lda + 4;
    g.stride_b = c.share_b ? 0 : c.k * g.ldb + 1;
    g.stride_c = c.m * g.ldc + 7;
    g.accumulate = c.accumulate;
    g.c_f32 = c.c_f32;
    g.epilogue = c.epilogue;
    const auto a = Random(c.batch * g.stride_a, ++seed);
    const auto b = Random(c.batch * std::max<int64_t>(g.stride_b, c.k * g.ldb), ++seed, 0.3f);
    const auto c0 = Random(c.batch * g.stride_c, ++seed);

    // The product in double from the same (unrounded) inputs.
    std::vector<double> want(c0.begin(), c0.end());
    for (int i = 0; i < c.batch; ++i) {
      for (int64_t r = 0; r < c.m; ++r) {
        for (int64_t col = 0; col < c.n; ++col) {
          double s = 0;
          for (int64_t j = 0; j < c.k; ++j) {
            s += static_cast<double>(a[i * g.stride_a + r * g.lda + j]) * b[i * g.stride_b + j * g.ldb + col];
          }
          double& out = want[i * g.stride_c + r * g.ldc + col];
          out = (c.accumulate ? out : 0.0) + s;
          if (c.epilogue == Epilogue::kGelu) out = GeluD(out);
        }
      }
    }

    std::vector<float> got[2];
    const char* names[2] = {"cpu", "ref"};
    for (int s = 0; s < 2; ++s) {
      Side side(names[s]);
      GemmArgs x = g;
      x.a = side.Act(a);
      x.b = side.Act(b);
      x.c = c.c_f32 ? static_cast<void*>(side.F32(c0)) : side.Act(c0);
      ASSERT_TRUE(side.k()->Gemm(x).ok()) << names[s];
      got[s] = c.c_f32 ? side.GetF32(static_cast<float*>(x.c), c0.size()) : side.Get(x.c, c0.size());
    }
    EXPECT_LE(MaxRel(got[0], want, c.m, c.n, g.ldc, c.batch, g.stride_c), 1e-5);
    EXPECT_LE(MaxRel(got[0], got[1], c.m, c.n, g.ldc, c.batch, g.stride_c), 1e-2);
    EXPECT_TRUE(PaddingKept(got[0], c0, c.m, c.n, g.ldc, c.batch, g.stride_c));
  }
}

struct AttnCase {
  int64_t q_rows, kv_rows;
  int heads, head_dim, batch;
};

// Attention of every sequence in double: o at the args' layout (ldo, o_batch_stride), lse at
// (i heads + h) q_rows + r.
void AttentionD(const AttentionArgs& a, const std::vector<float>& q, const std::vector<float>& k,
                const std::vector<float>& v, std::vector<double>* o, std::vector<double>* lse) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  std::vector<double> s(static_cast<size_t>(a.kv_rows));
  for (int i = 0; i < a.batch; ++i) {
    for (int h = 0; h < a.heads; ++h) {
      const int64_t col = static_cast<int64_t>(h) * a.head_dim;
      for (int64_t r = 0; r < a.q_rows; ++r) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < a.kv_rows; ++j) {
          double dot = 0;
          for (int d = 0; d < a.head_dim; ++d) {
            dot += static_cast<double>(q[i * a.q_batch_stride + r * a.ldq + col + d]) *
                   k[i * a.k_batch_stride + j * a.ldk + col + d];
          }
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < a.kv_rows; ++j) sum += std::exp(s[j] - mx);
        for (int d = 0; d < a.head_dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < a.kv_rows; ++j) {
            acc += std::exp(s[j] - mx) * v[i * a.v_batch_stride + j * a.ldv + col + d];
          }
          (*o)[i * a.o_batch_stride + r * a.ldo + col + d] = acc / sum;
        }
        (*lse)[(static_cast<int64_t>(i) * a.heads + h) * a.q_rows + r] = mx + std::log(sum);
      }
    }
  }
}

TEST(CpuKernelsTest, AttentionMatchesDoubleAndRef) {
  const std::vector<AttnCase> cases = {
      {9, 13, 3, 5, 1},
      {9, 13, 3, 5, 3},
      {70, 300, 2, 8, 2},  // more than one query tile (64) and key tile (256)
      {1, 1, 1, 4, 2},
  };
  uint64_t seed = 100;
  for (const AttnCase& c : cases) {
    SCOPED_TRACE(testing::Message() << "q " << c.q_rows << " kv " << c.kv_rows << " heads " << c.heads << " d "
                                    << c.head_dim << " batch " << c.batch);
    const int64_t w = static_cast<int64_t>(c.heads) * c.head_dim;
    AttentionArgs a;
    a.q_rows = c.q_rows, a.kv_rows = c.kv_rows, a.heads = c.heads, a.head_dim = c.head_dim, a.batch = c.batch;
    a.ldq = w + 1, a.ldk = w + 3, a.ldv = w + 2, a.ldo = w + 4;
    a.q_batch_stride = c.q_rows * a.ldq + 2;
    a.k_batch_stride = c.kv_rows * a.ldk + 1;
    a.v_batch_stride = c.kv_rows * a.ldv;
    a.o_batch_stride = c.q_rows * a.ldo + 3;
    const auto q = Random(c.batch * a.q_batch_stride, ++seed);
    const auto k = Random(c.batch * a.k_batch_stride, ++seed);
    const auto v = Random(c.batch * a.v_batch_stride, ++seed);
    const auto o0 = Random(c.batch * a.o_batch_stride, ++seed);
    const size_t nlse = static_cast<size_t>(c.batch * c.heads * c.q_rows);
    std::vector<double> want_o(o0.begin(), o0.end()), want_lse(nlse);
    AttentionD(a, q, k, v, &want_o, &want_lse);

    std::vector<float> got_o[2], got_lse[2];
    const char* names[2] = {"cpu", "ref"};
    for (int s = 0; s < 2; ++s) {
      Side side(names[s]);
      AttentionArgs x = a;
      x.q = side.Act(q);
      x.k = side.Act(k);
      x.v = side.Act(v);
      x.o = side.Act(o0);
      x.lse = side.F32(std::vector<float>(nlse, 0.0f));
      ASSERT_TRUE(side.k()->Attention(x).ok()) << names[s];
      got_o[s] = side.Get(x.o, o0.size());
      got_lse[s] = side.GetF32(x.lse, nlse);
    }
    EXPECT_LE(MaxRel(got_o[0], want_o, c.q_rows, w, a.ldo, c.batch, a.o_batch_stride), 1e-5);
    EXPECT_LE(MaxRel(got_lse[0], want_lse, 1, static_cast<int64_t>(nlse), static_cast<int64_t>(nlse)), 1e-5);
    EXPECT_LE(MaxRel(got_o[0], got_o[1], c.q_rows, w, a.ldo, c.batch, a.o_batch_stride), 2e-2);
    EXPECT_LE(MaxRel(got_lse[0], got_lse[1], 1, static_cast<int64_t>(nlse), static_cast<int64_t>(nlse)), 1e-2);
    EXPECT_TRUE(PaddingKept(got_o[0], o0, c.q_rows, w, a.ldo, c.batch, a.o_batch_stride));
  }
}

TEST(CpuKernelsTest, AttentionWithoutQueriesOrLse) {
  Side side("cpu");
  AttentionArgs a;
  a.heads = 2, a.head_dim = 4, a.ldq = a.ldk = a.ldv = a.ldo = 8, a.kv_rows = 3, a.q_rows = 0;
  const auto kv = Random(24, 7);
  a.k = side.Act(kv);
  a.v = side.Act(kv);
  EXPECT_TRUE(side.k()->Attention(a).ok());  // no queries: nothing to do, nothing read
  a.q_rows = 2;
  a.q = side.Act(Random(16, 8));
  a.o = side.Act(std::vector<float>(16, 0.0f));
  EXPECT_TRUE(side.k()->Attention(a).ok());  // lse is optional
  const auto o = side.Get(a.o, 16);
  EXPECT_GT(std::abs(o[0]) + std::abs(o[15]), 0.0f);
}

// Attention over the keys split in two blocks, merged, is attention over all keys (fp32: tight).
TEST(CpuKernelsTest, MergeOfTwoKeyBlocksIsAttentionOverAll) {
  const int heads = 3, head_dim = 6, batch = 2;
  const int64_t q_rows = 11, kv_rows = 23, split = 9, w = heads * head_dim;
  const int64_t ld = w + 1, ldo = w + 2, ldo2 = w + 5;
  const auto q = Random(batch * q_rows * ld, 201);
  const auto k = Random(batch * kv_rows * ld, 202);
  const auto v = Random(batch * kv_rows * ld, 203);
  const size_t nlse = static_cast<size_t>(batch * heads * q_rows);
  std::vector<float> merged_o[2], merged_lse[2];
  const char* names[2] = {"cpu", "ref"};
  for (int s = 0; s < 2; ++s) {
    Side side(names[s]);
    const auto* qd = static_cast<const char*>(side.Act(q));
    const auto* kd = static_cast<const char*>(side.Act(k));
    const auto* vd = static_cast<const char*>(side.Act(v));
    const int64_t eb = side.k()->element_bytes();
    AttentionArgs a;
    a.q = qd, a.k = kd, a.v = vd;
    a.ldq = a.ldk = a.ldv = ld;
    a.q_rows = q_rows, a.heads = heads, a.head_dim = head_dim, a.batch = batch;
    a.q_batch_stride = q_rows * ld, a.k_batch_stride = a.v_batch_stride = kv_rows * ld;
    // All keys.
    AttentionArgs all = a;
    all.kv_rows = kv_rows;
    all.o = side.Act(std::vector<float>(batch * q_rows * ldo, 0.0f));
    all.ldo = ldo, all.o_batch_stride = q_rows * ldo;
    all.lse = side.F32(std::vector<float>(nlse, 0.0f));
    ASSERT_TRUE(side.k()->Attention(all).ok());
    // Keys [0, split) and [split, kv_rows).
    AttentionArgs first = all;
    first.kv_rows = split;
    first.o = side.Act(std::vector<float>(batch * q_rows * ldo, 0.0f));
    first.lse = side.F32(std::vector<float>(nlse, 0.0f));
    ASSERT_TRUE(side.k()->Attention(first).ok());
    AttentionArgs second = a;
    second.k = kd + split * ld * eb;
    second.v = vd + split * ld * eb;
    second.kv_rows = kv_rows - split;
    second.o = side.Act(std::vector<float>(batch * q_rows * ldo2, 0.0f));
    second.ldo = ldo2, second.o_batch_stride = q_rows * ldo2;
    second.lse = side.F32(std::vector<float>(nlse, 0.0f));
    ASSERT_TRUE(side.k()->Attention(second).ok());
    AttentionMergeArgs m;
    m.o = first.o, m.ldo = ldo, m.o_batch_stride = q_rows * ldo, m.lse = first.lse;
    m.o2 = second.o, m.ldo2 = ldo2, m.o2_batch_stride = q_rows * ldo2, m.lse2 = second.lse;
    m.q_rows = q_rows, m.batch = batch, m.heads = heads, m.head_dim = head_dim;
    ASSERT_TRUE(side.k()->MergeAttention(m).ok());
    merged_o[s] = side.Get(m.o, batch * q_rows * ldo);
    merged_lse[s] = side.GetF32(m.lse, nlse);
    if (s == 0) {
      const auto want_o = side.Get(all.o, batch * q_rows * ldo);
      const auto want_lse = side.GetF32(all.lse, nlse);
      EXPECT_LE(MaxRel(merged_o[0], want_o, q_rows, w, ldo, batch, q_rows * ldo), 1e-5);
      EXPECT_LE(MaxRel(merged_lse[0], want_lse, 1, nlse, nlse), 1e-6);
    }
  }
  EXPECT_LE(MaxRel(merged_o[0], merged_o[1], q_rows, w, ldo, batch, q_rows * ldo), 2e-2);
  EXPECT_LE(MaxRel(merged_lse[0], merged_lse[1], 1, nlse, nlse), 1e-2);
}

TEST(CpuKernelsTest, NormModulateMatchesDoubleAndRef) {
  const int64_t rows = 5, cols = 37, ldx = 40, ldy = 41;
  const auto x = Random(rows * ldx, 301, 2.0f);
  const auto y0 = Random(rows * ldy, 302);
  const auto shift = Random(cols, 303), scale = Random(cols, 304, 0.5f);
  for (int variant = 0; variant < 4; ++variant) {
    const bool with_shift = variant & 1, with_scale = variant & 2;
    SCOPED_TRACE(testing::Message() << "shift " << with_shift << " scale " << with_scale);
    std::vector<double> want(y0.begin(), y0.end());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c) mean += x[r * ldx + c];
      mean /= cols;
      for (int64_t c = 0; c < cols; ++c) var += (x[r * ldx + c] - mean) * (x[r * ldx + c] - mean);
      var /= cols;
      for (int64_t c = 0; c < cols; ++c) {
        want[r * ldy + c] = (x[r * ldx + c] - mean) / std::sqrt(var + 1e-6) * (1.0 + (with_scale ? scale[c] : 0.0)) +
                            (with_shift ? shift[c] : 0.0);
      }
    }
    std::vector<float> got[2];
    const char* names[2] = {"cpu", "ref"};
    for (int s = 0; s < 2; ++s) {
      Side side(names[s]);
      NormArgs n;
      n.x = side.Act(x), n.ldx = ldx, n.y = side.Act(y0), n.ldy = ldy, n.rows = rows, n.cols = cols;
      n.shift = with_shift ? side.F32(shift) : nullptr;
      n.scale = with_scale ? side.F32(scale) : nullptr;
      ASSERT_TRUE(side.k()->NormModulate(n).ok());
      got[s] = side.Get(n.y, y0.size());
    }
    EXPECT_LE(MaxRel(got[0], want, rows, cols, ldy), 1e-5);
    EXPECT_LE(MaxRel(got[0], got[1], rows, cols, ldy), 1e-2);
    EXPECT_TRUE(PaddingKept(got[0], y0, rows, cols, ldy));
  }
}

TEST(CpuKernelsTest, GatedResidualMatchesRef) {
  const int64_t rows = 6, cols = 19, ldx = 23, ldy = 20;
  const auto x = Random(rows * ldx, 401), y = Random(rows * ldy, 402), gate = Random(cols, 403);
  for (const bool gated : {true, false}) {
    std::vector<double> want(x.begin(), x.end());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) want[r * ldx + c] += (gated ? gate[c] : 1.0) * y[r * ldy + c];
    }
    std::vector<float> got[2];
    const char* names[2] = {"cpu", "ref"};
    for (int s = 0; s < 2; ++s) {
      Side side(names[s]);
      void* xd = side.Act(x);
      const float* g = gated ? side.F32(gate) : nullptr;
      ASSERT_TRUE(side.k()->GatedResidual(xd, ldx, g, side.Act(y), ldy, rows, cols).ok());
      got[s] = side.Get(xd, x.size());
    }
    EXPECT_LE(MaxRel(got[0], want, rows, cols, ldx), 1e-6) << "gated " << gated;
    EXPECT_LE(MaxRel(got[0], got[1], rows, cols, ldx), 1e-2) << "gated " << gated;
    EXPECT_TRUE(PaddingKept(got[0], x, rows, cols, ldx));
  }
}

TEST(CpuKernelsTest, ActivationsMatchRef) {
  const int64_t rows = 5, cols = 27;
  struct Case {
    Activation kind;
    int64_t ld_in, ld_out;
    bool in_place;
  };
  for (const Case& c : std::vector<Case>{{Activation::kGelu, 30, 29, false},
                                         {Activation::kGelu, cols, cols, false},
                                         {Activation::kGelu, 31, 31, true},
                                         {Activation::kSwiGlu, 2 * cols + 3, cols + 1, false},
                                         {Activation::kSwiGlu, 2 * cols, cols, false}}) {
    SCOPED_TRACE(testing::Message() << "swiglu " << (c.kind == Activation::kSwiGlu) << " ld_in " << c.ld_in
                                    << " ld_out " << c.ld_out << " in place " << c.in_place);
    const auto in = Random(rows * c.ld_in, 501, 2.0f);
    const auto out0 = Random(rows * c.ld_out, 502);
    std::vector<double> want(c.in_place ? in.begin() : out0.begin(), c.in_place ? in.end() : out0.end());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) {
        const double g = in[r * c.ld_in + j];
        want[r * c.ld_out + j] =
            c.kind == Activation::kGelu ? GeluD(g) : g / (1.0 + std::exp(-g)) * in[r * c.ld_in + cols + j];
      }
    }
    std::vector<float> got[2];
    const char* names[2] = {"cpu", "ref"};
    for (int s = 0; s < 2; ++s) {
      Side side(names[s]);
      void* ind = side.Act(in);
      void* outd = c.in_place ? ind : side.Act(out0);
      ASSERT_TRUE(side.k()->Activate(c.kind, ind, c.ld_in, outd, c.ld_out, rows, cols).ok());
      got[s] = side.Get(outd, c.in_place ? in.size() : out0.size());
    }
    EXPECT_LE(MaxRel(got[0], want, rows, cols, c.ld_out), 1e-5);
    EXPECT_LE(MaxRel(got[0], got[1], rows, cols, c.ld_out), 1e-2);
    EXPECT_TRUE(PaddingKept(got[0], c.in_place ? in : out0, rows, cols, c.ld_out));
  }
}

TEST(CpuKernelsTest, QkNormRopeMatchesRef) {
  const int64_t rows = 7, ld = 2 * 3 * 8 + 5, first = 11;
  const int heads = 3, head_dim = 8;
  const auto qk = Random(rows * ld, 601, 3.0f);
  std::vector<double> want(qk.begin(), qk.end());
  for (int64_t r = 0; r < rows; ++r) {
    for (int h = 0; h < 2 * heads; ++h) {
      double* v = want.data() + r * ld + h * head_dim;
      double ss = 0;
      for (int j = 0; j < head_dim; ++j) ss += v[j] * v[j];
      const double inv = 1.0 / std::sqrt(ss / head_dim + 1e-6);
      for (int j = 0; j < head_dim; ++j) v[j] *= inv;
      for (int j = 0; j < head_dim / 2; ++j) {
        const double angle = static_cast<double>(first + r) * std::pow(10000.0, -2.0 * j / head_dim);
        const double x0 = v[2 * j], x1 = v[2 * j + 1];
        v[2 * j] = x0 * std::cos(angle) - x1 * std::sin(angle);
        v[2 * j + 1] = x0 * std::sin(angle) + x1 * std::cos(angle);
      }
    }
  }
  std::vector<float> got[2];
  const char* names[2] = {"cpu", "ref"};
  for (int s = 0; s < 2; ++s) {
    Side side(names[s]);
    void* d = side.Act(qk);
    ASSERT_TRUE(side.k()->QkNormRope(d, ld, rows, heads, head_dim, first).ok());
    got[s] = side.Get(d, qk.size());
  }
  // The angle is computed in float (as ref does): positions ~20 radians lose ~1e-6.
  EXPECT_LE(MaxRel(got[0], want, rows, 2 * heads * head_dim, ld), 1e-5);
  EXPECT_LE(MaxRel(got[0], got[1], rows, 2 * heads * head_dim, ld), 1e-2);
  EXPECT_TRUE(PaddingKept(got[0], qk, rows, 2 * heads * head_dim, ld));
}

TEST(CpuKernelsTest, CopyZeroUploadDownload) {
  Side side("cpu");
  const int64_t rows = 4, cols = 9, ld_src = 12, ld_dst = 10;
  const auto src = Random(rows * ld_src, 701), dst0 = Random(rows * ld_dst, 702);
  void* s = side.Act(src);
  void* d = side.Act(dst0);
  EXPECT_EQ(side.Get(s, src.size()), src);  // Upload and Download are exact copies
  ASSERT_TRUE(side.k()->Copy(d, ld_dst, s, ld_src, rows, cols).ok());
  const auto got = side.Get(d, dst0.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(got[r * ld_dst + c], src[r * ld_src + c]);
  }
  EXPECT_TRUE(PaddingKept(got, dst0, rows, cols, ld_dst));
  ASSERT_TRUE(side.k()->Zero(d, 13).ok());
  const auto zeroed = side.Get(d, dst0.size());
  for (size_t i = 0; i < zeroed.size(); ++i) EXPECT_EQ(zeroed[i], i < 13 ? 0.0f : got[i]);
  float* f = side.F32(src);
  EXPECT_EQ(side.GetF32(f, src.size()), src);
}

TEST(CpuKernelsTest, FillRandomIsRefsDrawsUnrounded) {
  const int64_t n = 1001;
  const float stddev = 0.02f;
  const uint64_t seed = 42, stream = 77;
  std::vector<float> got[2];
  const char* names[2] = {"cpu", "ref"};
  for (int s = 0; s < 2; ++s) {
    Side side(names[s]);
    void* d = side.Act(std::vector<float>(n, 5.0f));
    ASSERT_TRUE(side.k()->FillRandom(d, n, stddev, seed, stream).ok());
    got[s] = side.Get(d, n);
  }
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[0][i], stddev * RandomNormal(seed, stream, static_cast<uint64_t>(i))) << i;
    // ref stores the same draw rounded to bf16 (8 significant bits).
    EXPECT_LE(std::abs(got[1][i] - got[0][i]), std::abs(got[0][i]) * (1.0f / 256)) << i;
    sum += got[0][i];
    sq += static_cast<double>(got[0][i]) * got[0][i];
  }
  EXPECT_NEAR(std::sqrt(sq / n - (sum / n) * (sum / n)), stddev, 0.1 * stddev);
}

TEST(CpuKernelsTest, EulerStepMatchesRef) {
  const int prompts = 3;
  const int64_t count = 17, pred_stride = 41, uncond_offset = 20;
  const auto x0 = Random(prompts * count, 801);
  const auto pred = Random(prompts * pred_stride, 802);
  const float dt = -0.125f, guidance = 4.0f;
  for (const bool on : {true, false}) {
    std::vector<double> want(x0.begin(), x0.end());
    for (int i = 0; i < prompts; ++i) {
      for (int64_t j = 0; j < count; ++j) {
        const double c = pred[i * pred_stride + j];
        const double u = on ? pred[i * pred_stride + uncond_offset + j] : c;
        want[i * count + j] += dt * (u + guidance * (c - u));
      }
    }
    std::vector<float> got_x[2], got_xb[2];
    const char* names[2] = {"cpu", "ref"};
    for (int s = 0; s < 2; ++s) {
      Side side(names[s]);
      float* x = side.F32(x0);
      void* xb = side.Act(std::vector<float>(x0.size(), 0.0f));
      ASSERT_TRUE(side.k()->EulerStep(x, xb, side.Act(pred), pred_stride, uncond_offset, on, guidance, dt, prompts,
                                      count).ok());
      got_x[s] = side.GetF32(x, x0.size());
      got_xb[s] = side.Get(xb, x0.size());
    }
    EXPECT_LE(MaxRel(got_x[0], want, prompts, count, count), 1e-6) << "guidance " << on;
    EXPECT_EQ(got_xb[0], got_x[0]);  // xb is x (fp32 on both)
    EXPECT_LE(MaxRel(got_x[0], got_x[1], prompts, count, count), 1e-2) << "guidance " << on;
  }
}

TEST(CpuKernelsTest, InvalidArgumentsAreRefused) {
  Side side("cpu");
  Kernels* k = side.k();
  void* p = side.Act(std::vector<float>(4096, 1.0f));
  float* f = side.F32(std::vector<float>(256, 0.0f));
  auto invalid = [](const Status& s) { return s.code() == Status::Code::kInvalidArgument; };

  GemmArgs g;
  g.a = side.Act(std::vector<float>(20, 1.0f));
  g.b = side.Act(std::vector<float>(30, 1.0f));
  g.c = side.Act(std::vector<float>(24, 0.0f));
  g.m = 4, g.k = 5, g.n = 6, g.lda = 5, g.ldb = 6, g.ldc = 6;
  EXPECT_TRUE(k->Gemm(g).ok());
  GemmArgs bad = g;
  bad.lda = 4;
  EXPECT_TRUE(invalid(k->Gemm(bad)));
  bad = g;
  bad.m = 0;
  EXPECT_TRUE(invalid(k->Gemm(bad)));
  bad = g;
  bad.accumulate = true;
  bad.epilogue = Epilogue::kGelu;
  EXPECT_TRUE(invalid(k->Gemm(bad)));
  bad = g;
  bad.b = nullptr;
  EXPECT_TRUE(invalid(k->Gemm(bad)));
  const Status named = k->Gemm([&] {
    GemmArgs x = g;
    x.ldc = 3;
    return x;
  }());
  EXPECT_NE(named.message().find("GEMM 4x5x6"), std::string::npos) << named.ToString();

  AttentionArgs a;
  a.q = a.k = a.v = a.o = p;
  a.heads = 2, a.head_dim = 4, a.ldq = a.ldk = a.ldv = a.ldo = 8, a.q_rows = 3, a.kv_rows = 5;
  AttentionArgs abad = a;
  abad.ldk = 7;
  EXPECT_TRUE(invalid(k->Attention(abad)));
  abad = a;
  abad.batch = 2;  // two sequences into one output
  abad.q_batch_stride = abad.k_batch_stride = abad.v_batch_stride = 40;
  EXPECT_TRUE(invalid(k->Attention(abad)));
  abad = a;
  abad.kv_rows = 0;
  EXPECT_TRUE(invalid(k->Attention(abad)));

  AttentionMergeArgs mg;
  mg.o = p, mg.o2 = p, mg.ldo = mg.ldo2 = 8, mg.lse = f, mg.lse2 = f, mg.q_rows = 3, mg.heads = 0, mg.head_dim = 4;
  EXPECT_TRUE(invalid(k->MergeAttention(mg)));

  NormArgs n;
  n.x = n.y = p, n.rows = 2, n.cols = 8, n.ldx = 8, n.ldy = 7;
  EXPECT_TRUE(invalid(k->NormModulate(n)));
  EXPECT_TRUE(invalid(k->QkNormRope(p, 64, 2, 2, 5, 0)));  // odd head_dim: no pairs to rotate
  EXPECT_TRUE(invalid(k->Activate(Activation::kSwiGlu, p, 10, p, 8, 2, 8)));  // ld_in below 2 cols
  EXPECT_TRUE(invalid(k->Copy(p, 4, p, 8, 2, 6)));
  EXPECT_TRUE(invalid(k->GatedResidual(nullptr, 8, nullptr, p, 8, 2, 8)));
  EXPECT_TRUE(invalid(k->EulerStep(f, p, p, 4, 0, false, 1.0f, 0.1f, 2, 8)));  // pred rows overlap
}

// The cpu kernels storing every act result rounded to bf16 (to nearest even), as the ref kernels
// do: the engine on them must then match the engine on ref to the odd rounding flip, a far
// tighter check of the cpu kernels inside the engine than fp32 against bf16.
float RoundBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  std::memcpy(&f, &bits, 4);
  return f;
}

void RoundAct(void* p, int64_t rows, int64_t cols, int64_t ld, int batch = 1, int64_t stride = 0) {
  if (p == nullptr) return;  // (also keeps GCC's -Warray-bounds from imagining a null x)
  auto* f = static_cast<float*>(p);
  for (int i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) f[i * stride + r * ld + c] = RoundBf16(f[i * stride + r * ld + c]);
    }
  }
}

class Bf16Rounding : public Kernels {
 public:
  explicit Bf16Rounding(Kernels* k) : k_(k) {}
  std::string_view name() const override { return k_->name(); }
  int64_t element_bytes() const override { return k_->element_bytes(); }
  Device* device() override { return k_->device(); }
  Status Gemm(const GemmArgs& g) override {
    const Status s = k_->Gemm(g);
    if (s.ok() && !g.c_f32) RoundAct(g.c, g.m, g.n, g.ldc, g.batch, g.stride_c);
    return s;
  }
  Status Attention(const AttentionArgs& a) override {
    const Status s = k_->Attention(a);
    if (s.ok()) RoundAct(a.o, a.q_rows, static_cast<int64_t>(a.heads) * a.head_dim, a.ldo, a.batch, a.o_batch_stride);
    return s;
  }
  Status MergeAttention(const AttentionMergeArgs& a) override {
    const Status s = k_->MergeAttention(a);
    if (s.ok()) RoundAct(a.o, a.q_rows, static_cast<int64_t>(a.heads) * a.head_dim, a.ldo, a.batch, a.o_batch_stride);
    return s;
  }
  Status NormModulate(const NormArgs& n) override {
    const Status s = k_->NormModulate(n);
    if (s.ok()) RoundAct(n.y, n.rows, n.cols, n.ldy);
    return s;
  }
  Status GatedResidual(void* x, int64_t ldx, const float* gate, const void* y, int64_t ldy, int64_t rows,
                       int64_t cols) override {
    const Status s = k_->GatedResidual(x, ldx, gate, y, ldy, rows, cols);
    if (s.ok()) RoundAct(x, rows, cols, ldx);
    return s;
  }
  Status Activate(Activation kind, const void* in, int64_t ld_in, void* out, int64_t ld_out, int64_t rows,
                  int64_t cols) override {
    const Status s = k_->Activate(kind, in, ld_in, out, ld_out, rows, cols);
    if (s.ok()) RoundAct(out, rows, cols, ld_out);
    return s;
  }
  Status QkNormRope(void* qk, int64_t ld, int64_t rows, int heads, int head_dim, int64_t first_position) override {
    const Status s = k_->QkNormRope(qk, ld, rows, heads, head_dim, first_position);
    if (s.ok()) RoundAct(qk, rows, 2LL * heads * head_dim, ld);
    return s;
  }
  Status Copy(void* dst, int64_t ld_dst, const void* src, int64_t ld_src, int64_t rows, int64_t cols) override {
    return k_->Copy(dst, ld_dst, src, ld_src, rows, cols);
  }
  Status Zero(void* data, int64_t count) override { return k_->Zero(data, count); }
  Status FillRandom(void* data, int64_t count, float stddev, uint64_t seed, uint64_t stream) override {
    const Status s = k_->FillRandom(data, count, stddev, seed, stream);
    if (s.ok()) RoundAct(data, 1, count, count);
    return s;
  }
  Status EulerStep(float* x, void* xb, const void* pred, int64_t pred_stride, int64_t uncond_offset, bool guidance_on,
                   float guidance, float dt, int prompts, int64_t count) override {
    const Status s = k_->EulerStep(x, xb, pred, pred_stride, uncond_offset, guidance_on, guidance, dt, prompts, count);
    if (s.ok()) RoundAct(xb, prompts, count, count);
    return s;
  }
  Status Upload(const float* host, void* dev, int64_t count) override {
    const Status s = k_->Upload(host, dev, count);
    if (s.ok()) RoundAct(dev, 1, count, count);
    return s;
  }
  Status UploadF32(const float* host, float* dev, int64_t count) override { return k_->UploadF32(host, dev, count); }
  Status Download(const void* dev, float* host, int64_t count) override { return k_->Download(dev, host, count); }
  Status DownloadF32(const float* dev, float* host, int64_t count) override {
    return k_->DownloadF32(dev, host, count);
  }

 private:
  Kernels* k_;
};

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

// The whole engine (random weights drawn on the device, query-key norm and gated MLPs where the
// models have them) on the cpu and ref kernels: the same latents to bf16's accuracy, and to
// the rounding flips once the cpu kernels round as ref does.
TEST(CpuKernelsTest, EngineMatchesRefKernels) {
  for (const char* model : {"tiny-pixart", "tiny-sd3", "tiny-flux"}) {
    SCOPED_TRACE(model);
    const ModelSpec& m = **Cat().Model(model);
    const Workload w{model, 64, 64, 1, 2, 1, OutputType::kLatent};
    auto work = EngineWorkFor(m, w, ParallelConfig{}, 0);
    ASSERT_TRUE(work.ok()) << work.status().ToString();
    Mat latents[3];  // cpu, cpu rounding to bf16, ref
    for (int s = 0; s < 3; ++s) {
      auto dev = NewCpuDevice();
      auto kernels = CreateKernels(s < 2 ? "cpu" : "ref", dev.get());
      ASSERT_TRUE(kernels.ok()) << kernels.status().ToString();
      Bf16Rounding rounding(kernels->get());
      auto engine = DitEngine::Create(m, w, *work, s == 1 ? &rounding : kernels->get(), EngineOptions{});
      ASSERT_TRUE(engine.ok()) << s << ": " << engine.status().ToString();
      auto out = (*engine)->Generate();
      ASSERT_TRUE(out.ok()) << s << ": " << out.status().ToString();
      ASSERT_EQ(out->latents.size(), 1u);
      latents[s] = out->latents[0];
    }
    // What the loop added to the initial noise (the latent itself is dominated by it).
    auto tokens = ComputeTokenGeometry(m, w);
    ASSERT_TRUE(tokens.ok());
    const int64_t lat = static_cast<int64_t>(m.latent_channels) * m.patch_spatial * m.patch_spatial * m.patch_temporal;
    const Mat noise = RandomMat(tokens->image_tokens(), lat, 1.0f, EngineOptions{}.seed, 1000);
    const Mat d_cpu = latents[0] - noise, d_rounded = latents[1] - noise, d_ref = latents[2] - noise;
    EXPECT_GT(d_cpu.norm(), 0.0f);
    EXPECT_LE(MaxRelativeError(d_cpu, d_ref), 2e-2);
    EXPECT_LE(MaxRelativeError(d_rounded, d_ref), 5e-3);
  }
}

}  // namespace
}  // namespace ditune::exec
