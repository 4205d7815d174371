
#include "executor/engine/engine_impl.h"

namespace ditune::exec {

StatusOr<DitEngine::Impl::Chunks> DitEngine::Impl::UlyssesIn(const void* qkv, int64_t ld, int64_t b,
                                                             int64_t L, int64_t Hl) {
  const int u = work.config.ulysses;
  if (!parallel || u == 1) return Chunks{qkv, ld, Hl, 0};
  const int64_t Ha = Hl / u;
  DITUNE_ASSIGN_OR_RETURN(void* send, Scratch(Buf::kSpSend, u * b * L * 3 * Ha * eb));
  DITUNE_ASSIGN_OR_RETURN(void* recv, Scratch(Buf::kSpRecv, u * b * L * 3 * Ha * eb));
  for (int j = 0; j < u; ++j) {
    for (int c = 0; c < 3; ++c) {
      DITUNE_RETURN_IF_ERROR(k->Copy(At(send, j * b * L * 3 * Ha + c * Ha), 3 * Ha,
                                     At(qkv, c * Hl + j * Ha), ld, b * L, Ha));
    }
  }
  DITUNE_RETURN_IF_ERROR(ulysses->AllToAll(send, recv, b * L * 3 * Ha));
  return Chunks{recv, 3 * Ha, Ha, b * L * 3 * Ha};
}

StatusOr<DitEngine::Impl::OutChunks> DitEngine::Impl::AttentionOut(void* o, int64_t ldo, int64_t b,
                                                                   int64_t L, int64_t Hl) {
  const int u = work.config.ulysses;
  if (!parallel || u == 1) return OutChunks{o, ldo, 0};
  DITUNE_ASSIGN_OR_RETURN(void* out, Scratch(Buf::kSpOut, b * L * Hl * eb));
  return OutChunks{out, Hl / u, b * L * (Hl / u)};
}

Status DitEngine::Impl::UlyssesOut(const void* out, void* o, int64_t ldo, int64_t b, int64_t L,
                                   int64_t Hl) {
  const int u = work.config.ulysses;
  const int64_t Ha = Hl / u;
  DITUNE_ASSIGN_OR_RETURN(void* back, Scratch(Buf::kSpSend, u * b * L * 3 * Ha * eb));
  DITUNE_RETURN_IF_ERROR(ulysses->AllToAll(out, back, b * L * Ha));
  for (int j = 0; j < u; ++j) {
    DITUNE_RETURN_IF_ERROR(k->Copy(At(o, j * Ha), ldo, At(back, j * b * L * Ha), Ha, b * L, Ha));
  }
  return Status::Ok();
}

}  // namespace ditune::exec
