#include <algorithm>

#include <fmt/format.h>

#include "core/rank_layout.h"
#include "core/rank_share.h"
#include "simulator/simulate.h"
#include "simulator/stage_costs.h"

namespace ditune {
namespace {

// The device time of rank `rank`'s denoising loop per engine kernel and op class.
StatusOr<KernelBreakdown> LoopBreakdown(const SimInput& in, int rank, const char* caller) {
  if (in.model == nullptr || in.cluster == nullptr || in.compute == nullptr || in.comm == nullptr) {
    return Status::Internal(fmt::format("{}: incomplete input", caller));
  }
  const ParallelConfig& c = in.config;
  if (rank < 0 || rank >= c.world_size()) {
    return Status::InvalidArgument(fmt::format("rank {}: '{}' has ranks 0 to {}", rank, Label(c), c.world_size() - 1));
  }
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*in.model, in.workload));
  DITUNE_ASSIGN_OR_RETURN(RankLayout layout, RankLayout::Create(c, in.cluster->gpus_per_node()));
  const StageCosts costs(*in.model, tokens, in.workload, c, layout, *in.compute, *in.comm, /*kernel_breakdown=*/true);
  const int stages = std::max(1, c.pipefusion);
  const int stage = layout.CoordsOf(rank)[Axis::kPipeFusion];
  int first = 0, count = 0;
  StageBlocks(in.model->num_blocks(), stages, stage, &first, &count);
  const int steps = in.workload.steps;
  // Forwards of the whole sequence and of one patch over the loop.
  const int warmup = stages > 1 ? std::min(steps, c.warmup) : steps;
  const int patched = stages > 1 ? (steps - warmup) * std::max(1, c.patches) : 0;
  KernelBreakdown out;
  auto add_all = [&](const KernelBreakdown& from, int forwards) {
    for (const auto& [kernel, t] : from.by_kernel) out.by_kernel[kernel] += t * forwards;
    for (int k = 0; k < kNumOpClasses; ++k) out.by_class[k] += from.by_class[k] * forwards;
  };
  auto add = [&](bool is_patched, int forwards) {
    if (forwards == 0) return;
    for (int j = 0; j < count; ++j) add_all(costs.Block(first + j, is_patched).kernels, forwards);
    if (stage == 0) add_all(costs.OverheadKernels(is_patched), forwards);
  };
  add(false, warmup);
  add(true, patched);
  return out;
}

}  // namespace

StatusOr<std::map<std::string, Seconds>> ModelledKernelTimes(const SimInput& in, int rank) {
  DITUNE_ASSIGN_OR_RETURN(KernelBreakdown b, LoopBreakdown(in, rank, "ModelledKernelTimes"));
  return std::move(b.by_kernel);
}

StatusOr<std::array<Seconds, kNumOpClasses>> ModelledClassTimes(const SimInput& in, int rank) {
  DITUNE_ASSIGN_OR_RETURN(KernelBreakdown b, LoopBreakdown(in, rank, "ModelledClassTimes"));
  return b.by_class;
}

}  // namespace ditune
