// The one place CUDA and cuBLAS error codes become a Status: the failing statement, the
// function, the file and the line.
#ifndef DITUNE_EXECUTOR_CUDA_CUDA_CHECK_H_
#define DITUNE_EXECUTOR_CUDA_CUDA_CHECK_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace ditune::exec::cuda {

inline Status CudaError(cudaError_t e, const char* stmt, const char* func, const char* file, int line) {
  if (e == cudaSuccess) return Status::Ok();
  return Status::Unavailable(std::string(stmt) + " failed in " + func + " (" + file + ":" + std::to_string(line) +
                             "): " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline Status CublasError(cublasStatus_t e, const char* stmt, const char* func, const char* file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Unavailable(std::string(stmt) + " failed in " + func + " (" + file + ":" + std::to_string(line) +
                             "): cuBLAS status " + std::to_string(static_cast<int>(e)));
}

}  // namespace ditune::exec::cuda

#define DITUNE_CUDA_CHECK(stmt) \
  DITUNE_RETURN_IF_ERROR(::ditune::exec::cuda::CudaError((stmt), #stmt, __func__, __FILE__, __LINE__))
#define DITUNE_CUBLAS_CHECK(stmt) \
  DITUNE_RETURN_IF_ERROR(::ditune::exec::cuda::CublasError((stmt), #stmt, __func__, __FILE__, __LINE__))

#endif  // DITUNE_EXECUTOR_CUDA_CUDA_CHECK_H_
