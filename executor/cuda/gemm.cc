// bf16 GEMMs through cuBLASLt with fp32 accumulation. ditune's tensors are row-major; a
// row-major C = A B is the column-major C^T = B^T A^T, so the operands are passed swapped:
// cuBLASLt's first operand is B (column-major n x k, ld ldb), its second A (k x m, ld lda),
// its C and D are C (n x m, ld ldc). A row-major matrix of `rows` x `cols` with leading
// dimension ld is exactly the column-major cols x rows matrix with the same ld, so no data
// moves and every ld keeps its meaning (>= the column-major row count: ldb >= n, lda >= k,
// ldc >= n).
//
// The engine issues thousands of identical GEMMs, so the descriptors and the heuristic's
// algorithm are built once per GEMM description (shape, leading dimensions, batch and strides,
// types, epilogue and the operands' alignment) and kept on the device (GemmPlanCache).
#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/cuda_device_impl.h"

namespace ditune::exec::cuda {
namespace {

constexpr size_t kWorkspace = 32u << 20;

// RAII for the cuBLASLt descriptors.
struct OpDeleter {
  void operator()(std::remove_pointer_t<cublasLtMatmulDesc_t>* p) const { cublasLtMatmulDescDestroy(p); }
};
struct LayoutDeleter {
  void operator()(std::remove_pointer_t<cublasLtMatrixLayout_t>* p) const { cublasLtMatrixLayoutDestroy(p); }
};
struct PrefDeleter {
  void operator()(std::remove_pointer_t<cublasLtMatmulPreference_t>* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using OpDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, OpDeleter>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, LayoutDeleter>;
using Pref = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, PrefDeleter>;

// Everything the descriptors and the algorithm depend on. The batch strides are part of the
// layouts, so they are part of the key (0 when batch is 1).
struct GemmKey {
  int64_t m = 0, k = 0, n = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int batch = 1;
  bool c_f32 = false;
  bool gelu = false;
  uint32_t align_a = 0, align_b = 0, align_c = 0;

  bool operator==(const GemmKey& o) const {
    return m == o.m && k == o.k && n == o.n && lda == o.lda && ldb == o.ldb && ldc == o.ldc && stride_a == o.stride_a &&
           stride_b == o.stride_b && stride_c == o.stride_c && batch == o.batch && c_f32 == o.c_f32 && gelu == o.gelu &&
           align_a == o.align_a && align_b == o.align_b && align_c == o.align_c;
  }
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& key) const {
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    auto mix = [&h](uint64_t v) { h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2); };
    for (int64_t v : {key.m, key.k, key.n, key.lda, key.ldb, key.ldc, key.stride_a, key.stride_b, key.stride_c}) {
      mix(static_cast<uint64_t>(v));
    }
    mix(static_cast<uint64_t>(key.batch));
    mix((key.c_f32 ? 1u : 0u) | (key.gelu ? 2u : 0u));
    mix((static_cast<uint64_t>(key.align_a) << 32) ^ (static_cast<uint64_t>(key.align_b) << 16) ^ key.align_c);
    return static_cast<size_t>(h);
  }
};

struct GemmPlan {
  OpDesc op;
  Layout a, b, c;  // cuBLASLt's A (our B), B (our A), C = D (our C)
  cublasLtMatmulAlgo_t algo{};
};

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address
// and, in bytes, the leading dimension and the batch stride: the alignment of every row of
// every batch entry. The heuristic is told it so that it never picks a kernel needing more.
uint32_t AlignmentOf(const void* p, int64_t ld, int64_t stride, int64_t elem_bytes) {
  const uint64_t bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)) | static_cast<uint64_t>(ld * elem_bytes) |
                        static_cast<uint64_t>(stride * elem_bytes) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

StatusOr<Layout> MakeLayout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int batch, int64_t stride) {
  cublasLtMatrixLayout_t raw = nullptr;
  DITUNE_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&raw, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  Layout layout(raw);
  if (batch > 1) {
    const int32_t count = batch;
    DITUNE_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    const int64_t offset = stride;
    DITUNE_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof(offset)));
  }
  return layout;
}

std::string Describe(const GemmKey& key) {
  return fmt::format(
      "{}x{}x{} bf16 GEMM (lda {}, ldb {}, ldc {}, batch {}, strides {}/{}/{}, C {}{}, alignment "
      "{}/{}/{})",
      key.m, key.k, key.n, key.lda, key.ldb, key.ldc, key.batch, key.stride_a, key.stride_b, key.stride_c,
      key.c_f32 ? "f32" : "bf16", key.gelu ? ", GELU epilogue" : "", key.align_a, key.align_b, key.align_c);
}

StatusOr<std::shared_ptr<const GemmPlan>> BuildPlan(CudaDevice* d, const GemmKey& key) {
  auto plan = std::make_shared<GemmPlan>();
  cublasLtMatmulDesc_t op = nullptr;
  DITUNE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  plan->op.reset(op);
  if (key.gelu) {
    // CUBLASLT_EPILOGUE_GELU is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    // x^3))), the variant Kernels documents (PyTorch's decomposition of _addmm_activation(use_gelu),
    // the op its cuBLASLt GELU epilogue path implements, is gelu(approximate="tanh") on CUDA and the
    // exact erf GELU on the CPU for this reason). It applies to alpha A B in the compute type,
    // before D is rounded to its type.
    const uint32_t epilogue = CUBLASLT_EPILOGUE_GELU;
    DITUNE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  }
  // Column-major view: C^T (n x m) = B^T (n x k) * A^T (k x m).
  const cudaDataType_t c_type = key.c_f32 ? CUDA_R_32F : CUDA_R_16BF;
  DITUNE_ASSIGN_OR_RETURN(plan->a, MakeLayout(CUDA_R_16BF, key.n, key.k, key.ldb, key.batch, key.stride_b));
  DITUNE_ASSIGN_OR_RETURN(plan->b, MakeLayout(CUDA_R_16BF, key.k, key.m, key.lda, key.batch, key.stride_a));
  DITUNE_ASSIGN_OR_RETURN(plan->c, MakeLayout(c_type, key.n, key.m, key.ldc, key.batch, key.stride_c));

  cublasLtMatmulPreference_t raw_pref = nullptr;
  DITUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  Pref pref(raw_pref);
  const size_t ws_bytes = kWorkspace;
  DITUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &ws_bytes, sizeof(ws_bytes)));
  // cuBLASLt's first operand is our B, its second our A.
  const uint32_t align_first = key.align_b, align_second = key.align_a, align_c = key.align_c;
  DITUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                           &align_first, sizeof(align_first)));
  DITUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                           &align_second, sizeof(align_second)));
  DITUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                           &align_c, sizeof(align_c)));
  DITUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                           &align_c, sizeof(align_c)));

  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(d->lt(), plan->op.get(), plan->a.get(), plan->b.get(), plan->c.get(),
                                     plan->c.get(), raw_pref, 1, &heuristic, &found);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED ||
      (s == CUBLAS_STATUS_SUCCESS && (found == 0 || heuristic.state != CUBLAS_STATUS_SUCCESS))) {
    return Status::NotSupported(
        fmt::format("cuBLASLt has no algorithm for a {} on {}", Describe(key), d->props().name));
  }
  DITUNE_CUBLAS_CHECK(s);
  plan->algo = heuristic.algo;
  return std::shared_ptr<const GemmPlan>(std::move(plan));
}

Status Validate(const GemmArgs& g) {
  if (g.m < 1 || g.k < 1 || g.n < 1) {
    return Status::InvalidArgument(fmt::format("GEMM sizes must be positive: m {}, k {}, n {}", g.m, g.k, g.n));
  }
  if (g.batch < 1) return Status::InvalidArgument(fmt::format("GEMM batch {} < 1", g.batch));
  if (g.a == nullptr || g.b == nullptr || g.c == nullptr) {
    return Status::InvalidArgument(
        fmt::format("GEMM with a null operand (a {}, b {}, c {})", g.a, g.b, static_cast<const void*>(g.c)));
  }
  if (g.lda < g.k) return Status::InvalidArgument(fmt::format("GEMM lda {} < k {} (A is m x k)", g.lda, g.k));
  if (g.ldb < g.n) return Status::InvalidArgument(fmt::format("GEMM ldb {} < n {} (B is k x n)", g.ldb, g.n));
  if (g.ldc < g.n) return Status::InvalidArgument(fmt::format("GEMM ldc {} < n {} (C is m x n)", g.ldc, g.n));
  if (g.stride_a < 0 || g.stride_b < 0 || g.stride_c < 0) {
    return Status::InvalidArgument(
        fmt::format("GEMM batch strides must not be negative ({}, {}, {})", g.stride_a, g.stride_b, g.stride_c));
  }
  if (g.batch > 1 && g.stride_c == 0) {
    return Status::InvalidArgument(fmt::format("GEMM batch {} with stride_c 0 writes one C from every entry", g.batch));
  }
  if (g.accumulate && g.epilogue != Epilogue::kNone) {
    return Status::InvalidArgument("GEMM accumulate with an epilogue (the epilogue would apply to the sum)");
  }
  const uintptr_t c_bytes = g.c_f32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(g.a) % 2 != 0 || reinterpret_cast<uintptr_t>(g.b) % 2 != 0 ||
      reinterpret_cast<uintptr_t>(g.c) % c_bytes != 0) {
    return Status::InvalidArgument("GEMM operand not aligned to its element size");
  }
  return Status::Ok();
}

}  // namespace

class GemmPlanCache {
 public:
  // The plan for `key`, built (and the heuristic asked) the first time it is seen.
  StatusOr<std::shared_ptr<const GemmPlan>> Get(CudaDevice* d, const GemmKey& key) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second;
    }
    DITUNE_ASSIGN_OR_RETURN(std::shared_ptr<const GemmPlan> plan, BuildPlan(d, key));
    std::lock_guard<std::mutex> lock(mu_);
    // A run with unboundedly many descriptions (none in ditune) must not grow without limit.
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_.emplace(key, plan);
    return plan;
  }

 private:
  static constexpr size_t kMaxPlans = 4096;
  std::mutex mu_;
  std::unordered_map<GemmKey, std::shared_ptr<const GemmPlan>, GemmKeyHash> plans_;
};

void GemmPlanCacheDeleter::operator()(GemmPlanCache* cache) const { delete cache; }

GemmPlanCache* CudaDevice::gemm_plans() {
  static std::mutex create_mu;
  std::lock_guard<std::mutex> lock(create_mu);
  if (gemm_plans_ == nullptr) gemm_plans_.reset(new GemmPlanCache());
  return gemm_plans_.get();
}

Status Gemm(Device* device, const GemmArgs& args) {
  if (device == nullptr) return Status::InvalidArgument("GEMM on a null device");
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(Validate(args));
  DITUNE_RETURN_IF_ERROR(d->Use());

  GemmKey key;
  key.m = args.m;
  key.k = args.k;
  key.n = args.n;
  key.lda = args.lda;
  key.ldb = args.ldb;
  key.ldc = args.ldc;
  key.batch = args.batch;
  if (args.batch > 1) {
    key.stride_a = args.stride_a;
    key.stride_b = args.stride_b;
    key.stride_c = args.stride_c;
    // Shared weights over row blocks that follow each other (A and C entries m rows apart):
    // one GEMM of batch * m rows, which is what the strided batch computes.
    if (args.stride_b == 0 && args.stride_a == args.m * args.lda && args.stride_c == args.m * args.ldc) {
      key.m = args.m * args.batch;
      key.batch = 1;
      key.stride_a = key.stride_b = key.stride_c = 0;
    }
  }
  key.c_f32 = args.c_f32;
  key.gelu = args.epilogue == Epilogue::kGelu;
  const int64_t c_bytes = args.c_f32 ? 4 : 2;
  key.align_a = AlignmentOf(args.a, key.lda, key.stride_a, 2);
  key.align_b = AlignmentOf(args.b, key.ldb, key.stride_b, 2);
  key.align_c = AlignmentOf(args.c, key.ldc, key.stride_c, c_bytes);

  DITUNE_ASSIGN_OR_RETURN(std::shared_ptr<const GemmPlan> plan, d->gemm_plans()->Get(d, key));
  DITUNE_ASSIGN_OR_RETURN(void* ws, d->Workspace(kWorkspace));
  const float alpha = 1.0f;
  const float beta = args.accumulate ? 1.0f : 0.0f;
  DITUNE_CUBLAS_CHECK(cublasLtMatmul(d->lt(), plan->op.get(), &alpha, args.b, plan->a.get(), args.a, plan->b.get(),
                                     &beta, args.c, plan->c.get(), args.c, plan->c.get(), &plan->algo, ws, kWorkspace,
                                     d->raw_stream()));
  return Status::Ok();
}

namespace {

// Packed operands (every leading dimension its width), c = a b or c += a b.
Status PackedGemm(Device* device, const void* a, const void* b, void* c, int64_t m, int64_t k, int64_t n,
                  bool accumulate) {
  GemmArgs g;
  g.a = a;
  g.lda = k;
  g.b = b;
  g.ldb = n;
  g.c = c;
  g.ldc = n;
  g.m = m;
  g.k = k;
  g.n = n;
  g.accumulate = accumulate;
  return Gemm(device, g);
}

}  // namespace

Status Gemm(Device* device, const void* a, const void* b, void* c, int64_t m, int64_t k, int64_t n) {
  return PackedGemm(device, a, b, c, m, k, n, false);
}

Status GemmAdd(Device* device, const void* a, const void* b, void* c, int64_t m, int64_t k, int64_t n) {
  return PackedGemm(device, a, b, c, m, k, n, true);
}

}  // namespace ditune::exec::cuda
