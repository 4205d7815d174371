
#include <algorithm>

#include "executor/engine/engine_impl.h"

namespace ditune::exec {

Status DitEngine::Impl::SpAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride,
                                    void* o, int64_t ldo, int64_t o_stride) {
  const int u = work.config.ulysses, r = work.config.ring;
  const int64_t b = x.b, nt = x.nt, ni = x.ni, L = nt + ni, Hl = x.Hl, Ha = Hl / u;
  const int heads = static_cast<int>(Ha / D);
  if (seq_stride != L * ld || o_stride != L * ldo) {
    return Status::Internal("sequence-parallel attention needs the sequences back to back");
  }
  DITUNE_ASSIGN_OR_RETURN(const Chunks ch, UlyssesIn(qkv, ld, b, L, Hl));
  const void* chunks = ch.data;
  const int64_t ldr = ch.ld, koff = ch.koff, chunk_stride = ch.stride;
  // This rank's keys and values per sequence, [k | v] rows: every chunk's rows; when the text
  // is replicated on every rank (its length does not divide), the text rows only once.
  const bool replicated = nt > 0 && nt == x.T;
  const int64_t kvr = replicated ? nt + u * ni : u * L;
  const int64_t block = b * kvr * 2 * Ha;
  DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch(Buf::kSpKv, block * eb));
  for (int64_t i = 0; i < b; ++i) {
    int64_t row = 0;
    for (int j = 0; j < u; ++j) {
      const int64_t skip = replicated && j > 0 ? nt : 0;
      DITUNE_RETURN_IF_ERROR(k->Copy(At(kv, (i * kvr + row) * 2 * Ha), 2 * Ha,
                                     At(chunks, j * chunk_stride + (i * L + skip) * ldr + koff),
                                     ldr, L - skip, 2 * Ha));
      row += L - skip;
    }
  }
  // One attention call covers every chunk when there is one sequence (the chunks lie back
  // to back).
  DITUNE_ASSIGN_OR_RETURN(const OutChunks oc, AttentionOut(o, ldo, b, L, Hl));
  void* out = oc.data;
  const int64_t ld_out = oc.ld, out_chunk = oc.stride;
  const int calls = b == 1 ? 1 : u;
  const int64_t q_rows = b == 1 ? u * L : L;
  const int64_t lse_per_call = b * heads * q_rows;
  float *lse = nullptr, *lse2 = nullptr;
  void *out2 = nullptr, *kv_next = nullptr;
  if (r > 1) {
    DITUNE_ASSIGN_OR_RETURN(void* l1, Scratch(Buf::kSpLse, calls * lse_per_call * 4));
    DITUNE_ASSIGN_OR_RETURN(void* l2, Scratch(Buf::kSpLse2, calls * lse_per_call * 4));
    lse = static_cast<float*>(l1);
    lse2 = static_cast<float*>(l2);
    DITUNE_ASSIGN_OR_RETURN(out2, Scratch(Buf::kSpOut2, u * b * L * Ha * eb));
    DITUNE_ASSIGN_OR_RETURN(kv_next, Scratch(Buf::kSpKv2, block * eb));
  }
  // Every chunk's queries over keys [key0, key0 + keys) of a K/V block.
  auto attend = [&](const void* kvb, int64_t key0, int64_t keys, void* dst, int64_t ld_dst,
                    int64_t dst_chunk, float* l) -> Status {
    for (int c = 0; c < calls; ++c) {
      DITUNE_RETURN_IF_ERROR(Attend(At(chunks, c * chunk_stride), ldr, L * ldr,
                                    At(kvb, key0 * 2 * Ha), Ha, 2 * Ha, kvr * 2 * Ha,
                                    At(dst, c * dst_chunk), ld_dst, L * ld_dst, q_rows, keys, b,
                                    heads, l != nullptr ? l + c * lse_per_call : nullptr));
    }
    return Status::Ok();
  };
  const int me = coords[Axis::kRing];
  const void* cur = kv;
  void* nxt = kv_next;
  for (int s = 0; s < r; ++s) {
    std::unique_ptr<Request> shift;
    if (s + 1 < r) {
      const int tag = 31 + ring_tag++ % 1000;
      DITUNE_ASSIGN_OR_RETURN(shift,
                              ring->SendRecv(cur, nxt, block, (me + 1) % r, (me + r - 1) % r, tag));
    }
    // The block that started on ring rank `origin`; replicated text counts on rank 0's only.
    const int origin = (me - s + r) % r;
    const int64_t skip = replicated && origin != 0 ? nt : 0;
    if (s == 0) {
      DITUNE_RETURN_IF_ERROR(attend(cur, skip, kvr - skip, out, ld_out, out_chunk, lse));
    } else {
      DITUNE_RETURN_IF_ERROR(attend(cur, skip, kvr - skip, out2, Ha, b * L * Ha, lse2));
      for (int c = 0; c < calls; ++c) {
        AttentionMergeArgs mg;
        mg.o = At(out, c * out_chunk);
        mg.ldo = ld_out;
        mg.o_batch_stride = L * ld_out;
        mg.lse = lse + c * lse_per_call;
        mg.o2 = At(out2, c * b * L * Ha);
        mg.ldo2 = Ha;
        mg.o2_batch_stride = L * Ha;
        mg.lse2 = lse2 + c * lse_per_call;
        mg.q_rows = q_rows;
        mg.batch = static_cast<int>(b);
        mg.heads = heads;
        mg.head_dim = static_cast<int>(D);
        DITUNE_RETURN_IF_ERROR(k->MergeAttention(mg));
      }
    }
    if (shift) {
      DITUNE_RETURN_IF_ERROR(shift->Wait());
      const void* done = cur;
      cur = nxt;
      nxt = const_cast<void*>(done);
    }
  }
  return u == 1 ? Status::Ok() : UlyssesOut(out, o, ldo, b, L, Hl);
}

}  // namespace ditune::exec
