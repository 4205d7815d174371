#include <algorithm>

#include <fmt/format.h>

#include "core/rank_layout.h"
#include "core/rank_share.h"
#include "simulator/simulate.h"
#include "simulator/stage_costs.h"

namespace ditune {

StatusOr<std::map<std::string, Seconds>> ModelledKernelTimes(const SimInput& in, int rank) {
  if (in.model == nullptr || in.cluster == nullptr || in.compute == nullptr || in.comm == nullptr) {
    return Status::Internal("ModelledKernelTimes: incomplete input");
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
  std::map<std::string, Seconds> out;
  auto add = [&](bool is_patched, int forwards) {
    if (forwards == 0) return;
    for (int j = 0; j < count; ++j) {
      for (const auto& [kernel, t] : costs.Block(first + j, is_patched).by_kernel) out[kernel] += t * forwards;
    }
    if (stage == 0) {
      for (const auto& [kernel, t] : costs.OverheadByKernel(is_patched)) out[kernel] += t * forwards;
    }
  };
  add(false, warmup);
  add(true, patched);
  return out;
}

}  // namespace ditune
