#include "simulator/stage_costs.h"

#include <algorithm>

namespace ditune {
namespace {

// Sums op times into the phases around the attention op named "attn".
void Phases(const ComputeModel& cm, const std::vector<OpCost>& ops, Seconds* pre, Seconds* attn, Seconds* post) {
  bool after = false;
  for (const auto& op : ops) {
    const Seconds t = cm.OpTime(op);
    if (op.name == "attn") {
      *attn += t;
      after = true;
    } else if (after) {
      *post += t;
    } else {
      *pre += t;
    }
  }
}

}  // namespace

StageCosts::StageCosts(const ModelSpec& model, const TokenGeometry& tokens, const Workload& workload,
                       const ParallelConfig& config, const RankLayout& layout, const ComputeModel& compute,
                       const CommModel& comm)
    : model_(model), tokens_(tokens), config_(config), layout_(layout), compute_(compute), comm_(comm) {
  work_patched_ = ComputeRankWork(model, tokens, workload, config);
  ParallelConfig whole = config;
  whole.patches = 1;
  whole.pipefusion = 1;
  work_full_ = ComputeRankWork(model, tokens, workload, whole);
  for (BlockFamily f : {BlockFamily::kCross, BlockFamily::kJoint, BlockFamily::kSingle}) {
    if (model.num_blocks(f) == 0) continue;
    full_[static_cast<int>(f)] = Cost(f, work_full_);
    patched_[static_cast<int>(f)] = Cost(f, work_patched_);
  }
  overhead_full_ = compute.OpsTime(StepOverheadOps(model, work_full_));
  overhead_patched_ = compute.OpsTime(StepOverheadOps(model, work_patched_));
}

const BlockCost& StageCosts::Block(int index, bool patched) const {
  const int f = static_cast<int>(model_.family_of(index));
  return patched ? patched_[f] : full_[f];
}

Bytes StageCosts::Activation(bool patched) const {
  const RankWork& w = Work(patched);
  return Bytes(kElementBytes * w.batch * static_cast<double>(w.img_tokens + w.txt_tokens) * model_.hidden);
}

Bytes StageCosts::Latent(bool patched) const {
  const RankWork& w = Work(patched);
  const double per_token = static_cast<double>(model_.latent_channels) * model_.patch_spatial *
                           model_.patch_spatial * model_.patch_temporal;
  return Bytes(kElementBytes * w.batch * static_cast<double>(w.img_tokens) * per_token);
}

BlockCost StageCosts::Cost(BlockFamily family, const RankWork& w) const {
  BlockCost c;
  Phases(compute_, BlockOps(model_, family, w), &c.pre, &c.attn, &c.post);
  // Tokens that take part in attention on this rank (text joins it in joint and single blocks).
  const double tokens = static_cast<double>(w.img_tokens) +
                        (family == BlockFamily::kCross ? 0.0 : static_cast<double>(w.txt_tokens));
  const double width = static_cast<double>(model_.hidden) / config_.tp;
  const double qkv_one = kElementBytes * w.batch * tokens * width;  // one of Q, K, V on this rank
  const int rep = 0;  // rank 0 represents its groups: every group of a dimension is alike
  if (config_.ulysses > 1) {
    const auto group = layout_.GroupOf(rep, Axis::kUlysses);
    const double share = comm_.Sharing(group, layout_.Groups(Axis::kUlysses));
    c.a2a_in = comm_.Time(Collective::kAllToAll, Bytes(qkv_one), group, share) * 3;
    c.a2a_out = comm_.Time(Collective::kAllToAll, Bytes(qkv_one), group, share);
  }
  if (config_.ring > 1) {
    // r - 1 passes of this rank's K and V (after Ulysses: u x tokens, heads / u) around the
    // ring, each overlapped with the attention over the block already held.
    const auto group = layout_.GroupOf(rep, Axis::kRing);
    const double share = comm_.Sharing(group, layout_.Groups(Axis::kRing));
    const Seconds pass = comm_.Time(Collective::kSendRecv, Bytes(2 * qkv_one), {group[0], group[1]}, share);
    const Seconds chunk = c.attn / config_.ring;
    if (pass > chunk) c.ring_exposed = (pass - chunk) * (config_.ring - 1);
  }
  if (config_.tp > 1) {
    const auto group = layout_.GroupOf(rep, Axis::kTp);
    const double share = comm_.Sharing(group, layout_.Groups(Axis::kTp));
    const double n = w.batch * (static_cast<double>(w.img_tokens) +
                                (family == BlockFamily::kCross ? 0.0 : static_cast<double>(w.txt_tokens)));
    c.tp = comm_.Time(Collective::kAllReduce, Bytes(kElementBytes * n * model_.hidden), group, share) * 2;
  }
  return c;
}

}  // namespace ditune
