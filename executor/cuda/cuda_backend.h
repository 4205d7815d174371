// The CUDA backend: a device (streams, events, memory accounting) and bf16 kernels with fp32
// accumulation — cuBLASLt GEMMs, a fused attention that never materialises the S x S matrix,
// fused norm + modulation, GELU and gated residual. This header exposes only factory
// functions and plain pointers, so the rest of ditune compiles without CUDA; the registry
// names it behind DITUNE_HAVE_CUDA.
#ifndef DITUNE_EXECUTOR_CUDA_CUDA_BACKEND_H_
#define DITUNE_EXECUTOR_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "executor/device.h"
#include "executor/kernels.h"

namespace ditune::exec::cuda {

// The GPU `ordinal` (cudaSetDevice), with its own stream. Unavailable when there is none.
StatusOr<std::unique_ptr<Device>> NewCudaDevice(int ordinal);
// How many CUDA devices this process sees (0 when the driver or GPU is absent).
int DeviceCount();
// The cudaStream_t of a device of this backend (as a plain pointer), for libraries that queue
// work after it (NCCL); InvalidArgument for a device of another backend.
StatusOr<void*> RawStream(Device* device);

// The Kernels interface (executor/kernels.h) on a device of this backend.
StatusOr<std::unique_ptr<Kernels>> NewCudaKernels(Device* device);

// Kernels on `device`'s stream. Pointers are device memory; "bf16" tensors are row-major
// __nv_bfloat16, vectors of modulation fp32. Each returns InvalidArgument for a device of
// another backend or unsupported sizes, and the CUDA error (with the failing call, file and
// line) when a launch fails.
Status Gemm(Device* device, const void* a_bf16, const void* b_bf16, void* c_bf16, int64_t m, int64_t k, int64_t n);
// c += a b.
Status GemmAdd(Device* device, const void* a_bf16, const void* b_bf16, void* c_bf16, int64_t m, int64_t k, int64_t n);
Status NormModulate(Device* device, const void* x_bf16, const float* shift, const float* scale, void* y_bf16,
                    int64_t rows, int64_t cols);
Status Gelu(Device* device, void* x_bf16, int64_t count);
// x += gate (per column) * y.
Status GatedResidual(Device* device, void* x_bf16, const float* gate, const void* y_bf16, int64_t rows,
                     int64_t cols);
// o = softmax(q k^T / sqrt(d)) v per head (packed rows of heads * head_dim); head_dim one of
// 16, 32, 64, 72, 88, 128 (the AttentionArgs overload below with one sequence).
Status Attention(Device* device, const void* q_bf16, const void* k_bf16, const void* v_bf16, void* o_bf16,
                 int64_t q_rows, int64_t kv_rows, int heads, int head_dim);

// Sets `bytes` bytes at `data` to zero, on the device's stream.
Status Zero(Device* device, void* data, int64_t bytes);

// Host <-> device copies of fp32 data converted to/from bf16 (for tests and the runner).
Status Upload(Device* device, const float* host, void* device_bf16, int64_t count);
Status Download(Device* device, const void* device_bf16, float* host, int64_t count);
Status UploadF32(Device* device, const float* host, float* device_f32, int64_t count);
Status DownloadF32(Device* device, const float* device_f32, float* host, int64_t count);

// The launchers behind the cuda Kernels (executor/kernels.h gives the semantics of each):
// leading dimensions, batch strides, nullable vectors. Each validates its arguments
// (InvalidArgument naming the problem), treats zero rows or columns as a no-op and runs on
// the device's stream; the functions above are these with packed (ld = cols) operands.
// cuBLASLt; the heuristic's algorithm is cached per device and GEMM description.
Status Gemm(Device* device, const GemmArgs& args);
// The tensor-core FlashAttention where it takes the head dimension (and DITUNE_ATTENTION is
// not "simple"), otherwise the simple fused kernel (head_dim 16, 32, 64, 72, 88 or 128).
Status Attention(Device* device, const AttentionArgs& args);
// The simple fused kernel only, whatever the environment says (for tests and comparisons).
Status SimpleAttention(Device* device, const AttentionArgs& args);
Status MergeAttention(Device* device, const AttentionMergeArgs& args);
Status NormModulate(Device* device, const NormArgs& args);
Status GatedResidual(Device* device, void* x_bf16, int64_t ldx, const float* gate, const void* y_bf16, int64_t ldy,
                     int64_t rows, int64_t cols);
Status Activate(Device* device, Activation kind, const void* in_bf16, int64_t ld_in, void* out_bf16, int64_t ld_out,
                int64_t rows, int64_t cols);
Status QkNormRope(Device* device, void* qk_bf16, int64_t ld, int64_t rows, int heads, int head_dim,
                  int64_t first_position);
Status Copy2D(Device* device, void* dst_bf16, int64_t ld_dst, const void* src_bf16, int64_t ld_src, int64_t rows,
              int64_t cols);
Status FillRandom(Device* device, void* data_bf16, int64_t count, float stddev, uint64_t seed, uint64_t stream);
Status EulerStep(Device* device, float* x, void* xb_bf16, const void* pred_bf16, int64_t pred_stride,
                 int64_t uncond_offset, bool guidance_on, float guidance, float dt, int prompts, int64_t count);

}  // namespace ditune::exec::cuda

#endif  // DITUNE_EXECUTOR_CUDA_CUDA_BACKEND_H_
