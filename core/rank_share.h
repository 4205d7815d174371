// What each rank of a plan does: which tokens, heads, blocks, patches and prompts are its.
#ifndef DITUNE_CORE_RANK_SHARE_H_
#define DITUNE_CORE_RANK_SHARE_H_

#include <cstdint>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/rank_layout.h"
#include "core/workload.h"

namespace ditune {

struct RankShare {
  int rank = 0;
  int node = 0;
  RankCoords coords;
  int64_t tokens = 0;            // image tokens this rank holds outside attention
  int64_t tokens_per_patch = 0;  // with PipeFusion: tokens of one patch on this rank
  int heads = 0;                 // attention heads this rank computes (heads / (ulysses x tp))
  int first_block = 0;           // blocks [first_block, first_block + blocks) of the model
  int blocks = 0;
  int patches = 1;               // PipeFusion patches streamed through this rank per step
  int prompts = 1;               // prompts of the batch this rank serves (batch / dp)
  int cfg_branch = -1;           // 0 conditional, 1 unconditional; -1 both (no cfg parallel)
};

// Blocks [first, first + count) of PipeFusion stage `stage` of `stages`. kBalanced (ditune's
// executor): the first num_blocks % stages stages take one more. kCeil (xDiT,
// base_transformer.py): ceil(num_blocks / stages) each, the last stage the rest, which may
// be none.
void StageBlocks(int num_blocks, int stages, int stage, int* first, int* count,
                 StagePartition partition = StagePartition::kBalanced);

// One entry per rank. Requires a configuration that passed ValidateConfig.
std::vector<RankShare> ComputeRankShares(const ModelSpec& model, const TokenGeometry& tokens,
                                         const Workload& workload, const ParallelConfig& config,
                                         const RankLayout& layout,
                                         StagePartition partition = StagePartition::kBalanced);

}  // namespace ditune

#endif  // DITUNE_CORE_RANK_SHARE_H_
