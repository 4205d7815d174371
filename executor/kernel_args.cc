#include "executor/kernel_args.h"

#include <cstdint>

#include <fmt/format.h>

namespace ditune::exec {

Status CheckGemmArgs(const GemmArgs& g) {
  if (g.m < 1 || g.k < 1 || g.n < 1 || g.batch < 1) {
    return Status::InvalidArgument(fmt::format("GEMM sizes {}x{}x{} batch {}", g.m, g.k, g.n, g.batch));
  }
  if (g.lda < g.k || g.ldb < g.n || g.ldc < g.n) {
    return Status::InvalidArgument(fmt::format("GEMM {}x{}x{}: lda {} ldb {} ldc {} below the widths", g.m, g.k, g.n,
                                               g.lda, g.ldb, g.ldc));
  }
  if (g.accumulate && g.epilogue != Epilogue::kNone) {
    return Status::InvalidArgument("GEMM: an epilogue cannot be combined with accumulate");
  }
  return Status::Ok();
}

Status CheckAttentionArgs(const AttentionArgs& a) {
  if (a.heads < 1 || a.head_dim < 1 || a.batch < 1 || a.q_rows < 0 || a.kv_rows < 1) {
    return Status::InvalidArgument(fmt::format("attention: heads {} head_dim {} batch {} q_rows {} kv_rows {}",
                                               a.heads, a.head_dim, a.batch, a.q_rows, a.kv_rows));
  }
  const int64_t w = static_cast<int64_t>(a.heads) * a.head_dim;
  if (a.ldq < w || a.ldk < w || a.ldv < w || a.ldo < w) {
    return Status::InvalidArgument(fmt::format("attention: leading dimensions below heads x head_dim = {}", w));
  }
  // Several sequences into one output is a caller's mistake.
  if (a.batch > 1 && a.o_batch_stride == 0) {
    return Status::InvalidArgument(
        fmt::format("attention: {} sequences with o_batch_stride 0 write one output", a.batch));
  }
  return Status::Ok();
}

Status CheckMergeArgs(const AttentionMergeArgs& a) {
  if (a.heads < 1 || a.head_dim < 1 || a.batch < 1 || a.q_rows < 0) {
    return Status::InvalidArgument(fmt::format("attention merge: heads {} head_dim {} batch {} q_rows {}", a.heads,
                                               a.head_dim, a.batch, a.q_rows));
  }
  return Status::Ok();
}

}  // namespace ditune::exec
