// Tensor-core flash attention, forward only, non-causal (FlashAttention-2 structure):
//
//   grid  = (ceil(q_rows / kBlockM), heads, batch); one block per (query tile, head, sequence).
//   block = kWarps warps; warp w owns query rows [16 w, 16 w + 16) of the tile for the whole
//           kernel: its Q fragments stay in registers, and so do its running row max, row sum
//           and fp32 output accumulator.
//   K and V tiles of kBlockN keys are staged in shared memory by cp.async, kStages deep, so
//   the copy of tile j + kStages - 1 overlaps the math on tile j. Per tile each warp does
//     S = Q K^T            (mma.m16n8k16, A = Q from registers, B = K via ldmatrix)
//     online softmax on S in registers (exp2 with 1/sqrt(d) log2(e) folded into one FFMA)
//     O = O * alpha + P V  (A = P re-packed from the S accumulators, B = V via ldmatrix.trans)
//   and at the end O / l is rounded to bf16 and stored. The S x S matrix never exists.
//
// Head dims that are not multiples of 16 (72, 88) are padded in shared memory to the next
// multiple of 16 (80, 96) with zeros: the QK^T reduction runs over the padded width (zeros
// add nothing), while PV and the store only touch the real D columns (n-tiles of 8).
//
// ---------------------------------------------------------------------------------------
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"
// and "ldmatrix"). lane = %laneid, g = lane >> 2 ("groupID"), t = lane & 3
// ("threadID_in_group"). A .b32 register holding two bf16 keeps the lower-indexed element in
// its low 16 bits.
//
//   A (16 x 16, row-major, 4 regs):  a[0] = (row g,     cols 2t, 2t+1)
//                                    a[1] = (row g + 8, cols 2t, 2t+1)
//                                    a[2] = (row g,     cols 2t + 8, 2t + 9)
//                                    a[3] = (row g + 8, cols 2t + 8, 2t + 9)
//   B (16 x 8, K x N, "col", 2 regs): b[0] = (k 2t, 2t+1,         n g)
//                                     b[1] = (k 2t + 8, 2t + 9,   n g)
//   C/D (16 x 8, fp32, 4 regs):       c[0], c[1] = (row g,     cols 2t, 2t+1)
//                                     c[2], c[3] = (row g + 8, cols 2t, 2t+1)
//
//   ldmatrix.m8n8.x4.b16: lanes 8i .. 8i+7 supply the 16-byte row addresses of rows 0..7 of
//   matrix i (.x2: lanes 0..15 for matrices 0 and 1; the other lanes' addresses are ignored,
//   we still pass valid ones). Destination register i receives matrix i, each lane holding
//   (row g, cols 2t, 2t+1) of it; with .trans it holds (rows 2t, 2t+1, col g) instead, i.e.
//   the fragment of the transposed 8 x 8 matrix.
//
// How each operand is fed (all shared tiles are row-major, row stride kStride elements):
//   Q (A of S = Q K^T): sQ rows = queries, cols = d. One x4 per 16-wide k-step kk:
//     matrices (rows 0-7, d 0-7), (rows 8-15, d 0-7), (rows 0-7, d 8-15), (rows 8-15, d 8-15)
//     of the warp's 16 rows = a[0..3] exactly. Lane address: row lane & 15, col 8 (lane >> 4).
//   K (B of S = Q K^T, B[k = d][n = key] = K[key][d]): B's b[0] for n-tile nt is
//     K[key nt*8 + g][d 2t, 2t+1], i.e. the non-transposed 8 x 8 block (keys, d 0-7) of the
//     k-step; b[1] the block (keys, d 8-15). One x4 covers two n-tiles (16 keys):
//     matrices (keys 0-7, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15)
//     -> b[0], b[1] of n-tile 2np and b[0], b[1] of n-tile 2np+1.
//     Lane address: key (lane & 7) + 8 (lane >> 4), col 8 ((lane >> 3) & 1).
//   P (A of O = P V): the S accumulators of n-tiles 2kk and 2kk+1 (keys 16kk .. 16kk+15)
//     are, element for element, the A fragment of k-step kk:
//     a[0] = S[2kk][0..1], a[1] = S[2kk][2..3], a[2] = S[2kk+1][0..1], a[3] = S[2kk+1][2..3].
//   V (B of O = P V, B[k = key][n = d] = V[key][d]): b[0] for d n-tile nt needs
//     V[key 2t, 2t+1][d nt*8 + g], a column pair of the stored block, hence .trans: the
//     block (keys 0-7, d nt*8 .. +7) transposed gives b[0], the block (keys 8-15, same d) b[1].
//     One x4.trans covers two d n-tiles: matrices (keys 0-7, d 0-7), (keys 8-15, d 0-7),
//     (keys 0-7, d 8-15), (keys 8-15, d 8-15) -> b[0], b[1] of n-tile 2np, then of 2np+1.
//     Lane address: key (lane & 7) + 8 ((lane >> 3) & 1), col 8 (lane >> 4). An odd last
//     n-tile (D = 72, 88) uses x2.trans with the first two matrices.
// ---------------------------------------------------------------------------------------
#include "executor/cuda/flash_attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "executor/cuda/cuda_check.h"

namespace ditune::exec::cuda {
namespace {

using bf16 = __nv_bfloat16;

// Tile shapes per head dimension. kBlockM = 16 kWarps query rows per block; the query tile
// is staged once through the last pipeline stage, hence kBlockM <= 2 kBlockN.
template <int D>
struct FlashConfig {
  static constexpr int kWarps = 8;
  static constexpr int kBlockN = 64;
  static constexpr int kStages = D >= 128 ? 2 : 3;
  static constexpr int kMinBlocksPerSm = D <= 72 ? 2 : 1;  // 88 at a 128-register cap spills on sm_90

  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kPadDim = (D + 15) / 16 * 16;  // width of the QK^T reduction
  // Row stride in shared memory: 8 extra elements (16 bytes) make the stride an odd number
  // of 16-byte units, so the 8 row addresses of one ldmatrix phase hit 8 distinct bank
  // groups (kPadDim is a multiple of 16 elements = 32 bytes, +16 bytes -> odd).
  static constexpr int kStride = kPadDim + 8;
  static constexpr int kKSteps = kPadDim / 16;  // k-steps of S = Q K^T
  static constexpr int kSTiles = kBlockN / 8;   // n-tiles of S (keys)
  static constexpr int kPvSteps = kBlockN / 16;  // k-steps of O = P V
  static constexpr int kOTiles = D / 8;         // n-tiles of O (head dim)
  static constexpr int kTileElems = kBlockN * kStride;  // one K or V tile
  static constexpr int kStageElems = 2 * kTileElems;    // K tile, then V tile
  static constexpr size_t kSmemBytes = static_cast<size_t>(kStages) * kStageElems * sizeof(bf16);

  static_assert(D % 8 == 0, "head dim must be a multiple of 8");
  static_assert(kPadDim - D == 0 || kPadDim - D == 8, "padding is one 16-byte chunk or none");
  static_assert(kBlockN % 16 == 0, "kBlockN must be a multiple of 16");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kBlockM * kStride <= kStageElems, "the Q tile must fit in one stage");
  static_assert((kStride * sizeof(bf16)) % 32 == 16, "row stride must be an odd number of 16-byte units");
};

// ---- PTX wrappers ----------------------------------------------------------------------

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy global -> shared; src_bytes 0 writes 16 zero bytes and reads
// nothing (callers still pass an in-bounds address).
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  const size_t gsrc = __cvta_generic_to_global(src);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gsrc), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still pending.
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void Ldsm4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void Ldsm4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void Ldsm2Trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// c += a b for one m16n8k16 tile, bf16 inputs, fp32 accumulators (layouts above).
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x (MUFU.EX2; -inf -> +0).
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats as bf16 in one register, `lo` in the low half (the lower-indexed element).
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo (low 16 bits), .y = hi
  uint32_t r;
  memcpy(&r, &v, sizeof(r));
  return r;
}

// Issues the copy of rows [row0, row0 + kRows) x cols [0, D) of a head slice (row stride
// ld elements) into shared memory at dst (row stride kStride); rows >= rows are zero-filled.
// Columns [D, kStride) of dst are not touched.
template <int D, int kRows, int kThreads, int kStride>
__device__ __forceinline__ void LoadTile(bf16* dst, const bf16* src, int64_t ld, int64_t row0, int64_t rows,
                                         int tid) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = kRows * kChunks;
  constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = it * kThreads + tid;
    if (kTotal % kThreads == 0 || i < kTotal) {
      const int r = i / kChunks, c = i % kChunks;
      const int64_t grow = row0 + r;
      const bool valid = grow < rows;
      const bf16* s = src + (valid ? grow : 0) * ld + c * 8;
      CpAsync16(SmemAddr(dst + r * kStride + c * 8), s, valid);
    }
  }
}

// ---- the kernel --------------------------------------------------------------------------

template <int D>
__global__ void __launch_bounds__(FlashConfig<D>::kThreads, FlashConfig<D>::kMinBlocksPerSm)
    FlashAttentionKernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                         bf16* __restrict__ o, float* __restrict__ lse, int64_t ldq, int64_t ldk, int64_t ldv, int64_t ldo, int64_t q_rows,
                         int64_t kv_rows, int64_t q_batch_stride, int64_t k_batch_stride, int64_t v_batch_stride,
                         int64_t o_batch_stride, float scale_log2) {
  using C = FlashConfig<D>;
  constexpr int kStride = C::kStride;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* const smem = reinterpret_cast<bf16*>(smem_raw);
  // Stage s: K tile at smem + s kStageElems, V tile kTileElems after it. The Q tile is
  // staged once in the last stage, which the prologue leaves alone (see below).
  bf16* const sq = smem + (C::kStages - 1) * C::kStageElems;
  const uint32_t smem_base = SmemAddr(smem);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * C::kBlockM;
  const int64_t head_col = static_cast<int64_t>(blockIdx.y) * D;
  const int64_t seq = blockIdx.z;
  const bf16* const qh = q + seq * q_batch_stride + head_col;
  const bf16* const kh = k + seq * k_batch_stride + head_col;
  const bf16* const vh = v + seq * v_batch_stride + head_col;
  bf16* const oh = o + seq * o_batch_stride + head_col;

  // Zero the padding columns [D, kPadDim) of every shared row once; cp.async only ever
  // writes columns [0, D), so they stay zero (for Q and K they pad the QK^T reduction).
  if constexpr (C::kPadDim > D) {
    constexpr int kRowsTotal = C::kStages * 2 * C::kBlockN;
    for (int r = tid; r < kRowsTotal; r += C::kThreads) {
      *reinterpret_cast<uint4*>(smem + r * kStride + D) = make_uint4(0, 0, 0, 0);
    }
  }

  const int n_tiles = static_cast<int>((kv_rows + C::kBlockN - 1) / C::kBlockN);
  auto load_kv = [&](int tile, int stage) {
    bf16* const sk = smem + stage * C::kStageElems;
    const int64_t row0 = static_cast<int64_t>(tile) * C::kBlockN;
    LoadTile<D, C::kBlockN, C::kThreads, kStride>(sk, kh, ldk, row0, kv_rows, tid);
    LoadTile<D, C::kBlockN, C::kThreads, kStride>(sk + C::kTileElems, vh, ldv, row0, kv_rows, tid);
  };

  // Prologue: group 0 = Q, groups 1 .. kStages-1 = KV tiles 0 .. kStages-2 (stages 0 ..
  // kStages-2; a group may be empty when there are fewer tiles, which keeps the counting
  // below uniform).
  LoadTile<D, C::kBlockM, C::kThreads, kStride>(sq, qh, ldq, q0, q_rows, tid);
  CpAsyncCommit();
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < n_tiles) load_kv(s, s);
    CpAsyncCommit();
  }
  CpAsyncWait<C::kStages - 1>();  // all but the kStages-1 newest groups: Q has landed
  __syncthreads();                // everyone's Q copies (and the zero padding) are visible

  // Q fragments of this warp's 16 rows, one x4 per 16-wide k-step (see the header comment).
  uint32_t qf[C::kKSteps][4];
  {
    const uint32_t a = SmemAddr(sq) + static_cast<uint32_t>(((warp * 16 + (lane & 15)) * kStride + (lane >> 4) * 8) * 2);
#pragma unroll
    for (int kk = 0; kk < C::kKSteps; ++kk) Ldsm4(qf[kk], a + kk * 16 * 2);
  }

  // Per-lane byte offsets of the ldmatrix row addresses inside a K or V tile.
  const uint32_t k_lane = static_cast<uint32_t>((((lane & 7) + ((lane >> 4) << 3)) * kStride + (((lane >> 3) & 1) << 3)) * 2);
  const uint32_t v_lane = static_cast<uint32_t>((((lane & 7) + (((lane >> 3) & 1) << 3)) * kStride + ((lane >> 4) << 3)) * 2);

  float acc_o[C::kOTiles][4];
#pragma unroll
  for (int i = 0; i < C::kOTiles; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.0f;
  // Rows g and g + 8 of the warp's 16: running max of the raw scores (identical across the
  // 4 lanes of a quad) and this lane's share of the running sum (its own columns only; the
  // quad is summed once at the end — every term was rescaled by the same quad-wide alpha).
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};

  for (int j = 0; j < n_tiles; ++j) {
    // Groups so far: Q, tiles 0 .. j + kStages - 2; at most kStages - 2 pending -> tile j
    // has landed for this thread; the barrier makes every thread's copies visible AND
    // guarantees every warp has finished tile j - 1, whose stage the prefetch below reuses.
    CpAsyncWait<C::kStages - 2>();
    __syncthreads();
    {
      const int t = j + C::kStages - 1;
      if (t < n_tiles) load_kv(t, t % C::kStages);  // stage (j - 1) mod kStages (or sq at j = 0)
      CpAsyncCommit();
    }
    const int stage = j % C::kStages;
    const uint32_t k_base = smem_base + static_cast<uint32_t>(stage * C::kStageElems * 2);
    const uint32_t v_base = k_base + static_cast<uint32_t>(C::kTileElems * 2);

    // S = Q K^T over the padded head dim.
    float acc_s[C::kSTiles][4];
#pragma unroll
    for (int i = 0; i < C::kSTiles; ++i) acc_s[i][0] = acc_s[i][1] = acc_s[i][2] = acc_s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < C::kKSteps; ++kk) {
#pragma unroll
      for (int np = 0; np < C::kSTiles / 2; ++np) {
        uint32_t b[4];
        Ldsm4(b, k_base + k_lane + static_cast<uint32_t>((np * 16 * kStride + kk * 16) * 2));
        Mma(acc_s[2 * np], qf[kk], b[0], b[1]);
        Mma(acc_s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    // Keys past kv_rows (only in the last tile) get -inf before the max: they were
    // zero-filled, so their scores are 0, not -inf.
    const int64_t kv0 = static_cast<int64_t>(j) * C::kBlockN;
    if (kv0 + C::kBlockN > kv_rows) {
      const int valid = static_cast<int>(kv_rows - kv0);  // 1 .. kBlockN
#pragma unroll
      for (int nt = 0; nt < C::kSTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = nt * 8 + 2 * (lane & 3) + e;
          if (col >= valid) acc_s[nt][e] = acc_s[nt][2 + e] = -INFINITY;
        }
      }
    }

    // Online softmax. acc_s[nt][0..1] belong to row g, [2..3] to row g + 8.
    float tile_max[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int nt = 0; nt < C::kSTiles; ++nt) {
      tile_max[0] = fmaxf(tile_max[0], fmaxf(acc_s[nt][0], acc_s[nt][1]));
      tile_max[1] = fmaxf(tile_max[1], fmaxf(acc_s[nt][2], acc_s[nt][3]));
    }
    float max_scaled[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The 4 lanes of a quad (lane ^ 1, lane ^ 2) hold the same row.
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      // Every tile has a valid key, so the max is finite for finite inputs; guard anyway so
      // that an all -inf row gives p = 0 rather than NaN.
      max_scaled[r] = tile_max[r] == -INFINITY ? 0.0f : tile_max[r] * scale_log2;
      // First tile: row_max = -inf -> alpha = 0 (acc_o and row_sum are 0 anyway).
      const float alpha = Exp2(row_max[r] * scale_log2 - max_scaled[r]);
      row_max[r] = tile_max[r];
      row_sum[r] *= alpha;
#pragma unroll
      for (int i = 0; i < C::kOTiles; ++i) {
        acc_o[i][2 * r] *= alpha;
        acc_o[i][2 * r + 1] *= alpha;
      }
    }
#pragma unroll
    for (int nt = 0; nt < C::kSTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_s[nt][e] = Exp2(fmaf(acc_s[nt][e], scale_log2, -max_scaled[e >> 1]));
      row_sum[0] += acc_s[nt][0] + acc_s[nt][1];
      row_sum[1] += acc_s[nt][2] + acc_s[nt][3];
    }

    // O += P V, P as bf16 A fragments straight from the S accumulators.
#pragma unroll
    for (int kk = 0; kk < C::kPvSteps; ++kk) {
      uint32_t pa[4];
      pa[0] = PackBf16(acc_s[2 * kk][0], acc_s[2 * kk][1]);
      pa[1] = PackBf16(acc_s[2 * kk][2], acc_s[2 * kk][3]);
      pa[2] = PackBf16(acc_s[2 * kk + 1][0], acc_s[2 * kk + 1][1]);
      pa[3] = PackBf16(acc_s[2 * kk + 1][2], acc_s[2 * kk + 1][3]);
#pragma unroll
      for (int np = 0; np < C::kOTiles / 2; ++np) {
        uint32_t b[4];
        Ldsm4Trans(b, v_base + v_lane + static_cast<uint32_t>((kk * 16 * kStride + np * 16) * 2));
        Mma(acc_o[2 * np], pa, b[0], b[1]);
        Mma(acc_o[2 * np + 1], pa, b[2], b[3]);
      }
      if constexpr (C::kOTiles % 2 == 1) {
        uint32_t b[2];
        Ldsm2Trans(b, v_base + v_lane + static_cast<uint32_t>((kk * 16 * kStride + (C::kOTiles - 1) * 8) * 2));
        Mma(acc_o[C::kOTiles - 1], pa, b[0], b[1]);
      }
    }
  }
  // Nothing may still be in flight when the block exits (only empty groups remain, but
  // be explicit).
  CpAsyncWait<0>();

  // O / l, rounded to bf16. Row g: acc_o[i][0..1], row g + 8: acc_o[i][2..3], cols 8i + 2t.
  float inv[2], total[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_sum[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    total[r] = l;
    inv[r] = l > 0.0f ? 1.0f / l : 0.0f;  // l >= 1 (the max itself contributes 2^0)
  }
  const int64_t row_g = q0 + warp * 16 + (lane >> 2);
  if (lse != nullptr && (lane & 3) == 0) {
    // ln sum_j e^(s_j / sqrt(D)) = row_max / sqrt(D) + ln l (row_max is a raw score).
    float* const lse_h = lse + (seq * gridDim.y + blockIdx.y) * q_rows;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row_g + 8 * r;
      if (row < q_rows) lse_h[row] = row_max[r] * (scale_log2 * 0.6931471805599453f) + logf(total[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row_g + 8 * r;
    if (row < q_rows) {
      bf16* const dst = oh + row * ldo + 2 * (lane & 3);
#pragma unroll
      for (int i = 0; i < C::kOTiles; ++i) {
        *reinterpret_cast<__nv_bfloat162*>(dst + i * 8) =
            __floats2bfloat162_rn(acc_o[i][2 * r] * inv[r], acc_o[i][2 * r + 1] * inv[r]);
      }
    }
  }
}

// ---- host side -----------------------------------------------------------------------------

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <int D>
Status Launch(const AttentionArgs& a, cudaStream_t stream) {
  using C = FlashConfig<D>;
  const auto kernel = FlashAttentionKernel<D>;
  if (C::kSmemBytes > 48 * 1024) {
    // The opt-in above 48 KB is per device; remember which devices have it (64 at most,
    // beyond that set it on every call).
    static std::atomic<uint64_t> done{0};
    int device = 0;
    DITUNE_CUDA_CHECK(cudaGetDevice(&device));
    const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
    if (bit == 0 || (done.load(std::memory_order_acquire) & bit) == 0) {
      DITUNE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(C::kSmemBytes)));
      done.fetch_or(bit, std::memory_order_acq_rel);
    }
  }
  const int64_t q_tiles = (a.q_rows + C::kBlockM - 1) / C::kBlockM;
  if (q_tiles > INT_MAX) {
    return Status::InvalidArgument(fmt::format("flash attention: {} query rows exceed the grid", a.q_rows));
  }
  const dim3 grid(static_cast<unsigned>(q_tiles), static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
  const float scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(D)));
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(
      static_cast<const bf16*>(a.q), static_cast<const bf16*>(a.k), static_cast<const bf16*>(a.v),
      static_cast<bf16*>(a.o), a.lse, a.ldq, a.ldk, a.ldv, a.ldo, a.q_rows, a.kv_rows, a.q_batch_stride, a.k_batch_stride,
      a.v_batch_stride, a.o_batch_stride, scale_log2);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

bool FlashAttentionSupports(int head_dim) {
  return head_dim == 64 || head_dim == 72 || head_dim == 88 || head_dim == 128;
}

Status FlashAttention(const AttentionArgs& a, cudaStream_t stream) {
  if (!FlashAttentionSupports(a.head_dim)) {
    return Status::InvalidArgument(
        fmt::format("flash attention: head_dim {} is not one of 64, 72, 88, 128", a.head_dim));
  }
  if (a.heads < 1 || a.batch < 1 || a.q_rows < 0 || a.kv_rows < 0) {
    return Status::InvalidArgument(fmt::format("flash attention: heads {} batch {} q_rows {} kv_rows {}", a.heads,
                                               a.batch, a.q_rows, a.kv_rows));
  }
  if (a.heads > 65535 || a.batch > 65535) {
    return Status::InvalidArgument(
        fmt::format("flash attention: heads {} or batch {} exceeds the grid limit 65535", a.heads, a.batch));
  }
  const int64_t width = static_cast<int64_t>(a.heads) * a.head_dim;
  if (a.ldq < width || a.ldk < width || a.ldv < width || a.ldo < width) {
    return Status::InvalidArgument(
        fmt::format("flash attention: leading dimensions ldq {} ldk {} ldv {} ldo {} below heads x head_dim = {}",
                    a.ldq, a.ldk, a.ldv, a.ldo, width));
  }
  if (a.q_batch_stride < 0 || a.k_batch_stride < 0 || a.v_batch_stride < 0 || a.o_batch_stride < 0) {
    return Status::InvalidArgument("flash attention: negative batch stride");
  }
  if (a.q_rows == 0) return Status::Ok();
  if (a.kv_rows == 0) return Status::InvalidArgument("flash attention: attention over no keys");
  if (a.q == nullptr || a.k == nullptr || a.v == nullptr || a.o == nullptr) {
    return Status::InvalidArgument("flash attention: null q, k, v or o");
  }
  // Rows are copied in 16-byte pieces: every row start must be 16-byte aligned.
  if (!Aligned16(a.q) || !Aligned16(a.k) || !Aligned16(a.v) || !Aligned16(a.o) || a.ldq % 8 != 0 ||
      a.ldk % 8 != 0 || a.ldv % 8 != 0 || a.ldo % 8 != 0 || a.q_batch_stride % 8 != 0 ||
      a.k_batch_stride % 8 != 0 || a.v_batch_stride % 8 != 0 || a.o_batch_stride % 8 != 0) {
    return Status::InvalidArgument(
        "flash attention: q, k, v, o must be 16-byte aligned and every leading dimension and batch stride a "
        "multiple of 8 elements");
  }
  switch (a.head_dim) {
    case 64: return Launch<64>(a, stream);
    case 72: return Launch<72>(a, stream);
    case 88: return Launch<88>(a, stream);
    case 128: return Launch<128>(a, stream);
    default: break;
  }
  return Status::Internal("flash attention: unreachable head_dim");
}

}  // namespace ditune::exec::cuda
