
#include <algorithm>

#include "executor/engine/engine_impl.h"

namespace ditune::exec {

Status DitEngine::Impl::Mm(const void* a, int64_t lda, int64_t stride_a, const void* wt,
                           int64_t ldw, void* c, int64_t ldc, int64_t stride_c, int64_t rows,
                           int64_t kdim, int64_t n, int64_t batch, bool accumulate, Epilogue ep) {
  if (rows == 0) return Status::Ok();
  GemmArgs g;
  g.a = a;
  g.lda = lda;
  g.b = wt;
  g.ldb = ldw;
  g.c = c;
  g.ldc = ldc;
  g.k = kdim;
  g.n = n;
  g.accumulate = accumulate;
  g.epilogue = ep;
  if (batch == 1 || (stride_a == rows * lda && stride_c == rows * ldc)) {
    g.m = rows * batch;
  } else {
    g.m = rows;
    g.batch = static_cast<int>(batch);
    g.stride_a = stride_a;
    g.stride_c = stride_c;
  }
  return k->Gemm(g);
}

Status DitEngine::Impl::Modulation(const void* cvec, const void* wt, int64_t n, float* out) {
  GemmArgs g;
  g.a = cvec;
  g.lda = H;
  g.b = wt;
  g.ldb = n;
  g.c = out;
  g.ldc = n;
  g.m = 1;
  g.k = H;
  g.n = n;
  g.c_f32 = true;
  return k->Gemm(g);
}

Status DitEngine::Impl::Norm(const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows,
                             int64_t cols, const float* shift, const float* scale) {
  NormArgs a;
  a.x = x;
  a.ldx = ldx;
  a.y = y;
  a.ldy = ldy;
  a.rows = rows;
  a.cols = cols;
  a.shift = shift;
  a.scale = scale;
  return k->NormModulate(a);
}

Status DitEngine::Impl::Attend(const void* q, int64_t ldq, int64_t q_stride, const void* kv,
                               int64_t v_offset, int64_t ldkv, int64_t kv_stride, void* o,
                               int64_t ldo, int64_t o_stride, int64_t q_rows, int64_t kv_rows,
                               int64_t batch, int64_t heads, float* lse) {
  AttentionArgs a;
  a.q = q;
  a.ldq = ldq;
  a.q_batch_stride = q_stride;
  a.k = kv;
  a.v = At(kv, v_offset);
  a.ldk = a.ldv = ldkv;
  a.k_batch_stride = a.v_batch_stride = kv_stride;
  a.o = o;
  a.ldo = ldo;
  a.o_batch_stride = o_stride;
  a.q_rows = q_rows;
  a.kv_rows = kv_rows;
  a.batch = static_cast<int>(batch);
  a.heads = static_cast<int>(heads);
  a.head_dim = static_cast<int>(D);
  a.lse = lse;
  return k->Attention(a);
}

Status DitEngine::Impl::SelfAttention(const Dims& x, const void* qkv, int64_t ld,
                                      int64_t seq_stride, void* o, int64_t ldo, int64_t o_stride) {
  if (pipeline || distri_real || distri_in_turn)
    return BufferedAttention(x, qkv, ld, seq_stride, o, ldo, o_stride);
  if (parallel && sp > 1) return SpAttention(x, qkv, ld, seq_stride, o, ldo, o_stride);
  if (x.direct) {
    return Attend(qkv, ld, seq_stride, At(qkv, x.Hl), x.Hl, ld, seq_stride, o, ldo, o_stride,
                  x.nt + x.ni, x.nt + x.ni, x.b, x.heads_attn);
  }
  const int64_t Ha = static_cast<int64_t>(x.heads_attn) * D;
  DITUNE_ASSIGN_OR_RETURN(void* q, Scratch(Buf::kAttnQ, x.b * x.qa * Ha * eb));
  DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch(Buf::kAttnKv, x.b * x.kva * 2 * Ha * eb));
  DITUNE_ASSIGN_OR_RETURN(void* out, Scratch(Buf::kAttnO, x.b * x.qa * Ha * eb));
  return Attend(q, Ha, x.qa * Ha, kv, Ha, 2 * Ha, x.kva * 2 * Ha, out, Ha, x.qa * Ha, x.qa, x.kva,
                x.b, x.heads_attn);
}

Status DitEngine::Impl::Rope(void* qk, int64_t ld, int64_t b, int64_t nt, int64_t ni, int64_t T,
                             int64_t heads) {
  const int64_t L = nt + ni;
  const std::vector<Segment> segs = ImageSegments(seq_index, fwd_row0, ni);
  for (int64_t i = 0; i < b; ++i) {
    if (nt > 0) {
      DITUNE_RETURN_IF_ERROR(k->QkNormRope(At(qk, i * L * ld), ld, nt, static_cast<int>(heads),
                                           static_cast<int>(D), text_row0));
    }
    for (const Segment& g : segs) {
      DITUNE_RETURN_IF_ERROR(k->QkNormRope(At(qk, (i * L + nt + g.local - fwd_row0) * ld), ld,
                                           g.rows, static_cast<int>(heads), static_cast<int>(D),
                                           T + g.global));
    }
  }
  return Status::Ok();
}

Status DitEngine::Impl::Mlp(const void* h, int64_t rows, int64_t width, int64_t inner,
                            const void* w1, const void* w2, void* out) {
  DITUNE_ASSIGN_OR_RETURN(void* a, Scratch(Buf::kMlpIn, rows * (gated ? 2 : 1) * inner * eb));
  if (gated) {
    DITUNE_RETURN_IF_ERROR(
        Mm(h, width, 0, w1, 2 * inner, a, 2 * inner, 0, rows, width, 2 * inner, 1));
    DITUNE_ASSIGN_OR_RETURN(void* g, Scratch(Buf::kMlpGate, rows * inner * eb));
    DITUNE_RETURN_IF_ERROR(k->Activate(Activation::kSwiGlu, a, 2 * inner, g, inner, rows, inner));
    return Mm(g, inner, 0, w2, width, out, width, 0, rows, inner, width, 1);
  }
  DITUNE_RETURN_IF_ERROR(
      Mm(h, width, 0, w1, inner, a, inner, 0, rows, width, inner, 1, false, Epilogue::kGelu));
  return Mm(a, inner, 0, w2, width, out, width, 0, rows, inner, width, 1);
}

}  // namespace ditune::exec
