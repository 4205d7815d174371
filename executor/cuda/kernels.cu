// bf16 kernels with fp32 accumulation behind the cuda Kernels (executor/kernels.h): fused
// norm + modulation, activations, gated residual, query-key norm + rotary embedding, the
// Euler update, random fill, and a simple fused attention with an online softmax over key
// tiles (the S x S matrix never exists) for the head dimensions FlashAttention does not take.
//
// Conventions: row-major with leading dimensions, 64-bit indexing everywhere, grids that
// stride over their work so that no launch exceeds the grid limits (grid.y and grid.z at most
// 65535), zero rows or columns are a no-op, reductions in fp32.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/cuda_device_impl.h"
#include "executor/cuda/flash_attention.h"
#include "executor/random_hash.h"

namespace ditune::exec::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarp = 32;
constexpr int kThreads = 256;           // elementwise and row kernels
constexpr int64_t kMaxGridX = 1 << 20;  // blocks beyond this stride instead
constexpr int64_t kMaxGridYZ = 65535;

__device__ __forceinline__ float Load(const bf16* p) { return __bfloat162float(*p); }

__device__ float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ float BlockSum(float v, float* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = WarpSum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarp;
  v = threadIdx.x < warps ? shared[threadIdx.x] : 0.0f;
  if (warp == 0) v = WarpSum(v);
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  v = shared[0];
  __syncthreads();
  return v;
}

__device__ __forceinline__ float GeluTanh(float v) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
}

__device__ __forceinline__ float Silu(float v) { return v / (1.0f + expf(-v)); }

// Rows in blocks (grid-stride): y = LayerNorm(x) * (1 + scale) + shift, shift/scale nullable.
// Two passes over the row for the mean and the variance (no cancellation); in place works.
__global__ void NormModulateKernel(const bf16* x, int64_t ldx, bf16* y, int64_t ldy, int64_t rows, int64_t cols,
                                   const float* shift, const float* scale) {
  __shared__ float shared[kWarp];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16* in = x + r * ldx;
    bf16* out = y + r * ldy;
    float sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += Load(in + c);
    const float mean = BlockSum(sum, shared) / static_cast<float>(cols);
    float sq = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = Load(in + c) - mean;
      sq += d * d;
    }
    const float inv = rsqrtf(BlockSum(sq, shared) / static_cast<float>(cols) + 1e-6f);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = (Load(in + c) - mean) * inv;
      const float sc = scale != nullptr ? scale[c] : 0.0f;
      const float sh = shift != nullptr ? shift[c] : 0.0f;
      out[c] = __float2bfloat16(v * (1.0f + sc) + sh);
    }
  }
}

// The 2-D elementwise kernels: grid.x strides over columns, grid.y over rows.
#define DITUNE_FOR_EACH_2D(rows, cols)                                                        \
  for (int64_t r = blockIdx.y; r < (rows); r += gridDim.y)                                    \
    for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < (cols); \
         c += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void GatedResidualKernel(bf16* x, int64_t ldx, const float* gate, const bf16* y, int64_t ldy, int64_t rows,
                                    int64_t cols) {
  DITUNE_FOR_EACH_2D(rows, cols) {
    const float g = gate != nullptr ? gate[c] : 1.0f;
    bf16* p = x + r * ldx + c;
    *p = __float2bfloat16(Load(p) + g * Load(y + r * ldy + c));
  }
}

__global__ void GeluKernel(const bf16* in, int64_t ld_in, bf16* out, int64_t ld_out, int64_t rows, int64_t cols) {
  DITUNE_FOR_EACH_2D(rows, cols) { out[r * ld_out + c] = __float2bfloat16(GeluTanh(Load(in + r * ld_in + c))); }
}

__global__ void SwiGluKernel(const bf16* in, int64_t ld_in, bf16* out, int64_t ld_out, int64_t rows, int64_t cols) {
  DITUNE_FOR_EACH_2D(rows, cols) {
    const bf16* row = in + r * ld_in;
    out[r * ld_out + c] = __float2bfloat16(Silu(Load(row + c)) * Load(row + cols + c));
  }
}

// x[p] += dt * (u + guidance (c - u)) per prompt p (grid.y), then xb = x in bf16.
__global__ void EulerKernel(float* x, bf16* xb, const bf16* pred, int64_t pred_stride, int64_t uncond_offset,
                            bool guidance_on, float guidance, float dt, int64_t prompts, int64_t count) {
  DITUNE_FOR_EACH_2D(prompts, count) {
    const bf16* p = pred + r * pred_stride + c;
    const float cond = Load(p);
    float v = cond;
    if (guidance_on) {
      const float uncond = Load(p + uncond_offset);
      v = uncond + guidance * (cond - uncond);
    }
    const int64_t i = r * count + c;
    const float updated = x[i] + dt * v;
    x[i] = updated;
    xb[i] = __float2bfloat16(updated);
  }
}

// Merge of attention over two key sets: grid.y strides over (sequence, row), grid.x over
// the heads x head_dim columns; the weights come from the two log-sum-exps of the column's head.
__global__ void MergeAttentionKernel(bf16* o, int64_t ldo, int64_t o_stride, const bf16* o2, int64_t ldo2,
                                     int64_t o2_stride, const float* lse, const float* lse2, float* lse_out,
                                     int64_t q_rows, int64_t batch_rows, int heads, int head_dim) {
  DITUNE_FOR_EACH_2D(batch_rows, static_cast<int64_t>(heads) * head_dim) {
    const int64_t seq = r / q_rows, row = r % q_rows;
    const int64_t h = c / head_dim;
    const int64_t at = (seq * heads + h) * q_rows + row;
    const float l1 = lse[at], l2 = lse2[at];
    const float mx = fmaxf(l1, l2);
    const float merged = mx + logf(expf(l1 - mx) + expf(l2 - mx));
    bf16* p = o + seq * o_stride + row * ldo + c;
    const float v = expf(l1 - merged) * Load(p) + expf(l2 - merged) * Load(o2 + seq * o2_stride + row * ldo2 + c);
    *p = __float2bfloat16(v);
    // The first column of each head also records the merged log-sum-exp (in its own array, so
    // that no thread reads a value another has already replaced).
    if (c % head_dim == 0) lse_out[at] = merged;
  }
}

#undef DITUNE_FOR_EACH_2D

// One warp per head vector (2 heads per row: q then k), grid-stride over the vectors: RMS
// normalisation, then pair (2j, 2j+1) rotated by (first_position + row) 10000^(-2j / head_dim).
__global__ void QkNormRopeKernel(bf16* qk, int64_t ld, int64_t rows, int heads, int head_dim, int64_t first_position) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps_per_block = blockDim.x / kWarp;
  const int64_t vectors = rows * 2 * heads;
  const int pairs = head_dim / 2;
  const double kTwoPi = 6.283185307179586476925;
  for (int64_t v = blockIdx.x * warps_per_block + threadIdx.x / kWarp; v < vectors;
       v += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    // The loop bound is uniform over the warp, so every lane reaches the shuffles.
    const int64_t row = v / (2 * heads);
    const int which = static_cast<int>(v % (2 * heads));
    bf16* x = qk + row * ld + static_cast<int64_t>(which) * head_dim;
    float sq = 0;
    for (int j = lane; j < pairs; j += kWarp) {
      const float a = Load(x + 2 * j), b = Load(x + 2 * j + 1);
      sq += a * a + b * b;
    }
    const float inv = rsqrtf(WarpSum(sq) / static_cast<float>(head_dim) + 1e-6f);
    const double position = static_cast<double>(first_position + row);
    for (int j = lane; j < pairs; j += kWarp) {
      // The angle in double and reduced to [-pi, pi] there, so that large positions keep
      // their precision; the sine and cosine of the small remainder in fp32.
      const double freq = exp(-2.0 * j / head_dim * 9.210340371976184);  // ln(10000)
      double angle = position * freq;
      angle -= kTwoPi * rint(angle / kTwoPi);
      float s, c;
      sincosf(static_cast<float>(angle), &s, &c);
      const float a = Load(x + 2 * j) * inv, b = Load(x + 2 * j + 1) * inv;
      x[2 * j] = __float2bfloat16(a * c - b * s);
      x[2 * j + 1] = __float2bfloat16(a * s + b * c);
    }
  }
}

__global__ void FillRandomKernel(bf16* data, int64_t count, float stddev, uint64_t seed, uint64_t stream) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    data[i] = __float2bfloat16(RandomNormal(seed, stream, static_cast<uint64_t>(i)) * stddev);
  }
}

__global__ void ToBf16Kernel(const float* in, bf16* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16(in[i]);
  }
}

__global__ void FromBf16Kernel(const bf16* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __bfloat162float(in[i]);
  }
}

// ---- Simple fused attention -------------------------------------------------------------
//
// A block of kAttnQueries queries of one head of one sequence (grid x: query blocks, y: heads,
// z: sequences). Each query belongs to a group of kAttnGroup consecutive lanes; lane g of the
// group owns dimensions g, g + 8, g + 16, ... of q and of the output accumulator (D / 8 each,
// so every head dimension that is a multiple of 8 works with at most 16 + 16 registers), and a
// score is the group's partial dot products summed with three shuffles. Keys and values pass
// through shared memory in tiles of kAttnTile rows (fp32); the softmax is online per tile:
// the tile's scores, the new running maximum, one rescale of the sum and the accumulator.
// Scores are kept in log2 units (q pre-scaled by log2(e) / sqrt(D)) for exp2f.
constexpr int kAttnGroup = 8;
constexpr int kAttnQueries = 32;
constexpr int kAttnThreads = kAttnGroup * kAttnQueries;
constexpr int kAttnTile = 32;

struct AttnParams {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  bf16* o;
  float* lse;  // optional: per (sequence, head, row), natural log
  int64_t ldq, ldk, ldv, ldo;
  int64_t q_rows, kv_rows;
  int64_t q_batch_stride, k_batch_stride, v_batch_stride, o_batch_stride;
  float scale_log2;  // log2(e) / sqrt(head_dim)
};

template <int D>
__global__ void __launch_bounds__(kAttnThreads) SimpleAttentionKernel(AttnParams p) {
  static_assert(D % kAttnGroup == 0, "head dimension must be a multiple of the group");
  constexpr int kPer = D / kAttnGroup;
  __shared__ float ks[kAttnTile][D];
  __shared__ float vs[kAttnTile][D];
  const int64_t head_offset = static_cast<int64_t>(blockIdx.y) * D;
  const int64_t seq = blockIdx.z;
  const bf16* q = p.q + seq * p.q_batch_stride + head_offset;
  const bf16* k = p.k + seq * p.k_batch_stride + head_offset;
  const bf16* v = p.v + seq * p.v_batch_stride + head_offset;
  bf16* o = p.o + seq * p.o_batch_stride + head_offset;

  const int g = threadIdx.x % kAttnGroup;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kAttnQueries + threadIdx.x / kAttnGroup;
  // Rows past the end compute on zeros (every lane must reach the shuffles) and write nothing.
  const bool active = row < p.q_rows;
  float qr[kPer], acc[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    qr[j] = active ? Load(q + row * p.ldq + j * kAttnGroup + g) * p.scale_log2 : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t start = 0; start < p.kv_rows; start += kAttnTile) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kAttnTile), p.kv_rows - start));
    for (int i = threadIdx.x; i < kAttnTile * D; i += kAttnThreads) {
      const int r = i / D, d = i % D;
      const bool in = r < n;
      ks[r][d] = in ? Load(k + (start + r) * p.ldk + d) : 0.0f;
      vs[r][d] = in ? Load(v + (start + r) * p.ldv + d) : 0.0f;
    }
    __syncthreads();
    float s[kAttnTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int r = 0; r < kAttnTile; ++r) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) part += qr[j] * ks[r][j * kAttnGroup + g];
      part += __shfl_xor_sync(0xffffffffu, part, 4);
      part += __shfl_xor_sync(0xffffffffu, part, 2);
      part += __shfl_xor_sync(0xffffffffu, part, 1);
      s[r] = r < n ? part : -INFINITY;
      tile_max = fmaxf(tile_max, s[r]);
    }
    // n >= 1, so new_m is finite; on the first tile m is -inf and the correction 0.
    const float new_m = fmaxf(m, tile_max);
    const float correction = exp2f(m - new_m);
    l *= correction;
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[j] *= correction;
#pragma unroll
    for (int r = 0; r < kAttnTile; ++r) {
      const float pr = exp2f(s[r] - new_m);  // 0 for the padding rows (s = -inf)
      l += pr;
#pragma unroll
      for (int j = 0; j < kPer; ++j) acc[j] += pr * vs[r][j * kAttnGroup + g];
    }
    m = new_m;
    __syncthreads();
  }
  if (active) {
    const float inv = 1.0f / l;
#pragma unroll
    for (int j = 0; j < kPer; ++j) o[row * p.ldo + j * kAttnGroup + g] = __float2bfloat16(acc[j] * inv);
    if (p.lse != nullptr && g == 0) {
      // m and the scores are in log2 units: ln sum e^s = ln 2 (m + log2 l).
      p.lse[(seq * gridDim.y + blockIdx.y) * p.q_rows + row] = 0.6931471805599453f * (m + log2f(l));
    }
  }
}

bool SimpleAttentionSupports(int head_dim) {
  switch (head_dim) {
    case 16:
    case 32:
    case 64:
    case 72:
    case 88:
    case 128:
      return true;
    default:
      return false;
  }
}

template <int D>
void LaunchSimpleAttention(dim3 grid, cudaStream_t stream, const AttnParams& p) {
  SimpleAttentionKernel<D><<<grid, kAttnThreads, 0, stream>>>(p);
}

// Blocks for `n` items of `threads` each, capped (the kernels stride over the rest).
unsigned Blocks(int64_t n, int threads, int64_t cap = kMaxGridX) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, cap)));
}

// Threads for rows of `cols` elements: a warp multiple up to kThreads.
int RowThreads(int64_t cols) {
  return static_cast<int>(std::min<int64_t>(kThreads, (cols + kWarp - 1) / kWarp * kWarp));
}

// The grid of the 2-D elementwise kernels.
dim3 Grid2D(int64_t rows, int64_t cols, int threads) {
  return dim3(Blocks(cols, threads), static_cast<unsigned>(std::min(rows, kMaxGridYZ)));
}

Status CheckSizes(const char* what, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) {
    return Status::InvalidArgument(fmt::format("{}: negative size {} x {}", what, rows, cols));
  }
  return Status::Ok();
}

Status CheckLd(const char* what, const char* name, int64_t ld, int64_t width) {
  if (ld < width) return Status::InvalidArgument(fmt::format("{}: {} {} < the {} columns used", what, name, ld, width));
  return Status::Ok();
}

Status CheckPointer(const char* what, const char* name, const void* p) {
  if (p == nullptr) return Status::InvalidArgument(fmt::format("{}: {} is null", what, name));
  return Status::Ok();
}

// The device behind `device`, current on this thread.
StatusOr<CudaDevice*> Current(Device* device) {
  if (device == nullptr) return Status::InvalidArgument("a CUDA kernel was given a null device");
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  return d;
}

// The ref kernels' rules (ref_kernels.cc): at least one sequence, head and key; no queries is
// a no-op.
Status ValidateAttention(const AttentionArgs& a) {
  constexpr const char* kWhat = "attention";
  if (a.heads < 1 || a.head_dim < 1 || a.batch < 1 || a.q_rows < 0 || a.kv_rows < 1) {
    return Status::InvalidArgument(fmt::format("attention: heads {} head_dim {} batch {} q_rows {} kv_rows {}", a.heads,
                                               a.head_dim, a.batch, a.q_rows, a.kv_rows));
  }
  if (a.heads > kMaxGridYZ) {
    return Status::InvalidArgument(fmt::format("attention: {} heads exceed {}", a.heads, kMaxGridYZ));
  }
  if (a.q_batch_stride < 0 || a.k_batch_stride < 0 || a.v_batch_stride < 0 || a.o_batch_stride < 0) {
    return Status::InvalidArgument("attention: negative batch stride");
  }
  if (a.batch > 1 && a.o_batch_stride == 0) {
    return Status::InvalidArgument(
        fmt::format("attention: {} sequences with o_batch_stride 0 write one output", a.batch));
  }
  const int64_t width = static_cast<int64_t>(a.heads) * a.head_dim;
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldq", a.ldq, width));
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldk", a.ldk, width));
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldv", a.ldv, width));
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldo", a.ldo, width));
  if (a.q_rows == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "q", a.q));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "k", a.k));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "v", a.v));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "o", a.o));
  return Status::Ok();
}

// One launch of the simple kernel: a.batch <= 65535 (the caller splits larger batches).
Status LaunchSimpleAttention(CudaDevice* d, const AttentionArgs& a) {
  AttnParams p;
  p.q = static_cast<const bf16*>(a.q);
  p.k = static_cast<const bf16*>(a.k);
  p.v = static_cast<const bf16*>(a.v);
  p.o = static_cast<bf16*>(a.o);
  p.lse = a.lse;
  p.ldq = a.ldq;
  p.ldk = a.ldk;
  p.ldv = a.ldv;
  p.ldo = a.ldo;
  p.q_rows = a.q_rows;
  p.kv_rows = a.kv_rows;
  p.q_batch_stride = a.q_batch_stride;
  p.k_batch_stride = a.k_batch_stride;
  p.v_batch_stride = a.v_batch_stride;
  p.o_batch_stride = a.o_batch_stride;
  p.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(a.head_dim)));
  const int64_t query_blocks = (a.q_rows + kAttnQueries - 1) / kAttnQueries;
  if (query_blocks > 0x7fffffff) return Status::InvalidArgument(fmt::format("attention: {} query rows", a.q_rows));
  const dim3 grid(static_cast<unsigned>(query_blocks), static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
  cudaStream_t s = d->raw_stream();
  switch (a.head_dim) {
    case 16:
      LaunchSimpleAttention<16>(grid, s, p);
      break;
    case 32:
      LaunchSimpleAttention<32>(grid, s, p);
      break;
    case 64:
      LaunchSimpleAttention<64>(grid, s, p);
      break;
    case 72:
      LaunchSimpleAttention<72>(grid, s, p);
      break;
    case 88:
      LaunchSimpleAttention<88>(grid, s, p);
      break;
    case 128:
      LaunchSimpleAttention<128>(grid, s, p);
      break;
    default:
      return Status::InvalidArgument(
          fmt::format("attention head_dim {} is not one of 16, 32, 64, 72, 88, 128", a.head_dim));
  }
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

bool ForceSimpleAttention() {
  const char* e = std::getenv("DITUNE_ATTENTION");
  return e != nullptr && std::string_view(e) == "simple";
}

// What FlashAttention requires of the layout beyond the head dimension: rows copied in
// 16-byte pieces (16-byte aligned pointers, leading dimensions and batch strides multiples of
// 8 elements). Other layouts take the simple kernel.
bool FlashLayoutOk(const AttentionArgs& a) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return aligned(a.q) && aligned(a.k) && aligned(a.v) && aligned(a.o) && a.ldq % 8 == 0 && a.ldk % 8 == 0 &&
         a.ldv % 8 == 0 && a.ldo % 8 == 0 && a.q_batch_stride % 8 == 0 && a.k_batch_stride % 8 == 0 &&
         a.v_batch_stride % 8 == 0 && a.o_batch_stride % 8 == 0;
}

// Validates, picks the kernel and runs the sequences in chunks of at most 65535 (grid.z).
Status RunAttention(Device* device, const AttentionArgs& args, bool allow_flash) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  DITUNE_RETURN_IF_ERROR(ValidateAttention(args));
  if (args.q_rows == 0) return Status::Ok();
  const bool flash =
      allow_flash && !ForceSimpleAttention() && FlashAttentionSupports(args.head_dim) && FlashLayoutOk(args);
  if (!flash && !SimpleAttentionSupports(args.head_dim)) {
    return Status::InvalidArgument(fmt::format(
        "attention head_dim {} is supported neither by the simple kernel (16, 32, 64, 72, 88, 128) nor, with this "
        "layout, by FlashAttention",
        args.head_dim));
  }
  for (int64_t first = 0; first < args.batch; first += kMaxGridYZ) {
    AttentionArgs c = args;
    c.batch = static_cast<int>(std::min<int64_t>(kMaxGridYZ, args.batch - first));
    c.q = static_cast<const bf16*>(args.q) + first * args.q_batch_stride;
    c.k = static_cast<const bf16*>(args.k) + first * args.k_batch_stride;
    c.v = static_cast<const bf16*>(args.v) + first * args.v_batch_stride;
    c.o = static_cast<bf16*>(args.o) + first * args.o_batch_stride;
    if (args.lse != nullptr) c.lse = args.lse + first * args.heads * args.q_rows;
    if (flash) {
      DITUNE_RETURN_IF_ERROR(FlashAttention(c, d->raw_stream()));
    } else {
      DITUNE_RETURN_IF_ERROR(LaunchSimpleAttention(d, c));
    }
  }
  return Status::Ok();
}

}  // namespace

// ---- Attention ---------------------------------------------------------------------------

Status Attention(Device* device, const AttentionArgs& args) { return RunAttention(device, args, true); }

Status SimpleAttention(Device* device, const AttentionArgs& args) { return RunAttention(device, args, false); }

Status Attention(Device* device, const void* q, const void* k, const void* v, void* o, int64_t q_rows, int64_t kv_rows,
                 int heads, int head_dim) {
  AttentionArgs a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = o;
  const int64_t width = static_cast<int64_t>(heads) * head_dim;
  a.ldq = a.ldk = a.ldv = a.ldo = width;
  a.q_rows = q_rows;
  a.kv_rows = kv_rows;
  a.heads = heads;
  a.head_dim = head_dim;
  return Attention(device, a);
}

// ---- Row and elementwise kernels ---------------------------------------------------------

Status NormModulate(Device* device, const NormArgs& a) {
  constexpr const char* kWhat = "norm-modulate";
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  DITUNE_RETURN_IF_ERROR(CheckSizes(kWhat, a.rows, a.cols));
  if (a.rows == 0) return Status::Ok();
  // A norm over no columns is undefined (as the ref kernels say).
  if (a.cols == 0) return Status::InvalidArgument(fmt::format("{}: {} rows of 0 columns", kWhat, a.rows));
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldx", a.ldx, a.cols));
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldy", a.ldy, a.cols));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "x", a.x));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "y", a.y));
  NormModulateKernel<<<Blocks(a.rows, 1), RowThreads(a.cols), 0, d->raw_stream()>>>(
      static_cast<const bf16*>(a.x), a.ldx, static_cast<bf16*>(a.y), a.ldy, a.rows, a.cols, a.shift, a.scale);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status NormModulate(Device* device, const void* x, const float* shift, const float* scale, void* y, int64_t rows,
                    int64_t cols) {
  NormArgs a;
  a.x = x;
  a.ldx = cols;
  a.y = y;
  a.ldy = cols;
  a.rows = rows;
  a.cols = cols;
  a.shift = shift;
  a.scale = scale;
  return NormModulate(device, a);
}

Status GatedResidual(Device* device, void* x, int64_t ldx, const float* gate, const void* y, int64_t ldy, int64_t rows,
                     int64_t cols) {
  constexpr const char* kWhat = "gated residual";
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  DITUNE_RETURN_IF_ERROR(CheckSizes(kWhat, rows, cols));
  if (rows == 0 || cols == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldx", ldx, cols));
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldy", ldy, cols));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "x", x));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "y", y));
  const int threads = RowThreads(cols);
  GatedResidualKernel<<<Grid2D(rows, cols, threads), threads, 0, d->raw_stream()>>>(
      static_cast<bf16*>(x), ldx, gate, static_cast<const bf16*>(y), ldy, rows, cols);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status GatedResidual(Device* device, void* x, const float* gate, const void* y, int64_t rows, int64_t cols) {
  return GatedResidual(device, x, cols, gate, y, cols, rows, cols);
}

Status Activate(Device* device, Activation kind, const void* in, int64_t ld_in, void* out, int64_t ld_out, int64_t rows,
                int64_t cols) {
  const char* what = kind == Activation::kGelu ? "GELU" : "SwiGLU";
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  DITUNE_RETURN_IF_ERROR(CheckSizes(what, rows, cols));
  if (rows == 0 || cols == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckLd(what, "ld_in", ld_in, kind == Activation::kSwiGlu ? 2 * cols : cols));
  DITUNE_RETURN_IF_ERROR(CheckLd(what, "ld_out", ld_out, cols));
  DITUNE_RETURN_IF_ERROR(CheckPointer(what, "in", in));
  DITUNE_RETURN_IF_ERROR(CheckPointer(what, "out", out));
  const int threads = RowThreads(cols);
  const dim3 grid = Grid2D(rows, cols, threads);
  const auto* src = static_cast<const bf16*>(in);
  auto* dst = static_cast<bf16*>(out);
  switch (kind) {
    case Activation::kGelu:
      GeluKernel<<<grid, threads, 0, d->raw_stream()>>>(src, ld_in, dst, ld_out, rows, cols);
      break;
    case Activation::kSwiGlu:
      SwiGluKernel<<<grid, threads, 0, d->raw_stream()>>>(src, ld_in, dst, ld_out, rows, cols);
      break;
    default:
      return Status::InvalidArgument(fmt::format("unknown activation {}", static_cast<int>(kind)));
  }
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status Gelu(Device* device, void* x, int64_t count) {
  if (count < 0) return Status::InvalidArgument(fmt::format("GELU over {} elements", count));
  // One row of `count` elements, in place.
  return Activate(device, Activation::kGelu, x, count, x, count, count > 0 ? 1 : 0, count);
}

Status QkNormRope(Device* device, void* qk, int64_t ld, int64_t rows, int heads, int head_dim, int64_t first_position) {
  constexpr const char* kWhat = "qk-norm-rope";
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  if (rows < 0) return Status::InvalidArgument(fmt::format("{}: {} rows", kWhat, rows));
  if (heads < 1 || head_dim < 2 || head_dim % 2 != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: heads {} must be positive and head_dim {} positive and even", kWhat, heads, head_dim));
  }
  if (rows == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ld", ld, 2 * static_cast<int64_t>(heads) * head_dim));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "qk", qk));
  const int64_t warps_per_block = kThreads / kWarp;
  const int64_t vectors = rows * 2 * heads;
  QkNormRopeKernel<<<Blocks(vectors, static_cast<int>(warps_per_block)), kThreads, 0, d->raw_stream()>>>(
      static_cast<bf16*>(qk), ld, rows, heads, head_dim, first_position);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status EulerStep(Device* device, float* x, void* xb, const void* pred, int64_t pred_stride, int64_t uncond_offset,
                 bool guidance_on, float guidance, float dt, int prompts, int64_t count) {
  constexpr const char* kWhat = "Euler step";
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  DITUNE_RETURN_IF_ERROR(CheckSizes(kWhat, prompts, count));
  if (prompts == 0 || count == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "x", x));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "xb", xb));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "pred", pred));
  const int threads = RowThreads(count);
  EulerKernel<<<Grid2D(prompts, count, threads), threads, 0, d->raw_stream()>>>(
      x, static_cast<bf16*>(xb), static_cast<const bf16*>(pred), pred_stride, uncond_offset, guidance_on, guidance, dt,
      prompts, count);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status MergeAttention(Device* device, const AttentionMergeArgs& a) {
  constexpr const char* kWhat = "attention merge";
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  if (a.heads < 1 || a.head_dim < 1 || a.batch < 1 || a.q_rows < 0) {
    return Status::InvalidArgument(fmt::format("attention merge: heads {} head_dim {} batch {} q_rows {}", a.heads,
                                               a.head_dim, a.batch, a.q_rows));
  }
  if (a.q_rows == 0) return Status::Ok();
  const int64_t width = static_cast<int64_t>(a.heads) * a.head_dim;
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldo", a.ldo, width));
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ldo2", a.ldo2, width));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "o", a.o));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "o2", a.o2));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "lse", a.lse));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "lse2", a.lse2));
  const int64_t n = static_cast<int64_t>(a.batch) * a.heads * a.q_rows;
  // The merged log-sum-exps go to the device's scratch first, then over lse.
  DITUNE_ASSIGN_OR_RETURN(void* scratch, d->Scratch(static_cast<size_t>(n) * sizeof(float)));
  float* merged = static_cast<float*>(scratch);
  const int64_t rows = static_cast<int64_t>(a.batch) * a.q_rows;
  const int threads = RowThreads(width);
  MergeAttentionKernel<<<Grid2D(rows, width, threads), threads, 0, d->raw_stream()>>>(
      static_cast<bf16*>(a.o), a.ldo, a.o_batch_stride, static_cast<const bf16*>(a.o2), a.ldo2, a.o2_batch_stride,
      a.lse, a.lse2, merged, a.q_rows, rows, a.heads, a.head_dim);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  DITUNE_CUDA_CHECK(cudaMemcpyAsync(a.lse, merged, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                                    d->raw_stream()));
  return Status::Ok();
}

Status FillRandom(Device* device, void* data, int64_t count, float stddev, uint64_t seed, uint64_t stream) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  if (count < 0) return Status::InvalidArgument(fmt::format("random fill of {} elements", count));
  if (count == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckPointer("random fill", "data", data));
  FillRandomKernel<<<Blocks(count, kThreads), kThreads, 0, d->raw_stream()>>>(static_cast<bf16*>(data), count, stddev,
                                                                              seed, stream);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

// ---- Memory ------------------------------------------------------------------------------

Status Copy2D(Device* device, void* dst, int64_t ld_dst, const void* src, int64_t ld_src, int64_t rows, int64_t cols) {
  constexpr const char* kWhat = "copy";
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  DITUNE_RETURN_IF_ERROR(CheckSizes(kWhat, rows, cols));
  if (rows == 0 || cols == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ld_dst", ld_dst, cols));
  DITUNE_RETURN_IF_ERROR(CheckLd(kWhat, "ld_src", ld_src, cols));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "dst", dst));
  DITUNE_RETURN_IF_ERROR(CheckPointer(kWhat, "src", src));
  constexpr size_t kBytes = sizeof(bf16);
  DITUNE_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(ld_dst) * kBytes, src,
                                      static_cast<size_t>(ld_src) * kBytes, static_cast<size_t>(cols) * kBytes,
                                      static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, d->raw_stream()));
  return Status::Ok();
}

Status Zero(Device* device, void* data, int64_t bytes) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  if (bytes < 0) return Status::InvalidArgument(fmt::format("zeroing {} bytes", bytes));
  if (bytes == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckPointer("zero", "data", data));
  DITUNE_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<size_t>(bytes), d->raw_stream()));
  return Status::Ok();
}

// The host transfers synchronise the stream before returning: the host buffer may be reused
// (or read) at once. The fp32 side of a conversion passes through the device's scratch in
// chunks, so a transfer of any size needs at most kStagingElems * 4 bytes more on the device.
constexpr int64_t kStagingElems = int64_t{1} << 22;

Status Upload(Device* device, const float* host, void* out, int64_t count) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  if (count < 0) return Status::InvalidArgument(fmt::format("upload of {} elements", count));
  if (count == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckPointer("upload", "host", host));
  DITUNE_RETURN_IF_ERROR(CheckPointer("upload", "device", out));
  const int64_t chunk = std::min(count, kStagingElems);
  DITUNE_ASSIGN_OR_RETURN(void* scratch, d->Scratch(static_cast<size_t>(chunk) * sizeof(float)));
  float* tmp = static_cast<float*>(scratch);
  for (int64_t at = 0; at < count; at += chunk) {
    const int64_t n = std::min(chunk, count - at);
    // Stream order: the previous chunk's conversion has read the scratch before this copy.
    DITUNE_CUDA_CHECK(cudaMemcpyAsync(tmp, host + at, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice,
                                      d->raw_stream()));
    ToBf16Kernel<<<Blocks(n, kThreads), kThreads, 0, d->raw_stream()>>>(tmp, static_cast<bf16*>(out) + at, n);
    DITUNE_CUDA_CHECK(cudaGetLastError());
  }
  DITUNE_CUDA_CHECK(cudaStreamSynchronize(d->raw_stream()));
  return Status::Ok();
}

Status Download(Device* device, const void* in, float* host, int64_t count) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  if (count < 0) return Status::InvalidArgument(fmt::format("download of {} elements", count));
  if (count == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckPointer("download", "device", in));
  DITUNE_RETURN_IF_ERROR(CheckPointer("download", "host", host));
  const int64_t chunk = std::min(count, kStagingElems);
  DITUNE_ASSIGN_OR_RETURN(void* scratch, d->Scratch(static_cast<size_t>(chunk) * sizeof(float)));
  float* tmp = static_cast<float*>(scratch);
  for (int64_t at = 0; at < count; at += chunk) {
    const int64_t n = std::min(chunk, count - at);
    FromBf16Kernel<<<Blocks(n, kThreads), kThreads, 0, d->raw_stream()>>>(static_cast<const bf16*>(in) + at, tmp, n);
    DITUNE_CUDA_CHECK(cudaGetLastError());
    DITUNE_CUDA_CHECK(cudaMemcpyAsync(host + at, tmp, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost,
                                      d->raw_stream()));
  }
  DITUNE_CUDA_CHECK(cudaStreamSynchronize(d->raw_stream()));
  return Status::Ok();
}

Status UploadF32(Device* device, const float* host, float* out, int64_t count) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  if (count < 0) return Status::InvalidArgument(fmt::format("upload of {} elements", count));
  if (count == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckPointer("upload", "host", host));
  DITUNE_RETURN_IF_ERROR(CheckPointer("upload", "device", out));
  DITUNE_CUDA_CHECK(
      cudaMemcpyAsync(out, host, static_cast<size_t>(count) * sizeof(float), cudaMemcpyHostToDevice, d->raw_stream()));
  DITUNE_CUDA_CHECK(cudaStreamSynchronize(d->raw_stream()));
  return Status::Ok();
}

Status DownloadF32(Device* device, const float* in, float* host, int64_t count) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, Current(device));
  if (count < 0) return Status::InvalidArgument(fmt::format("download of {} elements", count));
  if (count == 0) return Status::Ok();
  DITUNE_RETURN_IF_ERROR(CheckPointer("download", "device", in));
  DITUNE_RETURN_IF_ERROR(CheckPointer("download", "host", host));
  DITUNE_CUDA_CHECK(
      cudaMemcpyAsync(host, in, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToHost, d->raw_stream()));
  DITUNE_CUDA_CHECK(cudaStreamSynchronize(d->raw_stream()));
  return Status::Ok();
}

}  // namespace ditune::exec::cuda
