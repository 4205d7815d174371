#include <fmt/format.h>

#include <algorithm>

#include "core/rank_share.h"
#include "executor/engine/engine_impl.h"

namespace ditune::exec {

StatusOr<EngineWork> EngineWorkFor(const ModelSpec& model, const Workload& workload,
                                   const ParallelConfig& config, int rank) {
  DITUNE_RETURN_IF_ERROR(ExecutorRunsModel(model));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, workload));
  if (rank < 0 || rank >= config.world_size()) {
    return Status::InvalidArgument(fmt::format("rank {}: '{}' has ranks 0 to {}", rank,
                                               Label(config), config.world_size() - 1));
  }
  DITUNE_ASSIGN_OR_RETURN(RankLayout layout, RankLayout::Create(config, config.world_size()));
  const std::vector<RankShare> shares = ComputeRankShares(model, tokens, workload, config, layout);
  const RankShare& s = shares.at(static_cast<size_t>(rank));
  EngineWork w;
  ParallelConfig whole = config;
  whole.patches = 1;
  whole.pipefusion = 1;
  w.warmup = ComputeRankWork(model, tokens, workload, whole);
  const bool pipelined = config.pipefusion > 1 || config.patches > 1;
  w.steady = pipelined ? ComputeRankWork(model, tokens, workload, config) : w.warmup;
  // Synchronous warm-up steps: PipeFusion's as configured; DistriFusion's at least one (its
  // stale K/V must come from somewhere).
  if (pipelined) {
    w.warmup_steps = std::min(workload.steps, config.warmup);
  } else if (config.distrifusion > 1) {
    w.warmup_steps = std::min(workload.steps, std::max(1, config.warmup));
  }
  w.first_block = s.first_block;
  w.blocks = s.blocks;
  w.branches = config.cfg == 2 ? 1 : model.GuidanceBranches();
  w.prompts = w.steady.batch / w.branches;
  w.exact = config.world_size() == 1 && !pipelined;
  w.config = config;
  w.rank = rank;
  return w;
}

int64_t EngineBytes(const ModelSpec& model, const Workload& workload, const EngineWork& work,
                    const EngineOptions& options, int64_t element_bytes) {
  const double H = model.hidden, Ht = model.text_stream_hidden, M = model.mlp_hidden;
  const double tp = work.steady.tp;
  const double up = options.architecture_extras && model.mlp_gated ? 2 : 1;
  double weights = 0;
  for (int b = work.first_block; b < work.first_block + work.blocks; ++b) {
    switch (model.family_of(b)) {
      case BlockFamily::kCross:
        weights += 6 * H * H + (3 * H * H + 2 * H * H + Ht * 2 * H + up * H * M + M * H) / tp;
        break;
      case BlockFamily::kJoint:
        weights +=
            6 * H * H + 6 * H * Ht +
            (3 * H * H + 3 * Ht * H + H * H + H * Ht + up * H * M + M * H + (up + 1) * M * Ht) / tp;
        break;
      case BlockFamily::kSingle:
        weights += 3 * H * H + (H * (3 * H + up * M) + H * H + M * H) / tp;
        break;
      case BlockFamily::kSpatial:
      case BlockFamily::kTemporal:
        break;  // ExecutorRunsModel refuses these models
    }
  }
  const double lat = static_cast<double>(model.latent_channels) * model.patch_spatial *
                     model.patch_spatial * model.patch_temporal;
  weights += 2 * lat * H + 2 * H * H + static_cast<double>(model.text_hidden) * Ht;
  // Activations of the largest forward: the residual stream, the norm output, the fused
  // projections, attention output, MLP intermediate and block output; the prompt
  // embeddings and projected text; attention-shaped buffers where an exchange stands
  // between; the cross blocks' text K/V; latents and predictions.
  const RankWork& rw = work.warmup.img_tokens >= work.steady.img_tokens ? work.warmup : work.steady;
  const double b = rw.batch, T = static_cast<double>(rw.seq_txt_tokens);
  const double rows = b * static_cast<double>(rw.img_tokens + rw.txt_tokens);
  const double Hl = H / tp, Ml = M / tp;
  double act = rows * (3 * H + 3 * Hl + up * Ml + Hl + up * Ml) + b * T * (model.text_hidden + Ht);
  const double Ha = static_cast<double>(rw.heads) * model.head_dim;
  const double qa = static_cast<double>(rw.ulysses) * (rw.img_tokens + rw.txt_tokens);
  act += b * (2 * qa + 2 * static_cast<double>(rw.seq_img_tokens + rw.seq_txt_tokens)) * Ha;
  const bool distri = work.config.distrifusion > 1;
  const bool buffered = work.steady.patches > 1 || distri;
  if (rw.seq_img_tokens > rw.img_tokens * rw.patches && !distri) {
    // Real sequence-parallel exchanges: send, receive and output chunks; two K/V blocks for
    // Ring (PipeFusion's: the fresh rows only).
    const double kv_block =
        buffered ? qa * 2 : 2 * static_cast<double>(rw.seq_img_tokens + rw.seq_txt_tokens);
    act += b * qa * 8 * Ha + 2 * b * kv_block * Ha;
  }
  act += work.blocks * b * T * 2 * Hl;
  if (work.config.pipefusion > 1) {
    // Hand-offs in flight: a warm-up step's whole residual, then one slot per patch.
    act += 2 * rows * H;
  }
  if (buffered) {
    // PipeFusion's and DistriFusion's K/V buffers: the whole sequence's keys and values per
    // block (the text's too in joint and single blocks), for this rank's heads.
    for (int i = work.first_block; i < work.first_block + work.blocks; ++i) {
      const double kv_rows = static_cast<double>(rw.seq_img_tokens) +
                             (model.family_of(i) == BlockFamily::kCross ? 0 : T);
      act += b * kv_rows * 2 * Ha;
    }
  }
  act += b * static_cast<double>(work.warmup.img_tokens) * lat * (2 + 1 + 1);
  // Loading a tensor-parallel rank's slices draws each whole matrix first, one at a time.
  double transient = 0;
  if (tp > 1) {
    for (int i = work.first_block; i < work.first_block + work.blocks; ++i) {
      const double in = model.family_of(i) == BlockFamily::kSingle ? H * (3 * H + up * M)
                                                                   : std::max(H, Ht) * 3 * H;
      transient = std::max({transient, in, std::max(H, Ht) * up * M, M * H});
    }
  }
  // fp32: every block's modulation vectors of a step, and Ring's log-sum-exps (two sets).
  const double f32 = work.blocks * (6 * H + 6 * Ht) + 2 * H + 2 * b * qa * rw.heads;
  // Each step's conditioning vector.
  const double cond = static_cast<double>(workload.steps) * H;
  return static_cast<int64_t>(
      static_cast<double>(element_bytes) * (weights + transient + act + cond) + 4 * f32);
}

}  // namespace ditune::exec
