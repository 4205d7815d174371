// The kernel interface the DiT engine (engine.h) runs on, described by plain argument structs
// so that one engine drives every backend. Three implementations, named by the registry
// (backend_registry.cc): `ref` (host memory, bf16 storage, fp32 math — the semantics every
// other backend is tested against, and a bounds check on every access), `cpu` (host memory,
// fp32 storage and math, the per-ISA Eigen kernels of cpu_kernels_isa.h: the CPU executor)
// and `cuda` (bf16, cuBLASLt and the fused kernels of executor/cuda/).
//
// Conventions. Matrices are row-major with a leading dimension `ld` (elements between the
// starts of consecutive rows, >= the columns used). "act" buffers hold the backend's
// activation type, element_bytes() bytes an element (bf16 on ref and cuda, float on cpu);
// "f32" buffers hold float on every backend. Pointers are memory of the Kernels' device().
// Every call is ordered on the device's stream; none synchronises the host except Download.
#ifndef DITUNE_EXECUTOR_KERNELS_H_
#define DITUNE_EXECUTOR_KERNELS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "executor/device.h"

namespace ditune::exec {

enum class Epilogue {
  kNone,
  kGelu,  // tanh-approximated GELU applied to every result element
};

// C = A B (or C += A B with accumulate), `batch` times: entry i uses a + i stride_a,
// b + i stride_b, c + i stride_c (strides in elements; stride_b 0 shares the weights).
// A: m x k (lda), B: k x n (ldb), both act. C: m x n (ldc), act, or f32 with c_f32.
struct GemmArgs {
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t m = 0, k = 0, n = 0;
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool accumulate = false;  // c += a b (not with an epilogue)
  bool c_f32 = false;       // C in fp32 (modulation vectors)
  Epilogue epilogue = Epilogue::kNone;
};

// Softmax attention per sequence and head: O = softmax(Q K^T / sqrt(head_dim)) V, the
// S x S matrix never stored. Head h of a row occupies columns [h head_dim, (h+1) head_dim).
// Sequence i reads q + i q_batch_stride (q_rows rows of ldq), k + i k_batch_stride and
// v + i v_batch_stride (kv_rows rows of ldk / ldv) and writes o + i o_batch_stride
// (q_rows rows of ldo). All act; strides and leading dimensions in elements; with batch > 1
// o_batch_stride must not be 0.
struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;
  int64_t q_rows = 0, kv_rows = 0;
  int batch = 1;
  int64_t q_batch_stride = 0, k_batch_stride = 0, v_batch_stride = 0, o_batch_stride = 0;
  int heads = 0;
  int head_dim = 0;
  // Optional (f32): the log-sum-exp of each row's scaled scores, ln sum_j exp(q.k_j /
  // sqrt(head_dim)), at lse[(i heads + h) q_rows + r] — what MergeAttention needs to combine
  // attention over separate key blocks (Ring attention).
  float* lse = nullptr;
};

// Combines attention over two disjoint key sets of the same queries: (o, lse) over set A and
// (o2, lse2) over set B become (o, lse) over A and B:
//   lse' = ln(e^lse + e^lse2),  o' = e^(lse - lse') o + e^(lse2 - lse') o2.
// Layouts as AttentionArgs' o and lse (o: act rows of ldo, sequence i at i o_batch_stride).
struct AttentionMergeArgs {
  void* o = nullptr;
  int64_t ldo = 0, o_batch_stride = 0;
  float* lse = nullptr;
  const void* o2 = nullptr;
  int64_t ldo2 = 0, o2_batch_stride = 0;
  const float* lse2 = nullptr;
  int64_t q_rows = 0;
  int batch = 1;
  int heads = 0;
  int head_dim = 0;
};

// y = LayerNorm(x) (no affine, eps 1e-6) * (1 + scale) + shift per row; shift and scale are
// f32 vectors of `cols` shared by every row (either may be null: 0). act x and y.
struct NormArgs {
  const void* x = nullptr;
  int64_t ldx = 0;
  void* y = nullptr;
  int64_t ldy = 0;
  int64_t rows = 0, cols = 0;
  const float* shift = nullptr;
  const float* scale = nullptr;
};

enum class Activation {
  kGelu,    // out = gelu_tanh(in), in: rows x cols
  kSwiGlu,  // out = silu(in[:, :cols]) * in[:, cols:2 cols] (gated MLPs)
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  // "ref", "cpu" or "cuda".
  virtual std::string_view name() const = 0;
  // Bytes of one element of an act buffer: 2 (bf16) or 4 (float).
  virtual int64_t element_bytes() const = 0;
  virtual Device* device() = 0;

  virtual Status Gemm(const GemmArgs& args) = 0;
  virtual Status Attention(const AttentionArgs& args) = 0;
  virtual Status MergeAttention(const AttentionMergeArgs& args) = 0;
  virtual Status NormModulate(const NormArgs& args) = 0;
  // x (rows x cols, ldx) += gate (f32, per column; null: 1) * y (ldy). act.
  virtual Status GatedResidual(void* x, int64_t ldx, const float* gate, const void* y, int64_t ldy, int64_t rows,
                               int64_t cols) = 0;
  // out (rows x cols, ld_out) = activation(in (ld_in)); in place allowed for kGelu. act.
  virtual Status Activate(Activation kind, const void* in, int64_t ld_in, void* out, int64_t ld_out, int64_t rows,
                          int64_t cols) = 0;
  // The query-key normalisation and rotary embedding of Flux/SD3-style blocks, in place on
  // the q and k columns of `qk` (rows x 2 heads head_dim, ld): each head's vector is RMS-
  // normalised (eps 1e-6), then its pairs (2j, 2j+1) rotated by angle
  // (first_position + row) * 10000^(-2j / head_dim). act.
  virtual Status QkNormRope(void* qk, int64_t ld, int64_t rows, int heads, int head_dim, int64_t first_position) = 0;
  // dst (rows x cols, ld_dst) = src (ld_src). act; dst and src must not overlap.
  virtual Status Copy(void* dst, int64_t ld_dst, const void* src, int64_t ld_src, int64_t rows, int64_t cols) = 0;
  // Sets `count` act elements to zero.
  virtual Status Zero(void* data, int64_t count) = 0;
  // Fills `count` act elements with N(0, stddev^2) draws of the counter-based generator
  // RandomNormal(seed, stream, index) (random_hash.h): the same on every backend (to the
  // last bit of the math library).
  virtual Status FillRandom(void* data, int64_t count, float stddev, uint64_t seed, uint64_t stream) = 0;
  // The flow-matching Euler update with classifier-free guidance, per prompt i:
  //   x_i += dt * (u_i + guidance (c_i - u_i))   (u_i = c_i without guidance)
  // x: f32, `prompts` x `count` contiguous; pred: act rows of `count` elements, prompt i's
  // conditional prediction at pred + i pred_stride, the unconditional one (with guidance) at
  // pred + i pred_stride + uncond_offset. Then xb (act, same layout as x) = x.
  virtual Status EulerStep(float* x, void* xb, const void* pred, int64_t pred_stride, int64_t uncond_offset,
                           bool guidance_on, float guidance, float dt, int prompts, int64_t count) = 0;
  // Host <-> device: f32 host values to act / f32 device memory, and back.
  virtual Status Upload(const float* host, void* dev, int64_t count) = 0;
  virtual Status UploadF32(const float* host, float* dev, int64_t count) = 0;
  virtual Status Download(const void* dev, float* host, int64_t count) = 0;
  virtual Status DownloadF32(const float* dev, float* host, int64_t count) = 0;
};

// Kernels on `device` (which must be of the matching backend: "ref" and "cpu" take a cpu device).
StatusOr<std::unique_ptr<Kernels>> CreateKernels(std::string_view backend, Device* device);
// Backends with kernels in this build ("ref", "cpu", and "cuda" where built).
std::vector<std::string> KernelBackends();

// FLOPs the calls would do, counted by the ref kernels (tests compare them with the cost
// models' operation list).
struct KernelCounts {
  double gemm_flops = 0;  // GEMMs of more than one row
  double gemv_flops = 0;  // one-row GEMMs (modulation vectors)
  double attention_flops = 0;
  int64_t gemms = 0, attentions = 0, elementwise = 0;
};
// The counts of a ref Kernels since its creation (InvalidArgument for another backend).
StatusOr<KernelCounts> RefKernelCounts(Kernels* kernels);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_KERNELS_H_
