// bf16 GEMMs through cuBLASLt with fp32 accumulation. ditune's tensors are row-major; a
// row-major C = A B is the column-major C^T = B^T A^T, so the operands are passed swapped.
#include <fmt/format.h>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/cuda_device_impl.h"

namespace ditune::exec::cuda {
namespace {

// RAII for the cuBLASLt descriptors of one call.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

constexpr size_t kWorkspace = 32u << 20;

}  // namespace

namespace {

Status GemmImpl(Device* device, const void* a, const void* b, void* c, int64_t m, int64_t k, int64_t n, float beta) {
  DITUNE_ASSIGN_OR_RETURN(CudaDevice * d, AsCuda(device));
  DITUNE_RETURN_IF_ERROR(d->Use());
  if (m <= 0 || n <= 0 || k <= 0) return Status::InvalidArgument(fmt::format("GEMM {}x{}x{}", m, k, n));
  LtDescs desc;
  DITUNE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view: C^T (n x m) = B^T (n x k) * A^T (k x m).
  DITUNE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.a, CUDA_R_16BF, n, k, n));
  DITUNE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.b, CUDA_R_16BF, k, m, k));
  DITUNE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.c, CUDA_R_16BF, n, m, n));
  DITUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.pref));
  size_t ws_bytes = kWorkspace;
  DITUNE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &ws_bytes, sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  DITUNE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(d->lt(), desc.op, desc.a, desc.b, desc.c, desc.c, desc.pref, 1,
                                                     &heuristic, &found));
  if (found == 0) return Status::NotSupported(fmt::format("cuBLASLt has no algorithm for a {}x{}x{} bf16 GEMM", m, k, n));
  DITUNE_ASSIGN_OR_RETURN(void* ws, d->Workspace(kWorkspace));
  const float alpha = 1.0f;
  DITUNE_CUBLAS_CHECK(cublasLtMatmul(d->lt(), desc.op, &alpha, b, desc.a, a, desc.b, &beta, c, desc.c, c, desc.c,
                                     &heuristic.algo, ws, kWorkspace, d->raw_stream()));
  return Status::Ok();
}

}  // namespace

Status Gemm(Device* device, const void* a, const void* b, void* c, int64_t m, int64_t k, int64_t n) {
  return GemmImpl(device, a, b, c, m, k, n, 0.0f);
}

Status GemmAdd(Device* device, const void* a, const void* b, void* c, int64_t m, int64_t k, int64_t n) {
  return GemmImpl(device, a, b, c, m, k, n, 1.0f);
}

}  // namespace ditune::exec::cuda
