
#include <algorithm>

#include "executor/engine/engine_impl.h"

namespace ditune::exec {

DitEngine::Impl::Dims DitEngine::Impl::DimsOf(const RankWork& rw, BlockFamily family) const {
  Dims x;
  x.b = rw.batch;
  x.ni = rw.img_tokens;
  x.nt = family == BlockFamily::kCross ? 0 : rw.txt_tokens;
  x.T = rw.seq_txt_tokens;
  x.N = rw.seq_img_tokens;
  x.Hl = H / rw.tp;
  x.Ml = M / rw.tp;
  x.Mtl = M * Ht / H / rw.tp;
  x.heads_attn = rw.heads;
  x.qa = static_cast<int64_t>(rw.ulysses) * (x.ni + x.nt);
  x.kva = x.N + (family == BlockFamily::kCross ? 0 : x.T);
  x.direct =
      x.qa == x.nt + x.ni && x.kva == x.nt + x.ni && static_cast<int64_t>(rw.heads) * D == x.Hl;
  return x;
}

StatusOr<DitEngine::Impl::Residual> DitEngine::Impl::StreamFor(const RankWork& rw) {
  Residual s;
  const int64_t b = rw.batch, nt = HasText() ? rw.txt_tokens : 0, ni = rw.img_tokens;
  if (unified) {
    DITUNE_ASSIGN_OR_RETURN(s.seq, Scratch(Buf::kResidual, b * (nt + ni) * H * eb));
    s.seq_stride = s.txt_stride = s.img_stride = (nt + ni) * H;
    s.txt = s.seq;
    s.img = At(s.seq, nt * H);
  } else {
    DITUNE_ASSIGN_OR_RETURN(s.txt, Scratch(Buf::kTextResidual, b * nt * Ht * eb));
    DITUNE_ASSIGN_OR_RETURN(s.img, Scratch(Buf::kImageResidual, b * ni * H * eb));
    s.txt_stride = nt * Ht;
    s.img_stride = ni * H;
  }
  return s;
}

bool DitEngine::Impl::HasText() const {
  for (const auto& bw : blocks) {
    if (bw.family != BlockFamily::kCross) return true;
  }
  return false;
}

Status DitEngine::Impl::Cross(BlockW& bw, const float* mod, const void* xkv, const Dims& x,
                              Residual& s) {
  const int64_t rows = x.b * x.ni, Hl = x.Hl;
  void* X = s.img;  // cross blocks: no text rows, sequences contiguous
  DITUNE_ASSIGN_OR_RETURN(void* h, Scratch(Buf::kNormOut, rows * H * eb));
  DITUNE_ASSIGN_OR_RETURN(void* qkv, Scratch(Buf::kQkv, rows * 3 * Hl * eb));
  DITUNE_ASSIGN_OR_RETURN(void* o, Scratch(Buf::kAttnOut, rows * Hl * eb));
  DITUNE_ASSIGN_OR_RETURN(void* y, Scratch(Buf::kBlockOut, rows * H * eb));
  DITUNE_RETURN_IF_ERROR(Norm(X, H, h, H, rows, H, mod, mod + H));
  DITUNE_RETURN_IF_ERROR(Mm(h, H, 0, bw.p("wqkv"), 3 * Hl, qkv, 3 * Hl, 0, rows, H, 3 * Hl, 1));
  DITUNE_RETURN_IF_ERROR(SelfAttention(x, qkv, 3 * Hl, x.ni * 3 * Hl, o, Hl, x.ni * Hl));
  DITUNE_RETURN_IF_ERROR(Mm(o, Hl, 0, bw.p("wo"), H, y, H, 0, rows, Hl, H, 1));
  DITUNE_RETURN_IF_ERROR(TpReduce(y, rows, H));
  DITUNE_RETURN_IF_ERROR(k->GatedResidual(X, H, mod + 2 * H, y, H, rows, H));
  // Cross-attention to the text (every rank holds all of it; K/V computed once per step).
  DITUNE_RETURN_IF_ERROR(Norm(X, H, h, H, rows, H, nullptr, nullptr));
  DITUNE_RETURN_IF_ERROR(Mm(h, H, 0, bw.p("xq"), Hl, qkv, Hl, 0, rows, H, Hl, 1));
  DITUNE_RETURN_IF_ERROR(Attend(qkv, Hl, x.ni * Hl, xkv, Hl, 2 * Hl, x.T * 2 * Hl, o, Hl, x.ni * Hl,
                                x.ni, x.T, x.b, Hl / D));
  DITUNE_RETURN_IF_ERROR(Mm(o, Hl, 0, bw.p("xo"), H, y, H, 0, rows, Hl, H, 1));
  DITUNE_RETURN_IF_ERROR(TpReduce(y, rows, H));
  DITUNE_RETURN_IF_ERROR(k->GatedResidual(X, H, nullptr, y, H, rows, H));
  DITUNE_RETURN_IF_ERROR(Norm(X, H, h, H, rows, H, mod + 3 * H, mod + 4 * H));
  DITUNE_RETURN_IF_ERROR(Mlp(h, rows, H, x.Ml, bw.p("w1"), bw.p("w2"), y));
  DITUNE_RETURN_IF_ERROR(TpReduce(y, rows, H));
  return k->GatedResidual(X, H, mod + 5 * H, y, H, rows, H);
}

Status DitEngine::Impl::Joint(BlockW& bw, const float* mod, const float* tmod, const Dims& x,
                              Residual& s) {
  const int64_t b = x.b, ni = x.ni, nt = x.nt, Hl = x.Hl, L = nt + ni;
  const int64_t ldt = unified ? H : Ht;  // the text rows' leading dimension in the stream
  DITUNE_ASSIGN_OR_RETURN(void* hi, Scratch(Buf::kNormOut, b * ni * H * eb));
  DITUNE_ASSIGN_OR_RETURN(void* ht, Scratch(Buf::kTextNormOut, b * nt * Ht * eb));
  DITUNE_ASSIGN_OR_RETURN(void* qkv, Scratch(Buf::kQkv, b * L * 3 * Hl * eb));
  DITUNE_ASSIGN_OR_RETURN(void* o, Scratch(Buf::kAttnOut, b * L * Hl * eb));
  DITUNE_ASSIGN_OR_RETURN(void* yi, Scratch(Buf::kBlockOut, b * ni * H * eb));
  DITUNE_ASSIGN_OR_RETURN(void* yt, Scratch(Buf::kTextBlockOut, b * nt * Ht * eb));
  for (int64_t i = 0; i < b; ++i) {
    DITUNE_RETURN_IF_ERROR(
        Norm(At(s.img, i * s.img_stride), H, At(hi, i * ni * H), H, ni, H, mod, mod + H));
    DITUNE_RETURN_IF_ERROR(
        Norm(At(s.txt, i * s.txt_stride), ldt, At(ht, i * nt * Ht), Ht, nt, Ht, tmod, tmod + Ht));
  }
  // [text; image] rows of each sequence, text first.
  DITUNE_RETURN_IF_ERROR(
      Mm(ht, Ht, nt * Ht, bw.p("tqkv"), 3 * Hl, qkv, 3 * Hl, L * 3 * Hl, nt, Ht, 3 * Hl, b));
  DITUNE_RETURN_IF_ERROR(Mm(hi, H, ni * H, bw.p("wqkv"), 3 * Hl, At(qkv, nt * 3 * Hl), 3 * Hl,
                            L * 3 * Hl, ni, H, 3 * Hl, b));
  if (extras) DITUNE_RETURN_IF_ERROR(Rope(qkv, 3 * Hl, b, nt, ni, x.T, Hl / D));
  DITUNE_RETURN_IF_ERROR(SelfAttention(x, qkv, 3 * Hl, L * 3 * Hl, o, Hl, L * Hl));
  DITUNE_RETURN_IF_ERROR(
      Mm(At(o, nt * Hl), Hl, L * Hl, bw.p("wo"), H, yi, H, ni * H, ni, Hl, H, b));
  DITUNE_RETURN_IF_ERROR(Mm(o, Hl, L * Hl, bw.p("to"), Ht, yt, Ht, nt * Ht, nt, Hl, Ht, b));
  DITUNE_RETURN_IF_ERROR(TpReduce(yi, b * ni, H));
  DITUNE_RETURN_IF_ERROR(TpReduce(yt, b * nt, Ht));
  for (int64_t i = 0; i < b; ++i) {
    DITUNE_RETURN_IF_ERROR(k->GatedResidual(At(s.img, i * s.img_stride), H, mod + 2 * H,
                                            At(yi, i * ni * H), H, ni, H));
    DITUNE_RETURN_IF_ERROR(k->GatedResidual(At(s.txt, i * s.txt_stride), ldt, tmod + 2 * Ht,
                                            At(yt, i * nt * Ht), Ht, nt, Ht));
  }
  for (int64_t i = 0; i < b; ++i) {
    DITUNE_RETURN_IF_ERROR(Norm(At(s.img, i * s.img_stride), H, At(hi, i * ni * H), H, ni, H,
                                mod + 3 * H, mod + 4 * H));
    DITUNE_RETURN_IF_ERROR(Norm(At(s.txt, i * s.txt_stride), ldt, At(ht, i * nt * Ht), Ht, nt, Ht,
                                tmod + 3 * Ht, tmod + 4 * Ht));
  }
  DITUNE_RETURN_IF_ERROR(Mlp(hi, b * ni, H, x.Ml, bw.p("w1"), bw.p("w2"), yi));
  DITUNE_RETURN_IF_ERROR(Mlp(ht, b * nt, Ht, x.Mtl, bw.p("t1"), bw.p("t2"), yt));
  DITUNE_RETURN_IF_ERROR(TpReduce(yi, b * ni, H));
  DITUNE_RETURN_IF_ERROR(TpReduce(yt, b * nt, Ht));
  for (int64_t i = 0; i < b; ++i) {
    DITUNE_RETURN_IF_ERROR(k->GatedResidual(At(s.img, i * s.img_stride), H, mod + 5 * H,
                                            At(yi, i * ni * H), H, ni, H));
    DITUNE_RETURN_IF_ERROR(k->GatedResidual(At(s.txt, i * s.txt_stride), ldt, tmod + 5 * Ht,
                                            At(yt, i * nt * Ht), Ht, nt, Ht));
  }
  return Status::Ok();
}

Status DitEngine::Impl::Single(BlockW& bw, const float* mod, const Dims& x, Residual& s) {
  const int64_t L = x.nt + x.ni, rows = x.b * L, Hl = x.Hl, Ml = x.Ml;
  const int64_t W1 = 3 * Hl + (gated ? 2 : 1) * Ml;  // [q | k | v | mlp-in]
  DITUNE_ASSIGN_OR_RETURN(void* h, Scratch(Buf::kNormOut, rows * H * eb));
  DITUNE_ASSIGN_OR_RETURN(void* qkvm, Scratch(Buf::kQkvMlp, rows * W1 * eb));
  DITUNE_ASSIGN_OR_RETURN(void* o, Scratch(Buf::kAttnOut, rows * Hl * eb));
  DITUNE_ASSIGN_OR_RETURN(void* y, Scratch(Buf::kBlockOut, rows * H * eb));
  DITUNE_RETURN_IF_ERROR(Norm(s.seq, H, h, H, rows, H, mod, mod + H));
  DITUNE_RETURN_IF_ERROR(Mm(h, H, 0, bw.p("wqkv1"), W1, qkvm, W1, 0, rows, H, W1, 1));
  const void* act = At(qkvm, 3 * Hl);
  int64_t ld_act = W1;
  if (gated) {
    DITUNE_ASSIGN_OR_RETURN(void* g, Scratch(Buf::kMlpGate, rows * Ml * eb));
    DITUNE_RETURN_IF_ERROR(k->Activate(Activation::kSwiGlu, At(qkvm, 3 * Hl), W1, g, Ml, rows, Ml));
    act = g;
    ld_act = Ml;
  } else {
    DITUNE_RETURN_IF_ERROR(
        k->Activate(Activation::kGelu, At(qkvm, 3 * Hl), W1, At(qkvm, 3 * Hl), W1, rows, Ml));
  }
  if (extras) DITUNE_RETURN_IF_ERROR(Rope(qkvm, W1, x.b, x.nt, x.ni, x.T, Hl / D));
  DITUNE_RETURN_IF_ERROR(SelfAttention(x, qkvm, W1, L * W1, o, Hl, L * Hl));
  DITUNE_RETURN_IF_ERROR(Mm(o, Hl, 0, bw.p("oa"), H, y, H, 0, rows, Hl, H, 1));
  DITUNE_RETURN_IF_ERROR(
      Mm(act, ld_act, 0, bw.p("om"), H, y, H, 0, rows, Ml, H, 1, /*accumulate=*/true));
  DITUNE_RETURN_IF_ERROR(TpReduce(y, rows, H));
  return k->GatedResidual(s.seq, H, mod + 2 * H, y, H, rows, H);
}

}  // namespace ditune::exec
