#include "executor/engine/engine_impl.h"

namespace ditune::exec {

Status DitEngine::Impl::TpReduce(void* y, int64_t rows, int64_t cols) {
  if (!parallel || work.steady.tp == 1) return Status::Ok();
  return tp->AllReduceSum(y, rows * cols);
}

}  // namespace ditune::exec
