#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "executor/engine/engine_impl.h"

namespace ditune::exec {

StatusOr<void*> DitEngine::Impl::Scratch(Buf which, int index, int64_t bytes) {
  auto& b = scratch[{which, index}];
  if (!b || b->bytes() < bytes) {
    // Kernels queued on the stream may still read the old buffer.
    if (b) DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());
    b.reset();
    DITUNE_ASSIGN_OR_RETURN(b, d->Alloc(std::max<int64_t>(bytes, 64)));
    DITUNE_RETURN_IF_ERROR(k->Zero(b->data(), b->bytes() / eb));
  }
  return b->data();
}

StatusOr<std::unique_ptr<Buffer>> DitEngine::Impl::Weight(int block, const std::string& name,
                                                          int64_t rows, int64_t cols,
                                                          float stddev) {
  DITUNE_ASSIGN_OR_RETURN(auto b, d->Alloc(rows * cols * eb));
  DITUNE_RETURN_IF_ERROR(
      k->FillRandom(b->data(), rows * cols, stddev, opt.seed, WeightStream(block, name)));
  weight_bytes += rows * cols * eb;
  return b;
}

StatusOr<std::unique_ptr<Buffer>> DitEngine::Impl::TpWeight(int block, const std::string& name,
                                                            int64_t rows,
                                                            const std::vector<int64_t>& parts,
                                                            bool row_split, float stddev) {
  int64_t full_cols = 0;
  for (int64_t c : parts) full_cols += c;
  const int tpd = work.steady.tp;
  if (tpd == 1) return Weight(block, name, rows, full_cols, stddev);
  const int t = coords[Axis::kTp];
  const int64_t full_rows = row_split ? rows * tpd : rows;
  DITUNE_ASSIGN_OR_RETURN(auto whole, d->Alloc(full_rows * full_cols * eb));
  DITUNE_RETURN_IF_ERROR(k->FillRandom(whole->data(), full_rows * full_cols, stddev, opt.seed,
                                       WeightStream(block, name)));
  const int64_t cols = row_split ? full_cols : full_cols / tpd;
  DITUNE_ASSIGN_OR_RETURN(auto b, d->Alloc(rows * cols * eb));
  if (row_split) {
    DITUNE_RETURN_IF_ERROR(
        k->Copy(b->data(), cols, At(whole->data(), t * rows * full_cols), full_cols, rows, cols));
  } else {
    int64_t from = 0, to = 0;
    for (int64_t part : parts) {
      const int64_t w = part / tpd;
      DITUNE_RETURN_IF_ERROR(
          k->Copy(At(b->data(), to), cols, At(whole->data(), from + t * w), full_cols, rows, w));
      from += part;
      to += w;
    }
  }
  // The whole matrix is freed on return: let the copies finish first.
  DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());
  weight_bytes += rows * cols * eb;
  return b;
}

StatusOr<std::unique_ptr<Buffer>> DitEngine::Impl::Upload(const Mat& host_m) {
  DITUNE_ASSIGN_OR_RETURN(auto b, d->Alloc(host_m.size() * eb));
  DITUNE_RETURN_IF_ERROR(k->Upload(host_m.data(), b->data(), host_m.size()));
  weight_bytes += host_m.size() * eb;
  return b;
}

Status DitEngine::Impl::Load() {
  H = m->hidden;
  Ht = m->text_stream_hidden;
  M = m->mlp_hidden;
  D = m->head_dim;
  gated = extras && m->mlp_gated;
  bool has_single = false, has_joint = false;
  for (int b = work.first_block; b < work.first_block + work.blocks; ++b) {
    has_single |= m->family_of(b) == BlockFamily::kSingle;
    has_joint |= m->family_of(b) == BlockFamily::kJoint;
  }
  unified = Ht == H;
  if (has_single && !unified)
    return Status::NotSupported("single blocks need the text stream at the hidden width");
  if (m->attention != AttentionKind::kSoftmax) {
    return Status::NotSupported(fmt::format(
        "{}: the engine runs softmax attention; linear attention is not implemented", m->id));
  }
  (void)has_joint;
  const int tpd = work.steady.tp;
  const int64_t Hl = H / tpd, Ml = M / tpd, Mtl = M * Ht / H / tpd;
  inputs = std::make_unique<ModelInputs>(*m, opt.seed);
  lat = inputs->latent_width();
  for (const char* name : {"patch", "out", "fmod", "text"}) {
    DITUNE_ASSIGN_OR_RETURN(io[name], Upload(inputs->io_weight(name)));
  }
  auto sd = [](int64_t fan_in) { return 1.0f / std::sqrt(static_cast<float>(fan_in)); };
  auto small = [](int64_t fan_in) { return 0.1f / std::sqrt(static_cast<float>(fan_in)); };
  // An MLP input projection's column parts: [gate | up] when gated.
  auto mlp_parts = [&](int64_t inner) {
    return gated ? std::vector<int64_t>{inner, inner} : std::vector<int64_t>{inner};
  };
  for (int i = 0; i < work.blocks; ++i) {
    const int b = work.first_block + i;
    BlockW bw;
    bw.family = m->family_of(b);
    auto& w = bw.w;
    switch (bw.family) {
      case BlockFamily::kCross: {
        DITUNE_ASSIGN_OR_RETURN(w["mod"], Weight(b, "mod", H, 6 * H, small(H)));
        DITUNE_ASSIGN_OR_RETURN(w["wqkv"], TpWeight(b, "wqkv", H, {H, H, H}, false, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["wo"], TpWeight(b, "wo", Hl, {H}, true, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["xq"], TpWeight(b, "xq", H, {H}, false, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["xkv"], TpWeight(b, "xkv", Ht, {H, H}, false, sd(Ht)));
        DITUNE_ASSIGN_OR_RETURN(w["xo"], TpWeight(b, "xo", Hl, {H}, true, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["w1"], TpWeight(b, "w1", H, mlp_parts(M), false, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["w2"], TpWeight(b, "w2", Ml, {H}, true, sd(M)));
        break;
      }
      case BlockFamily::kJoint: {
        DITUNE_ASSIGN_OR_RETURN(w["mod"], Weight(b, "mod", H, 6 * H, small(H)));
        DITUNE_ASSIGN_OR_RETURN(w["tmod"], Weight(b, "tmod", H, 6 * Ht, small(H)));
        DITUNE_ASSIGN_OR_RETURN(w["wqkv"], TpWeight(b, "wqkv", H, {H, H, H}, false, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["tqkv"], TpWeight(b, "tqkv", Ht, {H, H, H}, false, sd(Ht)));
        DITUNE_ASSIGN_OR_RETURN(w["wo"], TpWeight(b, "wo", Hl, {H}, true, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["to"], TpWeight(b, "to", Hl, {Ht}, true, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["w1"], TpWeight(b, "w1", H, mlp_parts(M), false, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["w2"], TpWeight(b, "w2", Ml, {H}, true, sd(M)));
        DITUNE_ASSIGN_OR_RETURN(w["t1"],
                                TpWeight(b, "t1", Ht, mlp_parts(M * Ht / H), false, sd(Ht)));
        DITUNE_ASSIGN_OR_RETURN(w["t2"], TpWeight(b, "t2", Mtl, {Ht}, true, sd(M * Ht / H)));
        break;
      }
      case BlockFamily::kSingle: {
        DITUNE_ASSIGN_OR_RETURN(w["mod"], Weight(b, "mod", H, 3 * H, small(H)));
        std::vector<int64_t> parts{H, H, H};
        for (int64_t part : mlp_parts(M)) parts.push_back(part);
        DITUNE_ASSIGN_OR_RETURN(w["wqkv1"], TpWeight(b, "wqkv1", H, parts, false, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["oa"], TpWeight(b, "oa", Hl, {H}, true, sd(H)));
        DITUNE_ASSIGN_OR_RETURN(w["om"], TpWeight(b, "om", Ml, {H}, true, sd(M)));
        break;
      }
      case BlockFamily::kSpatial:
      case BlockFamily::kTemporal:
        break;  // ExecutorRunsModel refuses these models before weights are made
    }
    blocks.push_back(std::move(bw));
  }
  return d->stream()->Synchronize();
}

}  // namespace ditune::exec
