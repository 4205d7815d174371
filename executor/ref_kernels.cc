// The ref kernels: the Kernels contract on host memory, bf16 storage rounded to nearest even
// after every kernel like a GPU's, fp32 math (Eigen). Every access is checked against the
// cpu device's live buffers, so an engine indexing bug fails here, on any machine, with the
// call and the sizes named. Slow by design: for tests and tiny models.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "executor/cpu_device.h"
#include "executor/kernel_args.h"
#include "executor/ref_kernels.h"
#include "executor/random_hash.h"
#include "executor/tensor.h"

namespace ditune::exec {
namespace {

float FromBf16(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float GeluTanh(float v) { return 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v))); }

class RefKernels : public Kernels {
 public:
  explicit RefKernels(Device* d) : d_(d) {}
  std::string_view name() const override { return "ref"; }
  int64_t element_bytes() const override { return 2; }
  Device* device() override { return d_; }

  Status Gemm(const GemmArgs& g) override {
    DITUNE_RETURN_IF_ERROR(CheckGemmArgs(g));
    DITUNE_RETURN_IF_ERROR(Check("GEMM A", g.a, g.m, g.k, g.lda, g.batch, g.stride_a, 2));
    DITUNE_RETURN_IF_ERROR(Check("GEMM B", g.b, g.k, g.n, g.ldb, g.batch, g.stride_b, 2));
    DITUNE_RETURN_IF_ERROR(Check("GEMM C", g.c, g.m, g.n, g.ldc, g.batch, g.stride_c, g.c_f32 ? 4 : 2));
    for (int i = 0; i < g.batch; ++i) {
      const Mat a = Load(g.a, g.m, g.k, g.lda, i * g.stride_a);
      const Mat b = Load(g.b, g.k, g.n, g.ldb, i * g.stride_b);
      Mat c = a * b;
      if (g.accumulate) c += g.c_f32 ? LoadF32(static_cast<const float*>(g.c), g.m, g.n, g.ldc, i * g.stride_c)
                                     : Load(g.c, g.m, g.n, g.ldc, i * g.stride_c);
      if (g.epilogue == Epilogue::kGelu) c = c.unaryExpr(&GeluTanh);
      if (g.c_f32) {
        StoreF32(c, static_cast<float*>(g.c), g.ldc, i * g.stride_c);
      } else {
        Store(c, g.c, g.ldc, i * g.stride_c);
      }
    }
    const double flops = 2.0 * g.m * g.k * g.n * g.batch;
    (g.m == 1 ? counts_.gemv_flops : counts_.gemm_flops) += flops;
    ++counts_.gemms;
    return Status::Ok();
  }

  Status Attention(const AttentionArgs& a) override {
    DITUNE_RETURN_IF_ERROR(CheckAttentionArgs(a));
    const int64_t w = static_cast<int64_t>(a.heads) * a.head_dim;
    if (a.q_rows == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("attention Q", a.q, a.q_rows, w, a.ldq, a.batch, a.q_batch_stride, 2));
    DITUNE_RETURN_IF_ERROR(Check("attention K", a.k, a.kv_rows, w, a.ldk, a.batch, a.k_batch_stride, 2));
    DITUNE_RETURN_IF_ERROR(Check("attention V", a.v, a.kv_rows, w, a.ldv, a.batch, a.v_batch_stride, 2));
    DITUNE_RETURN_IF_ERROR(Check("attention O", a.o, a.q_rows, w, a.ldo, a.batch, a.o_batch_stride, 2));
    if (a.lse != nullptr) {
      DITUNE_RETURN_IF_ERROR(Check("attention lse", a.lse, 1, static_cast<int64_t>(a.batch) * a.heads * a.q_rows,
                                   static_cast<int64_t>(a.batch) * a.heads * a.q_rows, 1, 0, 4));
    }
    for (int i = 0; i < a.batch; ++i) {
      const Mat q = Load(a.q, a.q_rows, w, a.ldq, i * a.q_batch_stride);
      const Mat k = Load(a.k, a.kv_rows, w, a.ldk, i * a.k_batch_stride);
      const Mat v = Load(a.v, a.kv_rows, w, a.ldv, i * a.v_batch_stride);
      OnlineSoftmax state(a.q_rows, a.heads, a.head_dim);
      state.Add(q, k, v);
      Store(state.Finish(), a.o, a.ldo, i * a.o_batch_stride);
      if (a.lse != nullptr) {
        // m is the running maximum of the scaled scores, l the sum of exp(score - m).
        for (int h = 0; h < a.heads; ++h) {
          for (int64_t r = 0; r < a.q_rows; ++r) {
            a.lse[(static_cast<int64_t>(i) * a.heads + h) * a.q_rows + r] = state.m(r, h) + std::log(state.l(r, h));
          }
        }
      }
    }
    counts_.attention_flops += 4.0 * a.batch * a.q_rows * a.kv_rows * w;
    ++counts_.attentions;
    return Status::Ok();
  }

  Status MergeAttention(const AttentionMergeArgs& a) override {
    DITUNE_RETURN_IF_ERROR(CheckMergeArgs(a));
    const int64_t w = static_cast<int64_t>(a.heads) * a.head_dim;
    if (a.q_rows == 0) return Status::Ok();
    const int64_t n = static_cast<int64_t>(a.batch) * a.heads * a.q_rows;
    DITUNE_RETURN_IF_ERROR(Check("attention merge O", a.o, a.q_rows, w, a.ldo, a.batch, a.o_batch_stride, 2));
    DITUNE_RETURN_IF_ERROR(Check("attention merge O2", a.o2, a.q_rows, w, a.ldo2, a.batch, a.o2_batch_stride, 2));
    DITUNE_RETURN_IF_ERROR(Check("attention merge lse", a.lse, 1, n, n, 1, 0, 4));
    DITUNE_RETURN_IF_ERROR(Check("attention merge lse2", a.lse2, 1, n, n, 1, 0, 4));
    for (int i = 0; i < a.batch; ++i) {
      Mat o = Load(a.o, a.q_rows, w, a.ldo, i * a.o_batch_stride);
      const Mat o2 = Load(a.o2, a.q_rows, w, a.ldo2, i * a.o2_batch_stride);
      for (int h = 0; h < a.heads; ++h) {
        for (int64_t r = 0; r < a.q_rows; ++r) {
          float& l1 = a.lse[(static_cast<int64_t>(i) * a.heads + h) * a.q_rows + r];
          const float l2 = a.lse2[(static_cast<int64_t>(i) * a.heads + h) * a.q_rows + r];
          const float mx = std::max(l1, l2);
          const float lse = mx + std::log(std::exp(l1 - mx) + std::exp(l2 - mx));
          const float w1 = std::exp(l1 - lse), w2 = std::exp(l2 - lse);
          auto row = o.block(r, static_cast<int64_t>(h) * a.head_dim, 1, a.head_dim);
          row = w1 * row + w2 * o2.block(r, static_cast<int64_t>(h) * a.head_dim, 1, a.head_dim);
          l1 = lse;
        }
      }
      Store(o, a.o, a.ldo, i * a.o_batch_stride);
    }
    ++counts_.elementwise;
    return Status::Ok();
  }

  Status NormModulate(const NormArgs& n) override {
    if (n.rows == 0) return Status::Ok();
    if (n.rows < 0 || n.cols < 1 || n.ldx < n.cols || n.ldy < n.cols) {
      return Status::InvalidArgument(fmt::format("norm: rows {} cols {} ldx {} ldy {}", n.rows, n.cols, n.ldx, n.ldy));
    }
    DITUNE_RETURN_IF_ERROR(Check("norm x", n.x, n.rows, n.cols, n.ldx, 1, 0, 2));
    DITUNE_RETURN_IF_ERROR(Check("norm y", n.y, n.rows, n.cols, n.ldy, 1, 0, 2));
    if (n.shift) DITUNE_RETURN_IF_ERROR(Check("norm shift", n.shift, 1, n.cols, n.cols, 1, 0, 4));
    if (n.scale) DITUNE_RETURN_IF_ERROR(Check("norm scale", n.scale, 1, n.cols, n.cols, 1, 0, 4));
    const Mat x = Load(n.x, n.rows, n.cols, n.ldx, 0);
    const Vec shift = n.shift ? Vec(Eigen::Map<const Vec>(n.shift, n.cols)) : Vec(Vec::Zero(n.cols));
    const Vec scale = n.scale ? Vec(Eigen::Map<const Vec>(n.scale, n.cols)) : Vec(Vec::Zero(n.cols));
    Store(exec::NormModulate(x, shift, scale), n.y, n.ldy, 0);
    ++counts_.elementwise;
    return Status::Ok();
  }

  Status GatedResidual(void* x, int64_t ldx, const float* gate, const void* y, int64_t ldy, int64_t rows,
                       int64_t cols) override {
    if (rows == 0 || cols == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("residual x", x, rows, cols, ldx, 1, 0, 2));
    DITUNE_RETURN_IF_ERROR(Check("residual y", y, rows, cols, ldy, 1, 0, 2));
    if (gate) DITUNE_RETURN_IF_ERROR(Check("residual gate", gate, 1, cols, cols, 1, 0, 4));
    Mat out = Load(x, rows, cols, ldx, 0);
    const Mat ym = Load(y, rows, cols, ldy, 0);
    if (gate) {
      out.array() += ym.array().rowwise() * Eigen::Map<const Vec>(gate, cols).array();
    } else {
      out += ym;
    }
    Store(out, x, ldx, 0);
    ++counts_.elementwise;
    return Status::Ok();
  }

  Status Activate(Activation kind, const void* in, int64_t ld_in, void* out, int64_t ld_out, int64_t rows,
                  int64_t cols) override {
    if (rows == 0 || cols == 0) return Status::Ok();
    const int64_t in_cols = kind == Activation::kSwiGlu ? 2 * cols : cols;
    DITUNE_RETURN_IF_ERROR(Check("activation in", in, rows, in_cols, ld_in, 1, 0, 2));
    DITUNE_RETURN_IF_ERROR(Check("activation out", out, rows, cols, ld_out, 1, 0, 2));
    const Mat a = Load(in, rows, in_cols, ld_in, 0);
    Mat r(rows, cols);
    if (kind == Activation::kGelu) {
      r = a.unaryExpr(&GeluTanh);
    } else {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const float g = a(i, j);
          r(i, j) = g / (1.0f + std::exp(-g)) * a(i, cols + j);
        }
      }
    }
    Store(r, out, ld_out, 0);
    ++counts_.elementwise;
    return Status::Ok();
  }

  Status QkNormRope(void* qk, int64_t ld, int64_t rows, int heads, int head_dim, int64_t first_position) override {
    if (rows == 0) return Status::Ok();
    if (head_dim % 2 != 0) return Status::InvalidArgument(fmt::format("rotary embedding needs an even head_dim, not {}", head_dim));
    const int64_t w = 2LL * heads * head_dim;
    DITUNE_RETURN_IF_ERROR(Check("qk norm", qk, rows, w, ld, 1, 0, 2));
    Mat m = Load(qk, rows, w, ld, 0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int h = 0; h < 2 * heads; ++h) {
        float* v = m.row(r).data() + static_cast<int64_t>(h) * head_dim;
        float ss = 0;
        for (int j = 0; j < head_dim; ++j) ss += v[j] * v[j];
        const float inv = 1.0f / std::sqrt(ss / head_dim + 1e-6f);
        for (int j = 0; j < head_dim; ++j) v[j] *= inv;
        for (int j = 0; j < head_dim / 2; ++j) {
          const float angle = static_cast<float>(first_position + r) *
                              std::pow(10000.0f, -2.0f * static_cast<float>(j) / static_cast<float>(head_dim));
          const float c = std::cos(angle), s = std::sin(angle);
          const float x0 = v[2 * j], x1 = v[2 * j + 1];
          v[2 * j] = x0 * c - x1 * s;
          v[2 * j + 1] = x0 * s + x1 * c;
        }
      }
    }
    Store(m, qk, ld, 0);
    ++counts_.elementwise;
    return Status::Ok();
  }

  Status Copy(void* dst, int64_t ld_dst, const void* src, int64_t ld_src, int64_t rows, int64_t cols) override {
    if (rows == 0 || cols == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("copy dst", dst, rows, cols, ld_dst, 1, 0, 2));
    DITUNE_RETURN_IF_ERROR(Check("copy src", src, rows, cols, ld_src, 1, 0, 2));
    for (int64_t r = 0; r < rows; ++r) {
      std::memmove(static_cast<uint16_t*>(dst) + r * ld_dst, static_cast<const uint16_t*>(src) + r * ld_src,
                   static_cast<size_t>(cols) * 2);
    }
    return Status::Ok();
  }

  Status Zero(void* data, int64_t count) override {
    if (count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("zero", data, 1, count, count, 1, 0, 2));
    std::memset(data, 0, static_cast<size_t>(count) * 2);
    return Status::Ok();
  }

  Status FillRandom(void* data, int64_t count, float stddev, uint64_t seed, uint64_t stream) override {
    if (count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("fill", data, 1, count, count, 1, 0, 2));
    auto* p = static_cast<uint16_t*>(data);
    for (int64_t i = 0; i < count; ++i) p[i] = ToBf16(stddev * RandomNormal(seed, stream, static_cast<uint64_t>(i)));
    return Status::Ok();
  }

  Status EulerStep(float* x, void* xb, const void* pred, int64_t pred_stride, int64_t uncond_offset, bool guidance_on,
                   float guidance, float dt, int prompts, int64_t count) override {
    if (prompts == 0 || count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("euler x", x, prompts, count, count, 1, 0, 4));
    DITUNE_RETURN_IF_ERROR(Check("euler xb", xb, prompts, count, count, 1, 0, 2));
    DITUNE_RETURN_IF_ERROR(Check("euler pred", pred, prompts, count, pred_stride, 1, 0, 2));
    if (guidance_on) {
      DITUNE_RETURN_IF_ERROR(Check("euler uncond", static_cast<const uint16_t*>(pred) + uncond_offset, prompts, count,
                                   pred_stride, 1, 0, 2));
    }
    const auto* p = static_cast<const uint16_t*>(pred);
    auto* out = static_cast<uint16_t*>(xb);
    for (int i = 0; i < prompts; ++i) {
      for (int64_t j = 0; j < count; ++j) {
        const float c = FromBf16(p[i * pred_stride + j]);
        const float g = guidance_on ? FromBf16(p[i * pred_stride + uncond_offset + j]) : c;
        const float v = g + (guidance_on ? guidance * (c - g) : 0.0f);
        float& xv = x[i * count + j];
        xv += dt * v;
        out[i * count + j] = ToBf16(xv);
      }
    }
    ++counts_.elementwise;
    return Status::Ok();
  }

  Status Upload(const float* host, void* dev, int64_t count) override {
    if (count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("upload", dev, 1, count, count, 1, 0, 2));
    auto* p = static_cast<uint16_t*>(dev);
    for (int64_t i = 0; i < count; ++i) p[i] = ToBf16(host[i]);
    return Status::Ok();
  }
  Status UploadF32(const float* host, float* dev, int64_t count) override {
    if (count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("upload", dev, 1, count, count, 1, 0, 4));
    std::memcpy(dev, host, static_cast<size_t>(count) * 4);
    return Status::Ok();
  }
  Status Download(const void* dev, float* host, int64_t count) override {
    if (count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("download", dev, 1, count, count, 1, 0, 2));
    const auto* p = static_cast<const uint16_t*>(dev);
    for (int64_t i = 0; i < count; ++i) host[i] = FromBf16(p[i]);
    return Status::Ok();
  }
  Status DownloadF32(const float* dev, float* host, int64_t count) override {
    if (count == 0) return Status::Ok();
    DITUNE_RETURN_IF_ERROR(Check("download", dev, 1, count, count, 1, 0, 4));
    std::memcpy(host, dev, static_cast<size_t>(count) * 4);
    return Status::Ok();
  }

  const KernelCounts& counts() const { return counts_; }

 private:
  // That `batch` matrices of rows x cols (ld, `stride` elements apart) of `elem` bytes at p
  // lie in one live buffer.
  Status Check(const char* what, const void* p, int64_t rows, int64_t cols, int64_t ld, int batch, int64_t stride,
               int elem) const {
    if (rows == 0 || cols == 0) return Status::Ok();
    if (p == nullptr) return Status::InvalidArgument(fmt::format("{}: null pointer", what));
    if (ld < cols) return Status::InvalidArgument(fmt::format("{}: ld {} below {} columns", what, ld, cols));
    if (stride < 0) return Status::InvalidArgument(fmt::format("{}: negative batch stride", what));
    const int64_t last = (batch - 1) * stride + (rows - 1) * ld + cols;  // one past the last element
    if (!CpuDeviceOwns(d_, p, last * elem)) {
      return Status::Internal(fmt::format("{}: {} batch(es) of {}x{} (ld {}, stride {}) run outside the buffer", what,
                                          batch, rows, cols, ld, stride));
    }
    return Status::Ok();
  }
  static Mat Load(const void* p, int64_t rows, int64_t cols, int64_t ld, int64_t offset) {
    const auto* s = static_cast<const uint16_t*>(p) + offset;
    Mat m(rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) m(r, c) = FromBf16(s[r * ld + c]);
    }
    return m;
  }
  static Mat LoadF32(const float* p, int64_t rows, int64_t cols, int64_t ld, int64_t offset) {
    Mat m(rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) m(r, c) = p[offset + r * ld + c];
    }
    return m;
  }
  static void Store(const Mat& m, void* p, int64_t ld, int64_t offset) {
    auto* d = static_cast<uint16_t*>(p) + offset;
    for (int64_t r = 0; r < m.rows(); ++r) {
      for (int64_t c = 0; c < m.cols(); ++c) d[r * ld + c] = ToBf16(m(r, c));
    }
  }
  static void StoreF32(const Mat& m, float* p, int64_t ld, int64_t offset) {
    for (int64_t r = 0; r < m.rows(); ++r) {
      for (int64_t c = 0; c < m.cols(); ++c) p[offset + r * ld + c] = m(r, c);
    }
  }

  Device* d_;
  KernelCounts counts_;
};

}  // namespace

StatusOr<std::unique_ptr<Kernels>> NewRefKernels(Device* device) {
  if (device == nullptr || device->props().backend != "cpu") {
    return Status::InvalidArgument("the ref kernels run on a cpu device");
  }
  return std::unique_ptr<Kernels>(new RefKernels(device));
}

StatusOr<KernelCounts> RefKernelCounts(Kernels* kernels) {
  auto* r = dynamic_cast<RefKernels*>(kernels);
  if (r == nullptr) return Status::InvalidArgument("kernel counts are kept by the ref kernels only");
  return r->counts();
}

}  // namespace ditune::exec
