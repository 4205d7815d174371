#include "core/rank_share.h"

namespace ditune {

void StageBlocks(int num_blocks, int stages, int stage, int* first, int* count, StagePartition partition) {
  if (partition == StagePartition::kCeil) {
    const int per = (num_blocks + stages - 1) / stages;
    *first = std::min(num_blocks, stage * per);
    *count = std::min(num_blocks, (stage + 1) * per) - *first;
    return;
  }
  const int base = num_blocks / stages;
  const int extra = num_blocks % stages;
  *count = base + (stage < extra ? 1 : 0);
  *first = stage * base + std::min(stage, extra);
}

std::vector<RankShare> ComputeRankShares(const ModelSpec& model, const TokenGeometry& tokens,
                                         const Workload& workload, const ParallelConfig& c,
                                         const RankLayout& layout, StagePartition partition) {
  std::vector<RankShare> shares;
  const int64_t seq_split = static_cast<int64_t>(c.sp()) * c.distrifusion;
  for (int r = 0; r < layout.world_size(); ++r) {
    RankShare s;
    s.rank = r;
    s.node = layout.NodeOf(r);
    s.coords = layout.CoordsOf(r);
    s.tokens = tokens.image_tokens() / seq_split;
    s.patches = c.patches;
    s.tokens_per_patch = s.tokens / c.patches;
    s.heads = model.heads / (c.ulysses * c.tp);
    StageBlocks(model.num_blocks(), c.pipefusion, s.coords[Axis::kPipeFusion], &s.first_block,
                &s.blocks, partition);
    s.prompts = workload.batch / c.dp;
    s.cfg_branch = c.cfg == 2 ? s.coords[Axis::kCfg] : -1;
    shares.push_back(s);
  }
  return shares;
}

}  // namespace ditune
