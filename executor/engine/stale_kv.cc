
#include <algorithm>

#include "executor/engine/engine_impl.h"

namespace ditune::exec {

int64_t DitEngine::Impl::GlobalImageRow(int s, int64_t j) const {
  return (j / share_rows) * share_rows * shares + s * share_rows + j % share_rows;
}

std::vector<DitEngine::Impl::Segment> DitEngine::Impl::ImageSegments(int s, int64_t j0,
                                                                     int64_t n) const {
  std::vector<Segment> out;
  for (int64_t j = j0; j < j0 + n;) {
    const int64_t run = std::min(j0 + n - j, share_rows - j % share_rows);
    out.push_back({j, GlobalImageRow(s, j), run});
    j += run;
  }
  return out;
}

Status DitEngine::Impl::PutKv(void* dst, int64_t rows, int64_t Tk, const void* src, int64_t ld_src,
                              int64_t src_stride, int64_t b, int64_t nt, int64_t ni, int s,
                              int64_t text_row) {
  const int64_t w = KvWidth();
  const std::vector<Segment> segs = ImageSegments(s, fwd_row0, ni);
  for (int64_t i = 0; i < b; ++i) {
    const void* seq = At(src, i * src_stride);
    if (nt > 0)
      DITUNE_RETURN_IF_ERROR(k->Copy(At(dst, (i * rows + text_row) * w), w, seq, ld_src, nt, w));
    for (const Segment& g : segs) {
      DITUNE_RETURN_IF_ERROR(k->Copy(At(dst, (i * rows + Tk + g.global) * w), w,
                                     At(seq, (nt + g.local - fwd_row0) * ld_src), ld_src, g.rows,
                                     w));
    }
  }
  return Status::Ok();
}

Status DitEngine::Impl::BufferedAttention(const Dims& x, const void* qkv, int64_t ld,
                                          int64_t seq_stride, void* o, int64_t ldo,
                                          int64_t o_stride) {
  if (parallel && sp > 1) return BufferedSpAttention(x, qkv, ld, seq_stride, o, ldo, o_stride);
  const int64_t b = x.b, nt = x.nt, ni = x.ni, Hl = x.Hl;
  // Keys per sequence, of which text: the buffer's rows, sized where Generate zeroes it.
  const int64_t rows = KvRows(cur_block, x.T, x.N), Tk = rows - x.N;
  DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch(Buf::kStaleKv, cur_block, b * rows * 2 * Hl * eb));
  auto& pending = kv_pending[static_cast<size_t>(cur_block)];
  if (pending) {
    // The other ranks' rows of the previous step, before this step's land beside them.
    DITUNE_RETURN_IF_ERROR(pending->Wait());
    pending.reset();
  }
  auto put_fresh = [&](void* dst) {
    return PutKv(dst, rows, Tk, At(qkv, Hl), ld, seq_stride, b, nt, ni, seq_index, text_row0);
  };
  if (distri_in_turn && !kv_sync) {
    // One rank's share: the others' rows as the last step left them (the buffer is only
    // read), its own fresh; its fresh rows collect in the next step's buffer.
    DITUNE_ASSIGN_OR_RETURN(void* fresh, Scratch(Buf::kFreshKv, cur_block, b * rows * 2 * Hl * eb));
    DITUNE_ASSIGN_OR_RETURN(void* view, Scratch(Buf::kKvView, b * rows * 2 * Hl * eb));
    DITUNE_RETURN_IF_ERROR(k->Copy(view, 2 * Hl, kv, 2 * Hl, b * rows, 2 * Hl));
    DITUNE_RETURN_IF_ERROR(put_fresh(view));
    DITUNE_RETURN_IF_ERROR(put_fresh(fresh));
    return Attend(qkv, ld, seq_stride, view, Hl, 2 * Hl, rows * 2 * Hl, o, ldo, o_stride, nt + ni,
                  rows, b, Hl / D);
  }
  DITUNE_RETURN_IF_ERROR(put_fresh(kv));
  // DistriFusion: every rank's image rows (and text rows where the text is split; replicated
  // text is fresh everywhere), one in-place all-gather per sequence and region.
  auto gather = [&]() -> StatusOr<std::unique_ptr<Request>> {
    auto group = std::make_unique<RequestGroup>();
    for (int64_t i = 0; i < b; ++i) {
      DITUNE_ASSIGN_OR_RETURN(
          auto r, distri->IAllGatherInPlace(At(kv, (i * rows + Tk) * 2 * Hl), ni * 2 * Hl));
      group->Add(std::move(r));
      if (nt > 0 && nt < Tk) {
        DITUNE_ASSIGN_OR_RETURN(auto t,
                                distri->IAllGatherInPlace(At(kv, i * rows * 2 * Hl), nt * 2 * Hl));
        group->Add(std::move(t));
      }
    }
    return std::unique_ptr<Request>(std::move(group));
  };
  if (distri_real && kv_sync) {
    DITUNE_ASSIGN_OR_RETURN(auto r, gather());
    DITUNE_RETURN_IF_ERROR(r->Wait());
  }
  DITUNE_RETURN_IF_ERROR(Attend(qkv, ld, seq_stride, kv, Hl, 2 * Hl, rows * 2 * Hl, o, ldo,
                                o_stride, nt + ni, rows, b, Hl / D));
  if (distri_real && !kv_sync && kv_gather_after) {
    DITUNE_ASSIGN_OR_RETURN(pending, gather());
  }
  return Status::Ok();
}

Status DitEngine::Impl::BufferedSpAttention(const Dims& x, const void* qkv, int64_t ld,
                                            int64_t seq_stride, void* o, int64_t ldo,
                                            int64_t o_stride) {
  const int u = work.config.ulysses, r = work.config.ring;
  const int64_t b = x.b, nt = x.nt, ni = x.ni, L = nt + ni, Hl = x.Hl, Ha = Hl / u, w = KvWidth();
  const int heads = static_cast<int>(Ha / D);
  if (seq_stride != L * ld || o_stride != L * ldo) {
    return Status::Internal("sequence-parallel attention needs the sequences back to back");
  }
  const int64_t rows = KvRows(cur_block, x.T, x.N), Tk = rows - x.N;
  DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch(Buf::kStaleKv, cur_block, b * rows * w * eb));
  DITUNE_ASSIGN_OR_RETURN(const Chunks ch, UlyssesIn(qkv, ld, b, L, Hl));
  // Text split over the ranks (its length divides) sits at each share's rows; replicated
  // text is the same on every rank, and is written from this rank's rows only.
  const bool replicated = nt > 0 && nt == x.T;
  const int me = coords[Axis::kRing], mine = coords[Axis::kUlysses];
  // Chunk j of the block that started on ring rank `origin` holds share j + u origin.
  auto put = [&](const void* data, int64_t ldd, int64_t stride, int origin) -> Status {
    for (int j = 0; j < u; ++j) {
      const int share = j + u * origin;
      const bool own_text = !replicated || (origin == me && j == mine);
      const int64_t text_row = replicated ? 0 : share * nt;
      // A chunk's sequences lie L rows apart; its text rows, when skipped, are jumped over.
      const int64_t skip = own_text ? 0 : nt;
      DITUNE_RETURN_IF_ERROR(PutKv(kv, rows, Tk, At(data, j * stride + skip * ldd), ldd, L * ldd, b,
                                   nt - skip, ni, share, text_row));
    }
    return Status::Ok();
  };
  DITUNE_RETURN_IF_ERROR(put(At(ch.data, ch.koff), ch.ld, ch.stride, me));
  if (r > 1) {
    // This rank's fresh block, packed [k | v] (u chunks of b L rows), and a second for the shifts.
    const int64_t block = u * b * L * w;
    DITUNE_ASSIGN_OR_RETURN(void* cur, Scratch(Buf::kPatchRing, block * eb));
    DITUNE_ASSIGN_OR_RETURN(void* nxt, Scratch(Buf::kPatchRing2, block * eb));
    for (int j = 0; j < u; ++j) {
      DITUNE_RETURN_IF_ERROR(k->Copy(At(cur, j * b * L * w), w,
                                     At(ch.data, j * ch.stride + ch.koff), ch.ld, b * L, w));
    }
    int held = me;  // where the block in `cur` started
    for (int step = 1; step < r; ++step) {
      const int tag = 31 + ring_tag++ % 1000;
      DITUNE_ASSIGN_OR_RETURN(auto shift,
                              ring->SendRecv(cur, nxt, block, (me + 1) % r, (me + r - 1) % r, tag));
      if (held != me) DITUNE_RETURN_IF_ERROR(put(cur, w, b * L * w, held));
      DITUNE_RETURN_IF_ERROR(shift->Wait());
      std::swap(cur, nxt);
      held = (me - step + r) % r;
    }
    DITUNE_RETURN_IF_ERROR(put(cur, w, b * L * w, held));
  }
  DITUNE_ASSIGN_OR_RETURN(const OutChunks oc, AttentionOut(o, ldo, b, L, Hl));
  // Every chunk's queries (one call when there is one sequence: the chunks lie back to back).
  const int calls = b == 1 ? 1 : u;
  const int64_t q_rows = b == 1 ? u * L : L;
  for (int c = 0; c < calls; ++c) {
    DITUNE_RETURN_IF_ERROR(Attend(At(ch.data, c * ch.stride), ch.ld, L * ch.ld, kv, Ha, w, rows * w,
                                  At(oc.data, c * oc.stride), oc.ld, L * oc.ld, q_rows, rows, b,
                                  heads));
  }
  return u == 1 ? Status::Ok() : UlyssesOut(oc.data, o, ldo, b, L, Hl);
}

}  // namespace ditune::exec
