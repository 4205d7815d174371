// The cost of one rank's forward through its blocks, split into the phases the task graph
// schedules: compute before attention, Ulysses all-to-alls, attention (with Ring's passes
// overlapped), compute after attention, tensor-parallel all-reduces.
#ifndef DITUNE_SIMULATOR_STAGE_COSTS_H_
#define DITUNE_SIMULATOR_STAGE_COSTS_H_

#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/rank_layout.h"
#include "core/units.h"
#include "core/workload.h"
#include "costmodels/comm_model.h"
#include "costmodels/compute_model.h"
#include "costmodels/dit_ops.h"

namespace ditune {

// Device time of a set of ops per engine kernel (OpCost::kernel; "other" for ops that name
// none) and per op class: what `ditune run --profile` and a profiler trace's kernel classes
// are compared with.
struct KernelBreakdown {
  std::map<std::string, Seconds> by_kernel;
  std::array<Seconds, kNumOpClasses> by_class{};
  // Adds `device` to the op's kernel and class; nothing for a host-only op.
  void Add(const OpCost& op, Seconds device);
  // Multiplies every entry by k.
  void Scale(double k);
};

struct BlockCost {
  Seconds pre;        // compute up to and including the QKV projection
  Seconds a2a_in;     // Ulysses: three all-to-alls (Q, K, V) before attention
  Seconds attn;       // attention compute (all Ring steps)
  Seconds ring_exposed;  // Ring: K/V passes not hidden behind the blockwise attention
  Seconds a2a_out;    // Ulysses: the all-to-all of the output
  Seconds post;       // compute after attention (projections, cross-attention, MLP)
  Seconds tp;         // tensor parallel: two all-reduces
  Seconds fsdp;       // fully-sharded weights: the block's all-gather not hidden behind the previous block
  // Host time to issue the ops of each compute phase (eager frameworks).
  Seconds pre_host, attn_host, post_host;
  // The compute phases' device time per engine kernel and op class, when StageCosts was
  // asked for the breakdown.
  KernelBreakdown kernels;

  Seconds compute() const { return pre + attn + post; }
  Seconds comm() const { return a2a_in + ring_exposed + a2a_out + tp + fsdp; }
  Seconds total() const { return compute() + comm(); }
};

// Per-block costs of a representative rank, for a forward over `patches` patches (1 = the
// whole sequence: warm-up steps and methods without PipeFusion).
class StageCosts {
 public:
  // `sequential_forwards` > 1: the runtime runs the guidance branches as that many forwards
  // one after another, each over its share of the batch (diffusers' Qwen-Image and Wan
  // pipelines, Wan's generate.py: SequentialForwards in simulate.h); every block and the
  // step's own work then cost that many forwards of the smaller batch.
  StageCosts(const ModelSpec& model, const TokenGeometry& tokens, const Workload& workload,
             const ParallelConfig& config, const RankLayout& layout, const ComputeModel& compute,
             const CommModel& comm, bool kernel_breakdown = false, TpSplit tp_split = TpSplit::kMegatron,
             int sequential_forwards = 1, bool ring_merge_fused = false);

  // Cost of block `index` when the forward covers one of `patches` patches.
  const BlockCost& Block(int index, bool patched) const;
  // A model's ControlNet for one whole forward (all its blocks; zero without one), and the
  // all-gathers of the DiT's split stream its hints take (ModelSpec::control).
  const BlockCost& Control() const { return control_; }
  Seconds ControlGathers() const { return control_gather_; }
  // Work outside the blocks (embeddings, final layer), per forward.
  Seconds Overhead(bool patched) const { return patched ? overhead_patched_ : overhead_full_; }
  Seconds OverheadHost(bool patched) const { return patched ? overhead_host_patched_ : overhead_host_full_; }
  // Host time of one scheduler step, on the rank that steps the latents (under PipeFusion the
  // last stage, once per patch: xDiT's _async_pipeline calls _scheduler_step on each patch):
  // the scheduler's counted ATen ops (ModelSpec::step_host_ops) at the eager host time per op.
  // Eager and compiled runtimes alike (torch.compile wraps the transformer, not the
  // scheduler); zero for ditune's own engine and for a model whose scheduler is not counted.
  Seconds SchedulerHost() const { return scheduler_host_; }
  // With the kernel breakdown: the work outside the blocks per engine kernel and op class.
  const KernelBreakdown& OverheadKernels(bool patched) const {
    return patched ? overhead_kernels_patched_ : overhead_kernels_full_;
  }
  // The rank's work description for a forward.
  const RankWork& Work(bool patched) const { return patched ? work_patched_ : work_full_; }
  // Bytes of one forward's hidden states on this rank (what PipeFusion sends to the next stage).
  Bytes Activation(bool patched) const;
  // Bytes of one forward's latent output on this rank (the noise prediction).
  Bytes Latent(bool patched) const;

 private:
  BlockCost Cost(BlockFamily family, const RankWork& work, const ParallelConfig& config) const;

  const ModelSpec& model_;
  const TokenGeometry& tokens_;
  const ParallelConfig& config_;
  const RankLayout& layout_;
  const ComputeModel& compute_;
  const CommModel& comm_;
  RankWork work_full_, work_patched_;
  // How many transfers share rank 0's group's bottleneck, per axis (CommModel::Sharing).
  std::array<double, kNumAxes> share_ = [] {
    std::array<double, kNumAxes> one{};
    one.fill(1.0);
    return one;
  }();
  // Per family (indexed by BlockFamily), for full and patched forwards.
  BlockCost full_[kNumBlockFamilies], patched_[kNumBlockFamilies];
  BlockCost control_;
  Seconds control_gather_;
  Seconds overhead_full_, overhead_patched_;
  Seconds overhead_host_full_, overhead_host_patched_;
  Seconds scheduler_host_;
  bool kernel_breakdown_;
  TpSplit tp_split_ = TpSplit::kMegatron;
  bool ring_merge_fused_ = false;
  KernelBreakdown overhead_kernels_full_, overhead_kernels_patched_;
};

}  // namespace ditune

#endif  // DITUNE_SIMULATOR_STAGE_COSTS_H_
