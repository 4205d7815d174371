// The CPU kernels of cpu_kernels_isa.h, compiled once per instruction set: CMake defines
// DITUNE_ISA_NS (isa_baseline, isa_v3, isa_v4) and the -march flags of each copy.
//
// ODR: Eigen's templates and inline functions would otherwise be emitted as weak symbols with
// the same names in every copy (and in the executor's own baseline code), and the linker
// would keep one of them for all callers, an AVX-512 one on a CPU without it, say. Renaming
// the namespace Eigen for this translation unit (before any Eigen header) gives each copy its
// own symbols; tests/executor/cpu_isa_symbols_test.sh checks that no other weak symbol is left.
#ifndef DITUNE_ISA_NS
#error "DITUNE_ISA_NS must name the ISA namespace (isa_baseline, isa_v3, isa_v4)"
#endif
#define DITUNE_ISA_PASTE_(a, b) a##b
#define DITUNE_ISA_PASTE(a, b) DITUNE_ISA_PASTE_(a, b)
#define Eigen DITUNE_ISA_PASTE(ditune_eigen_, DITUNE_ISA_NS)

#include <time.h>

#include <Eigen/Dense>

// GCC notes that the vector types' alignment attributes are dropped in template arguments
// (Eigen's packet traits): expected, and harmless here.
#pragma GCC diagnostic ignored "-Wignored-attributes"
#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "executor/cpu_kernels_isa.h"

namespace ditune::exec::DITUNE_ISA_NS {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using ConstMap = Eigen::Map<const Mat, Eigen::Unaligned, Stride>;
using MutMap = Eigen::Map<Mat, Eigen::Unaligned, Stride>;
using RowArray = Eigen::Map<Eigen::ArrayXf>;

#if defined(__AVX512F__)
constexpr const char* kIsa = "v4";
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kIsa = "v3";
#else
constexpr const char* kIsa = "baseline";
#endif

void Gemm(const CpuGemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  MutMap c(g.c, g.m, g.n, Stride(g.ldc));
  if (g.k == 0) {
    if (!g.accumulate) c.setZero();
    return;
  }
  const ConstMap a(g.a, g.m, g.k, Stride(g.lda));
  const ConstMap b(g.b, g.k, g.n, Stride(g.ldb));
  if (g.accumulate) {
    c.noalias() += a * b;
  } else {
    c.noalias() = a * b;
  }
}

// This ISA's Eigen packet (4, 8 or 16 floats) and its primitives, for the softmax rows.
using Packet = Eigen::internal::packet_traits<float>::type;
constexpr int64_t kPacket = Eigen::internal::unpacket_traits<Packet>::size;

float RowMax(const float* x, int64_t n) {
  namespace pk = Eigen::internal;
  int64_t j = 0;
  float best = -std::numeric_limits<float>::infinity();
  if (n >= kPacket) {
    Packet v = pk::ploadu<Packet>(x);
    for (j = kPacket; j + kPacket <= n; j += kPacket) v = pk::pmax(v, pk::ploadu<Packet>(x + j));
    best = pk::predux_max(v);
  }
  for (; j < n; ++j) best = std::max(best, x[j]);
  return best;
}

// x_j = e^(x_j scale - max) in place; returns their sum. One pass, packets from the row's
// start (the order depends on n alone), the last n mod kPacket elements scalar.
float ExpRow(float* x, int64_t n, float scale, float max) {
  namespace pk = Eigen::internal;
  const Packet vs = pk::pset1<Packet>(scale), vm = pk::pset1<Packet>(max);
  Packet sum = pk::pset1<Packet>(0.0f);
  int64_t j = 0;
  for (; j + kPacket <= n; j += kPacket) {
    const Packet e = pk::pexp(pk::psub(pk::pmul(pk::ploadu<Packet>(x + j), vs), vm));
    pk::pstoreu(x + j, e);
    sum = pk::padd(sum, e);
  }
  float total = pk::predux(sum);
  for (; j < n; ++j) {
    x[j] = std::exp(x[j] * scale - max);
    total += x[j];
  }
  return total;
}

// Folds the scores of one (query tile, head, key tile) into the state: `s` holds the raw
// products q.k (rows <= kQueryTile x cols, ld), and becomes the probabilities
// e^(s scale - m'). The per-row bookkeeping (new maximum, correction) is done for the whole
// tile at once, one vector exp instead of a scalar one per row.
template <int64_t kRows>
void SoftmaxRows(float* s, int64_t ld, int64_t rows, int64_t cols, float scale, float* m, float* l,
                 int64_t ld_ml, float* acc, int64_t ld_acc, int head_dim) {
  alignas(64) float new_max[kRows], correction[kRows];
  for (int64_t i = 0; i < rows; ++i) {
    // fl(x scale) is monotone in x, so this is exactly the maximum of the scaled scores.
    new_max[i] = std::max(m[i * ld_ml], RowMax(s + i * ld, cols) * scale);
    correction[i] = m[i * ld_ml] - new_max[i];  // -inf for a row's first block: e^-inf = 0
  }
  Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> c(correction, rows);
  c = c.exp();
  for (int64_t i = 0; i < rows; ++i) {
    const float sum = ExpRow(s + i * ld, cols, scale, new_max[i]);
    l[i * ld_ml] = std::isinf(m[i * ld_ml]) ? sum : l[i * ld_ml] * correction[i] + sum;
    if (std::isinf(m[i * ld_ml])) {
      RowArray(acc + i * ld_acc, head_dim).setZero();
    } else if (correction[i] != 1.0f) {
      RowArray(acc + i * ld_acc, head_dim) *= correction[i];
    }
    m[i * ld_ml] = new_max[i];
  }
}

// Query and key tiles: a tile's scores (64 x 256 floats, 64 KB) stay in the L2 cache while
// the row loop and the two products pass over them.
constexpr int64_t kQueryTile = 64;
constexpr int64_t kKeyTile = 256;

void Attention(const CpuAttentionArgs& a) {
  if (a.queries == 0 || a.keys == 0) return;
  const int64_t d = a.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t key_tile = std::clamp<int64_t>(a.key_block, 1, kKeyTile);
  Mat s(std::min(kQueryTile, a.queries), std::min(key_tile, a.keys));
  for (int h = 0; h < a.heads; ++h) {
    for (int64_t i0 = 0; i0 < a.queries; i0 += kQueryTile) {
      const int64_t qi = std::min(kQueryTile, a.queries - i0);
      const ConstMap q(a.q + i0 * a.ldq + h * d, qi, d, Stride(a.ldq));
      MutMap acc(a.acc + i0 * a.ld_acc + h * d, qi, d, Stride(a.ld_acc));
      for (int64_t j0 = 0; j0 < a.keys; j0 += key_tile) {
        const int64_t kj = std::min(key_tile, a.keys - j0);
        const ConstMap k(a.k + j0 * a.ldk + h * d, kj, d, Stride(a.ldk));
        const ConstMap v(a.v + j0 * a.ldv + h * d, kj, d, Stride(a.ldv));
        auto st = s.topLeftCorner(qi, kj);
        st.noalias() = q * k.transpose();
        SoftmaxRows<kQueryTile>(st.data(), s.cols(), qi, kj, scale, a.m + i0 * a.heads + h,
                                a.l + i0 * a.heads + h, a.heads, acc.data(), a.ld_acc, a.head_dim);
        acc.noalias() += st * v;
      }
    }
  }
}

// The loop before tiling: every query row of a key block at once, one row at a time.
void AttentionRowwise(const CpuAttentionArgs& a) {
  if (a.queries == 0 || a.keys == 0) return;
  const int64_t d = a.head_dim, block = std::max<int64_t>(1, a.key_block);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Mat work(a.queries, std::min(block, a.keys));
  for (int64_t start = 0; start < a.keys; start += block) {
    const int64_t n = std::min(block, a.keys - start);
    for (int h = 0; h < a.heads; ++h) {
      const ConstMap q(a.q + h * d, a.queries, d, Stride(a.ldq));
      const ConstMap k(a.k + start * a.ldk + h * d, n, d, Stride(a.ldk));
      const ConstMap v(a.v + start * a.ldv + h * d, n, d, Stride(a.ldv));
      MutMap acc(a.acc + h * d, a.queries, d, Stride(a.ld_acc));
      auto s = work.leftCols(n);
      s.noalias() = q * k.transpose();
      s *= scale;
      for (int64_t i = 0; i < a.queries; ++i) {
        float& mi = a.m[i * a.heads + h];
        float& li = a.l[i * a.heads + h];
        const float new_max = std::max(mi, s.row(i).maxCoeff());
        const float correction = std::isinf(mi) ? 0.0f : std::exp(mi - new_max);
        s.row(i) = (s.row(i).array() - new_max).exp().matrix();
        li = li * correction + s.row(i).sum();
        acc.row(i) *= correction;
        mi = new_max;
      }
      acc.noalias() += s * v;
    }
  }
}

// Determinism: Eigen peels scalar iterations off a vectorised loop or reduction until the
// data reaches the packet's alignment, so over caller memory (aligned for the baseline's
// 16-byte packets, not for 32- or 64-byte ones) the order of a sum, and the scalar-or-packet
// path of each element, would depend on where malloc put the buffer: two identical runs
// could differ in the last bits. These kernels therefore work on a copy in a buffer of their
// own, aligned for the widest packet, whose layout depends on the sizes alone.
using AlignedRow = Eigen::Map<Eigen::ArrayXf, Eigen::AlignedMax>;

void NormModulate(const float* x, int64_t ldx, float* y, int64_t ldy, int64_t rows, int64_t cols,
                  const float* shift, const float* scale) {
  Eigen::ArrayXf buf(cols), sh(cols), sc1(cols);  // Eigen's allocations are aligned for its packets
  sh = Eigen::Map<const Eigen::ArrayXf>(shift, cols);
  sc1 = 1.0f + Eigen::Map<const Eigen::ArrayXf>(scale, cols);
  const float eps = 1e-6f;
  for (int64_t i = 0; i < rows; ++i) {
    AlignedRow xi(buf.data(), cols);
    xi = Eigen::Map<const Eigen::ArrayXf>(x + i * ldx, cols);
    const float mean = xi.mean();
    const float var = (xi - mean).square().mean();
    const float inv = 1.0f / std::sqrt(var + eps);
    xi = (xi - mean) * inv * sc1 + sh;
    RowArray(y + i * ldy, cols) = xi;
  }
}

void Gelu(const float* x, float* y, int64_t count) {
  // Eigen's packet tanh: a scalar std::tanh per element would make the activation, not the
  // GEMMs, the cost of the MLP. Chunks of 1024 through the aligned buffer.
  constexpr int64_t kChunk = 1024;
  const float c = std::sqrt(2.0f / static_cast<float>(M_PI));
  Eigen::ArrayXf buf(std::min(kChunk, count));
  for (int64_t i = 0; i < count; i += kChunk) {
    const int64_t n = std::min(kChunk, count - i);
    AlignedRow a(buf.data(), n);
    a = Eigen::Map<const Eigen::ArrayXf>(x + i, n);
    a = 0.5f * a * (1.0f + (c * (a + 0.044715f * a.cube())).tanh());
    RowArray(y + i, n) = a;
  }
}

// Independent multiply-add chains at the widest vectors: enough of them to cover the
// latency of every FMA pipe, few enough to stay in registers.
#if defined(__AVX512F__)
using Vf = __m512;
constexpr int kLanes = 16, kChains = 24;
inline Vf Splat(float x) { return _mm512_set1_ps(x); }
inline Vf MulAdd(Vf a, Vf b, Vf c) { return _mm512_fmadd_ps(a, b, c); }
inline float Sum(Vf a) { return _mm512_reduce_add_ps(a); }
inline void Pin(Vf& a) { asm volatile("" : "+v"(a)); }  // any of the 32 zmm registers
#elif defined(__AVX2__) && defined(__FMA__)
using Vf = __m256;
constexpr int kLanes = 8, kChains = 12;
inline Vf Splat(float x) { return _mm256_set1_ps(x); }
inline Vf MulAdd(Vf a, Vf b, Vf c) { return _mm256_fmadd_ps(a, b, c); }
inline void Pin(Vf& a) { asm volatile("" : "+x"(a)); }
inline float Sum(Vf a) {
  alignas(32) float t[8];
  _mm256_store_ps(t, a);
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#elif defined(__SSE2__)
using Vf = __m128;
constexpr int kLanes = 4, kChains = 12;
inline Vf Splat(float x) { return _mm_set1_ps(x); }
inline Vf MulAdd(Vf a, Vf b, Vf c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
inline void Pin(Vf& a) { asm volatile("" : "+x"(a)); }
inline float Sum(Vf a) {
  alignas(16) float t[4];
  _mm_store_ps(t, a);
  return t[0] + t[1] + t[2] + t[3];
}
#else
using Vf = float;
constexpr int kLanes = 1, kChains = 8;
inline Vf Splat(float x) { return x; }
inline Vf MulAdd(Vf a, Vf b, Vf c) { return a * b + c; }
inline void Pin(Vf&) {}
inline float Sum(Vf a) { return a; }
#endif

volatile float peak_sink = 0;

// This thread's CPU time: on a shared host, wall time would count other processes' turns.
double ThreadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double PeakFlops(double seconds) {
  Vf acc[kChains];
#pragma GCC unroll 32
  for (int j = 0; j < kChains; ++j) acc[j] = Splat(static_cast<float>(j));
  const Vf b = Splat(0.999999f), c = Splat(1e-6f);
  constexpr int64_t kInner = 1 << 16;
  int64_t rounds = 0;
  const double start = ThreadSeconds();
  double elapsed = 0;
  do {
    for (int64_t r = 0; r < kInner; ++r) {
      // Fully unrolled, each chain pinned to a register: without that the compiler keeps the
      // chains in memory and interchanges the loops, and the loop measures the stores.
#pragma GCC unroll 32
      for (int j = 0; j < kChains; ++j) {
        acc[j] = MulAdd(acc[j], b, c);
        Pin(acc[j]);
      }
    }
    ++rounds;
    elapsed = ThreadSeconds() - start;
  } while (elapsed < seconds);
  float sum = 0;
#pragma GCC unroll 32
  for (int j = 0; j < kChains; ++j) sum += Sum(acc[j]);
  peak_sink = sum;
  return 2.0 * kLanes * kChains * static_cast<double>(kInner) * static_cast<double>(rounds) /
         elapsed;
}

}  // namespace

const CpuKernelTable& KernelTable() {
  static const CpuKernelTable table = {kIsa,         Gemm, Attention, AttentionRowwise,
                                       NormModulate, Gelu, PeakFlops};
  return table;
}

}  // namespace ditune::exec::DITUNE_ISA_NS
