#include "executor/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "executor/cpu_isa.h"
#include "executor/kernel_args.h"
#include "executor/random_hash.h"

namespace ditune::exec {
namespace {

using RowArray = Eigen::Map<Eigen::ArrayXf>;
using ConstRowArray = Eigen::Map<const Eigen::ArrayXf>;

float* F(void* p) { return static_cast<float*>(p); }
const float* F(const void* p) { return static_cast<const float*>(p); }

// The cheap half of the ref kernels' Check: that `batch` matrices of rows x cols (ld, `stride`
// elements apart) at p are described consistently. Whether they lie inside a live buffer is
// not looked up (the ref kernels' job; this backend is the fast path).
Status CheckMatrix(const char* what, const void* p, int64_t rows, int64_t cols, int64_t ld, int batch = 1,
                   int64_t stride = 0) {
  if (rows == 0 || cols == 0) return Status::Ok();
  if (p == nullptr) return Status::InvalidArgument(fmt::format("{}: null pointer", what));
  if (rows < 0 || cols < 0) return Status::InvalidArgument(fmt::format("{}: {}x{} matrix", what, rows, cols));
  if (ld < cols) return Status::InvalidArgument(fmt::format("{}: ld {} below {} columns", what, ld, cols));
  if (batch > 1 && stride < 0) return Status::InvalidArgument(fmt::format("{}: negative batch stride", what));
  return Status::Ok();
}

class Fp32HostKernels : public Kernels {
 public:
  explicit Fp32HostKernels(Device* d) : d_(d) {}
  std::string_view name() const override { return "cpu"; }
  int64_t element_bytes() const override { return 4; }
  Device* device() override { return d_; }

  Status Gemm(const GemmArgs& g) override {
    DITUNE_RETURN_IF_ERROR(CheckGemmArgs(g));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("GEMM A", g.a, g.m, g.k, g.lda, g.batch, g.stride_a));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("GEMM B", g.b, g.k, g.n, g.ldb, g.batch, g.stride_b));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("GEMM C", g.c, g.m, g.n, g.ldc, g.batch, g.stride_c));
    // act and f32 are both float here: c_f32 changes nothing.
    const CpuKernelTable& t = CpuKernels();
    for (int i = 0; i < g.batch; ++i) {
      CpuGemmArgs c;
      c.a = F(g.a) + i * g.stride_a;
      c.lda = g.lda;
      c.b = F(g.b) + i * g.stride_b;
      c.ldb = g.ldb;
      c.c = F(g.c) + i * g.stride_c;
      c.ldc = g.ldc;
      c.m = g.m;
      c.k = g.k;
      c.n = g.n;
      c.accumulate = g.accumulate;
      t.gemm(c);
      if (g.epilogue == Epilogue::kGelu) GeluRows(t, c.c, g.ldc, c.c, g.ldc, g.m, g.n);
    }
    return Status::Ok();
  }

  Status Attention(const AttentionArgs& a) override {
    DITUNE_RETURN_IF_ERROR(CheckAttentionArgs(a));
    const int64_t w = static_cast<int64_t>(a.heads) * a.head_dim;
    if (a.q_rows == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(CheckMatrix("attention Q", a.q, a.q_rows, w, a.ldq, a.batch, a.q_batch_stride));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("attention K", a.k, a.kv_rows, w, a.ldk, a.batch, a.k_batch_stride));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("attention V", a.v, a.kv_rows, w, a.ldv, a.batch, a.v_batch_stride));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("attention O", a.o, a.q_rows, w, a.ldo, a.batch, a.o_batch_stride));
    const CpuKernelTable& t = CpuKernels();
    const int64_t states = a.q_rows * a.heads;  // (row, head) pairs, row-major: the table's m and l layout
    m_.resize(static_cast<size_t>(states));
    l_.resize(static_cast<size_t>(states));
    acc_.resize(static_cast<size_t>(a.q_rows * w));
    for (int i = 0; i < a.batch; ++i) {
      // The table's contract: a fresh state is m = -inf, l = 0, acc = 0 (OnlineSoftmax's).
      std::fill(m_.begin(), m_.end(), -std::numeric_limits<float>::infinity());
      std::fill(l_.begin(), l_.end(), 0.0f);
      std::fill(acc_.begin(), acc_.end(), 0.0f);
      CpuAttentionArgs c;
      c.q = F(a.q) + i * a.q_batch_stride;
      c.ldq = a.ldq;
      c.k = F(a.k) + i * a.k_batch_stride;
      c.ldk = a.ldk;
      c.v = F(a.v) + i * a.v_batch_stride;
      c.ldv = a.ldv;
      c.queries = a.q_rows;
      c.keys = a.kv_rows;
      c.heads = a.heads;
      c.head_dim = a.head_dim;
      c.m = m_.data();
      c.l = l_.data();
      c.acc = acc_.data();
      c.ld_acc = w;
      t.attention(c);
      float* o = F(a.o) + i * a.o_batch_stride;
      for (int64_t r = 0; r < a.q_rows; ++r) {
        for (int h = 0; h < a.heads; ++h) {
          const float inv = 1.0f / l_[r * a.heads + h];
          const float* src = acc_.data() + r * w + static_cast<int64_t>(h) * a.head_dim;
          float* dst = o + r * a.ldo + static_cast<int64_t>(h) * a.head_dim;
          for (int j = 0; j < a.head_dim; ++j) dst[j] = src[j] * inv;
        }
      }
      if (a.lse != nullptr) {
        // m is the running maximum of the scaled scores, l the sum of exp(score - m).
        for (int h = 0; h < a.heads; ++h) {
          float* lse = a.lse + (static_cast<int64_t>(i) * a.heads + h) * a.q_rows;
          for (int64_t r = 0; r < a.q_rows; ++r) lse[r] = m_[r * a.heads + h] + std::log(l_[r * a.heads + h]);
        }
      }
    }
    return Status::Ok();
  }

  Status MergeAttention(const AttentionMergeArgs& a) override {
    DITUNE_RETURN_IF_ERROR(CheckMergeArgs(a));
    const int64_t w = static_cast<int64_t>(a.heads) * a.head_dim;
    if (a.q_rows == 0) return Status::Ok();
    const int64_t n = static_cast<int64_t>(a.batch) * a.heads * a.q_rows;
    DITUNE_RETURN_IF_ERROR(CheckMatrix("attention merge O", a.o, a.q_rows, w, a.ldo, a.batch, a.o_batch_stride));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("attention merge O2", a.o2, a.q_rows, w, a.ldo2, a.batch, a.o2_batch_stride));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("attention merge lse", a.lse, 1, n, n));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("attention merge lse2", a.lse2, 1, n, n));
    for (int i = 0; i < a.batch; ++i) {
      float* o = F(a.o) + i * a.o_batch_stride;
      const float* o2 = F(a.o2) + i * a.o2_batch_stride;
      for (int h = 0; h < a.heads; ++h) {
        const int64_t col = static_cast<int64_t>(h) * a.head_dim;
        for (int64_t r = 0; r < a.q_rows; ++r) {
          float& l1 = a.lse[(static_cast<int64_t>(i) * a.heads + h) * a.q_rows + r];
          const float l2 = a.lse2[(static_cast<int64_t>(i) * a.heads + h) * a.q_rows + r];
          const float mx = std::max(l1, l2);
          const float lse = mx + std::log(std::exp(l1 - mx) + std::exp(l2 - mx));
          const float w1 = std::exp(l1 - lse), w2 = std::exp(l2 - lse);
          float* x = o + r * a.ldo + col;
          const float* y = o2 + r * a.ldo2 + col;
          for (int j = 0; j < a.head_dim; ++j) x[j] = w1 * x[j] + w2 * y[j];
          l1 = lse;
        }
      }
    }
    return Status::Ok();
  }

  Status NormModulate(const NormArgs& n) override {
    if (n.rows == 0) return Status::Ok();
    if (n.rows < 0 || n.cols < 1 || n.ldx < n.cols || n.ldy < n.cols) {
      return Status::InvalidArgument(fmt::format("norm: rows {} cols {} ldx {} ldy {}", n.rows, n.cols, n.ldx, n.ldy));
    }
    DITUNE_RETURN_IF_ERROR(CheckMatrix("norm x", n.x, n.rows, n.cols, n.ldx));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("norm y", n.y, n.rows, n.cols, n.ldy));
    // The table's kernel reads both vectors: a missing one is zeros.
    const float* shift = n.shift;
    const float* scale = n.scale;
    if (shift == nullptr || scale == nullptr) {
      if (static_cast<int64_t>(zeros_.size()) < n.cols) zeros_.assign(static_cast<size_t>(n.cols), 0.0f);
      if (shift == nullptr) shift = zeros_.data();
      if (scale == nullptr) scale = zeros_.data();
    }
    CpuKernels().norm_modulate(F(n.x), n.ldx, F(n.y), n.ldy, n.rows, n.cols, shift, scale);
    return Status::Ok();
  }

  Status GatedResidual(void* x, int64_t ldx, const float* gate, const void* y, int64_t ldy, int64_t rows,
                       int64_t cols) override {
    if (rows == 0 || cols == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(CheckMatrix("residual x", x, rows, cols, ldx));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("residual y", y, rows, cols, ldy));
    for (int64_t r = 0; r < rows; ++r) {
      RowArray xr(F(x) + r * ldx, cols);
      const ConstRowArray yr(F(y) + r * ldy, cols);
      if (gate != nullptr) {
        xr += yr * ConstRowArray(gate, cols);
      } else {
        xr += yr;
      }
    }
    return Status::Ok();
  }

  Status Activate(Activation kind, const void* in, int64_t ld_in, void* out, int64_t ld_out, int64_t rows,
                  int64_t cols) override {
    if (rows == 0 || cols == 0) return Status::Ok();
    const int64_t in_cols = kind == Activation::kSwiGlu ? 2 * cols : cols;
    DITUNE_RETURN_IF_ERROR(CheckMatrix("activation in", in, rows, in_cols, ld_in));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("activation out", out, rows, cols, ld_out));
    if (kind == Activation::kGelu) {
      GeluRows(CpuKernels(), F(in), ld_in, F(out), ld_out, rows, cols);
      return Status::Ok();
    }
    for (int64_t r = 0; r < rows; ++r) {
      const ConstRowArray g(F(in) + r * ld_in, cols), u(F(in) + r * ld_in + cols, cols);
      RowArray(F(out) + r * ld_out, cols) = g / (1.0f + (-g).exp()) * u;
    }
    return Status::Ok();
  }

  Status QkNormRope(void* qk, int64_t ld, int64_t rows, int heads, int head_dim, int64_t first_position) override {
    if (rows == 0) return Status::Ok();
    if (head_dim % 2 != 0) {
      return Status::InvalidArgument(fmt::format("rotary embedding needs an even head_dim, not {}", head_dim));
    }
    if (heads < 1 || head_dim < 1 || rows < 0) {
      return Status::InvalidArgument(fmt::format("qk norm: rows {} heads {} head_dim {}", rows, heads, head_dim));
    }
    const int64_t w = 2LL * heads * head_dim;
    DITUNE_RETURN_IF_ERROR(CheckMatrix("qk norm", qk, rows, w, ld));
    // The ref kernels' math exactly, with what depends on the pair index alone (the
    // frequency) or on the row alone (the angle's cosine and sine) computed once, not per head.
    const int pairs = head_dim / 2;
    freq_.resize(static_cast<size_t>(pairs));
    cos_.resize(static_cast<size_t>(pairs));
    sin_.resize(static_cast<size_t>(pairs));
    for (int j = 0; j < pairs; ++j) {
      freq_[j] = std::pow(10000.0f, -2.0f * static_cast<float>(j) / static_cast<float>(head_dim));
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int j = 0; j < pairs; ++j) {
        const float angle = static_cast<float>(first_position + r) * freq_[j];
        cos_[j] = std::cos(angle);
        sin_[j] = std::sin(angle);
      }
      for (int h = 0; h < 2 * heads; ++h) {
        float* v = F(qk) + r * ld + static_cast<int64_t>(h) * head_dim;
        float ss = 0;
        for (int j = 0; j < head_dim; ++j) ss += v[j] * v[j];
        const float inv = 1.0f / std::sqrt(ss / head_dim + 1e-6f);
        for (int j = 0; j < head_dim; ++j) v[j] *= inv;
        for (int j = 0; j < pairs; ++j) {
          const float c = cos_[j], s = sin_[j];
          const float x0 = v[2 * j], x1 = v[2 * j + 1];
          v[2 * j] = x0 * c - x1 * s;
          v[2 * j + 1] = x0 * s + x1 * c;
        }
      }
    }
    return Status::Ok();
  }

  Status Copy(void* dst, int64_t ld_dst, const void* src, int64_t ld_src, int64_t rows, int64_t cols) override {
    if (rows == 0 || cols == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(CheckMatrix("copy dst", dst, rows, cols, ld_dst));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("copy src", src, rows, cols, ld_src));
    if (ld_dst == cols && ld_src == cols) {
      std::memmove(dst, src, static_cast<size_t>(rows * cols) * sizeof(float));
      return Status::Ok();
    }
    for (int64_t r = 0; r < rows; ++r) {
      std::memmove(F(dst) + r * ld_dst, F(src) + r * ld_src, static_cast<size_t>(cols) * sizeof(float));
    }
    return Status::Ok();
  }

  Status Zero(void* data, int64_t count) override {
    if (count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(CheckMatrix("zero", data, 1, count, count));
    std::memset(data, 0, static_cast<size_t>(count) * sizeof(float));
    return Status::Ok();
  }

  Status FillRandom(void* data, int64_t count, float stddev, uint64_t seed, uint64_t stream) override {
    if (count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(CheckMatrix("fill", data, 1, count, count));
    float* p = F(data);
    for (int64_t i = 0; i < count; ++i) p[i] = stddev * RandomNormal(seed, stream, static_cast<uint64_t>(i));
    return Status::Ok();
  }

  Status EulerStep(float* x, void* xb, const void* pred, int64_t pred_stride, int64_t uncond_offset, bool guidance_on,
                   float guidance, float dt, int prompts, int64_t count) override {
    if (prompts == 0 || count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(CheckMatrix("euler x", x, prompts, count, count));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("euler xb", xb, prompts, count, count));
    DITUNE_RETURN_IF_ERROR(CheckMatrix("euler pred", pred, prompts, count, pred_stride));
    const float* p = F(pred);
    float* out = F(xb);
    for (int i = 0; i < prompts; ++i) {
      const float* cond = p + i * pred_stride;
      const float* uncond = cond + uncond_offset;
      float* xi = x + i * count;
      float* oi = out + i * count;
      for (int64_t j = 0; j < count; ++j) {
        const float c = cond[j];
        const float g = guidance_on ? uncond[j] : c;
        const float v = g + (guidance_on ? guidance * (c - g) : 0.0f);
        xi[j] += dt * v;
        oi[j] = xi[j];
      }
    }
    return Status::Ok();
  }

  Status Upload(const float* host, void* dev, int64_t count) override { return CopyFloats("upload", host, dev, count); }
  Status UploadF32(const float* host, float* dev, int64_t count) override {
    return CopyFloats("upload", host, dev, count);
  }
  Status Download(const void* dev, float* host, int64_t count) override {
    return CopyFloats("download", dev, host, count);
  }
  Status DownloadF32(const float* dev, float* host, int64_t count) override {
    return CopyFloats("download", dev, host, count);
  }

 private:
  static Status CopyFloats(const char* what, const void* src, void* dst, int64_t count) {
    if (count == 0) return Status::Ok();
    if (count < 0 || src == nullptr || dst == nullptr) {
      return Status::InvalidArgument(fmt::format("{}: {} elements, source or destination null", what, count));
    }
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
    return Status::Ok();
  }

  // y = gelu(x) over rows x cols, through the table's contiguous kernel: one call when both
  // are contiguous, a row at a time otherwise. y may equal x.
  static void GeluRows(const CpuKernelTable& t, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t rows,
                       int64_t cols) {
    if (ldx == cols && ldy == cols) {
      t.gelu(x, y, rows * cols);
      return;
    }
    for (int64_t r = 0; r < rows; ++r) t.gelu(x + r * ldx, y + r * ldy, cols);
  }

  Device* d_;
  // Scratch reused across calls: the online-softmax state of one sequence, zero modulation
  // vectors, the rotary embedding's per-pair tables.
  std::vector<float> m_, l_, acc_, zeros_, freq_, cos_, sin_;
};

}  // namespace

StatusOr<std::unique_ptr<Kernels>> NewCpuKernels(Device* device) {
  if (device == nullptr || device->props().backend != "cpu") {
    return Status::InvalidArgument("the cpu kernels run on a cpu device");
  }
  // A DITUNE_CPU_ISA value this CPU cannot run is refused here, as a Status, rather than by
  // CpuKernels() exiting the process at the first kernel.
  DITUNE_RETURN_IF_ERROR(ActiveCpuIsa().status());
  return std::unique_ptr<Kernels>(new Fp32HostKernels(device));
}

}  // namespace ditune::exec
