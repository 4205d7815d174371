// bf16 kernels with fp32 accumulation: fused norm + modulation, GELU, gated residual, and a
// fused attention with an online softmax over key tiles (the S x S matrix never exists).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

#include <fmt/format.h>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/cuda_device_impl.h"

namespace ditune::exec::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarp = 32;

__device__ float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024).
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

// One block per row: y = LayerNorm(x) * (1 + scale) + shift.
__global__ void NormModulateKernel(const bf16* x, const float* shift, const float* scale, bf16* y, int64_t cols) {
  __shared__ float shared[32];
  const bf16* row = x + blockIdx.x * cols;
  bf16* out = y + blockIdx.x * cols;
  float sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += __bfloat162float(row[c]);
  const float mean = BlockSum(sum, shared) / cols;
  float sq = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = __bfloat162float(row[c]) - mean;
    sq += d * d;
  }
  const float inv = rsqrtf(BlockSum(sq, shared) / cols + 1e-6f);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = (__bfloat162float(row[c]) - mean) * inv;
    out[c] = __float2bfloat16(v * (1.0f + scale[c]) + shift[c]);
  }
}

__global__ void GeluKernel(bf16* x, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = __bfloat162float(x[i]);
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  x[i] = __float2bfloat16(0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v))));
}

__global__ void GatedResidualKernel(bf16* x, const float* gate, const bf16* y, int64_t rows, int64_t cols) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t c = i % cols;
  x[i] = __float2bfloat16(__bfloat162float(x[i]) + gate[c] * __bfloat162float(y[i]));
}

// Attention: a block of kQueries queries (one per thread) of one head; keys and values in
// tiles of kTile rows through shared memory; running max, sum and output per query in
// registers (fp32). D is the head dimension.
template <int D>
__global__ void AttentionKernel(const bf16* q, const bf16* k, const bf16* v, bf16* o, int64_t q_rows, int64_t kv_rows,
                                int heads, float scale) {
  constexpr int kTile = 32;
  __shared__ float ks[kTile][D];
  __shared__ float vs[kTile][D];
  const int head = blockIdx.y;
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(heads) * D;
  const bool active = row < q_rows;
  float qr[D];
  float acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) {
    qr[d] = active ? __bfloat162float(q[row * stride + head * D + d]) * scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t start = 0; start < kv_rows; start += kTile) {
    const int n = static_cast<int>(min(static_cast<int64_t>(kTile), kv_rows - start));
    for (int i = threadIdx.x; i < kTile * D; i += blockDim.x) {
      const int r = i / D, d = i % D;
      const bool in = r < n;
      ks[r][d] = in ? __bfloat162float(k[(start + r) * stride + head * D + d]) : 0.0f;
      vs[r][d] = in ? __bfloat162float(v[(start + r) * stride + head * D + d]) : 0.0f;
    }
    __syncthreads();
    if (active) {
      for (int r = 0; r < n; ++r) {
        float s = 0.0f;
#pragma unroll
        for (int d = 0; d < D; ++d) s += qr[d] * ks[r][d];
        const float new_m = fmaxf(m, s);
        const float correction = __expf(m - new_m);
        const float p = __expf(s - new_m);
        l = l * correction + p;
#pragma unroll
        for (int d = 0; d < D; ++d) acc[d] = acc[d] * correction + p * vs[r][d];
        m = new_m;
      }
    }
    __syncthreads();
  }
  if (active) {
    const float inv = 1.0f / l;
#pragma unroll
    for (int d = 0; d < D; ++d) o[row * stride + head * D + d] = __float2bfloat16(acc[d] * inv);
  }
}

__global__ void ToBf16Kernel(const float* in, bf16* out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(in[i]);
}

__global__ void FromBf16Kernel(const bf16* in, float* out, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __bfloat162float(in[i]);
}

unsigned Blocks(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

Status NormModulate(Device* device, const void* x, const float* shift, const float* scale, void* y, int64_t rows,
                    int64_t cols) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  if (rows <= 0 || cols <= 0) return Status::Ok();
  NormModulateKernel<<<static_cast<unsigned>(rows), 256, 0, d->raw_stream()>>>(
      static_cast<const bf16*>(x), shift, scale, static_cast<bf16*>(y), cols);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status Gelu(Device* device, void* x, int64_t count) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  if (count <= 0) return Status::Ok();
  GeluKernel<<<Blocks(count, 256), 256, 0, d->raw_stream()>>>(static_cast<bf16*>(x), count);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status GatedResidual(Device* device, void* x, const float* gate, const void* y, int64_t rows, int64_t cols) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  if (rows * cols <= 0) return Status::Ok();
  GatedResidualKernel<<<Blocks(rows * cols, 256), 256, 0, d->raw_stream()>>>(
      static_cast<bf16*>(x), gate, static_cast<const bf16*>(y), rows, cols);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status Attention(Device* device, const void* q, const void* k, const void* v, void* o, int64_t q_rows, int64_t kv_rows,
                 int heads, int head_dim) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  if (q_rows <= 0) return Status::Ok();
  if (kv_rows <= 0) return Status::InvalidArgument("attention over no keys");
  constexpr int kThreads = 64;
  const dim3 grid(Blocks(q_rows, kThreads), static_cast<unsigned>(heads));
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  const auto* qb = static_cast<const bf16*>(q);
  const auto* kb = static_cast<const bf16*>(k);
  const auto* vb = static_cast<const bf16*>(v);
  auto* ob = static_cast<bf16*>(o);
  switch (head_dim) {
    case 64: AttentionKernel<64><<<grid, kThreads, 0, d->raw_stream()>>>(qb, kb, vb, ob, q_rows, kv_rows, heads, scale); break;
    case 72: AttentionKernel<72><<<grid, kThreads, 0, d->raw_stream()>>>(qb, kb, vb, ob, q_rows, kv_rows, heads, scale); break;
    case 88: AttentionKernel<88><<<grid, kThreads, 0, d->raw_stream()>>>(qb, kb, vb, ob, q_rows, kv_rows, heads, scale); break;
    case 128: AttentionKernel<128><<<grid, kThreads, 0, d->raw_stream()>>>(qb, kb, vb, ob, q_rows, kv_rows, heads, scale); break;
    case 16: AttentionKernel<16><<<grid, kThreads, 0, d->raw_stream()>>>(qb, kb, vb, ob, q_rows, kv_rows, heads, scale); break;
    default:
      return Status::InvalidArgument(fmt::format("attention head_dim {} is not one of 16, 64, 72, 88, 128", head_dim));
  }
  DITUNE_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status UploadBf16(Device* device, const float* host, void* out, int64_t count) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  float* tmp = nullptr;
  DITUNE_CUDA_CHECK(cudaMallocAsync(&tmp, count * sizeof(float), d->raw_stream()));
  DITUNE_CUDA_CHECK(cudaMemcpyAsync(tmp, host, count * sizeof(float), cudaMemcpyHostToDevice, d->raw_stream()));
  ToBf16Kernel<<<Blocks(count, 256), 256, 0, d->raw_stream()>>>(tmp, static_cast<bf16*>(out), count);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  DITUNE_CUDA_CHECK(cudaFreeAsync(tmp, d->raw_stream()));
  DITUNE_CUDA_CHECK(cudaStreamSynchronize(d->raw_stream()));
  return Status::Ok();
}

Status DownloadBf16(Device* device, const void* in, float* host, int64_t count) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  float* tmp = nullptr;
  DITUNE_CUDA_CHECK(cudaMallocAsync(&tmp, count * sizeof(float), d->raw_stream()));
  FromBf16Kernel<<<Blocks(count, 256), 256, 0, d->raw_stream()>>>(static_cast<const bf16*>(in), tmp, count);
  DITUNE_CUDA_CHECK(cudaGetLastError());
  DITUNE_CUDA_CHECK(cudaMemcpyAsync(host, tmp, count * sizeof(float), cudaMemcpyDeviceToHost, d->raw_stream()));
  DITUNE_CUDA_CHECK(cudaFreeAsync(tmp, d->raw_stream()));
  DITUNE_CUDA_CHECK(cudaStreamSynchronize(d->raw_stream()));
  return Status::Ok();
}

Status Zero(Device* device, void* data, int64_t bytes) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  DITUNE_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<size_t>(bytes), d->raw_stream()));
  return Status::Ok();
}

Status UploadF32(Device* device, const float* host, float* out, int64_t count) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  DITUNE_CUDA_CHECK(cudaMemcpyAsync(out, host, count * sizeof(float), cudaMemcpyHostToDevice, d->raw_stream()));
  DITUNE_CUDA_CHECK(cudaStreamSynchronize(d->raw_stream()));
  return Status::Ok();
}

}  // namespace ditune::exec::cuda
