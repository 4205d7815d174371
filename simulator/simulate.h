// Simulates one generation of a workload on a cluster under a parallel configuration:
// per-rank task graphs (text encoding, warm-up steps, denoising steps, VAE decode) run on
// the task scheduler with a compute and a communication stream per rank.
//
// Ranks that differ only in their Ulysses, Ring, tensor-parallel, CFG or data-parallel
// coordinate do identical work at identical times (every group of a dimension is alike and
// communicates in lockstep), so one representative rank per PipeFusion stage is simulated
// and its results stand for the others; contention between the groups that communicate at
// once is charged through CommModel::Sharing.
#ifndef DITUNE_SIMULATOR_SIMULATE_H_
#define DITUNE_SIMULATOR_SIMULATE_H_

#include <cstddef>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/units.h"
#include "core/workload.h"
#include "costmodels/comm_model.h"
#include "costmodels/compute_model.h"
#include "costmodels/memory_model.h"
#include "costmodels/pipeline_terms.h"
#include "simulator/task_scheduler.h"

namespace ditune {

struct SimInput {
  const ModelSpec* model = nullptr;
  Workload workload;
  const Cluster* cluster = nullptr;
  ParallelConfig config;
  const ComputeModel* compute = nullptr;
  const CommModel* comm = nullptr;
};

struct SimOptions {
  MemoryOptions memory;
  PipelineTermScales terms;
  // Simulate two steady steps and extend linearly. Exact: every steady step has the same
  // shapes and so the same task durations, and the schedule repeats with a fixed period
  // once the pipeline is full.
  bool extrapolate = true;
  bool parallel_vae = false;
  // How PipeFusion's blocks are split over the stages (xDiT: ceil per stage).
  StagePartition stage_partition = StagePartition::kBalanced;
  // What the runtime's tensor parallelism splits (RuntimeSupport::tp_split).
  TpSplit tp_split = TpSplit::kMegatron;
  // The runtime's ring library merges the blocks' partial outputs in one fused kernel
  // (RuntimeSpec::ring_merge_fused).
  bool ring_merge_fused = false;
  // SimResult::ranks holds every rank; false: the first rank of each PipeFusion stage only
  // (every rank of a stage has its representative's figures). The planner keeps thousands of
  // candidates: on 4,096 GPUs a row per rank is most of its memory.
  bool every_rank = true;
};

struct StepBreakdown {
  Seconds compute;       // compute stream busy
  Seconds exposed_comm;  // compute waiting on this rank's communication
  Seconds bubble;        // compute waiting on another stage (pipeline fill, imbalance)
  Seconds host_wait;     // compute waiting for the host to issue work (eager overhead)
};

struct RankResult {
  int rank = 0;
  int stage = 0;
  Seconds busy;  // compute busy time over the whole generation
  MemoryBreakdown memory;
};

struct SimResult {
  Seconds total;        // text encoding + DiT + VAE decode, slowest rank
  // With model CPU offload, text_encode and vae_decode include the weights' moves around
  // the loop (OffloadMoves).
  Seconds text_encode;
  Seconds dit;          // the denoising loop
  Seconds vae_decode;
  Seconds warmup;       // of `dit`, the synchronous warm-up steps (PipeFusion, DistriFusion)
  Seconds step;         // one steady step (the loop's period)
  StepBreakdown steady;  // per steady step, the slowest stage's rank
  std::vector<RankResult> ranks;  // every rank (SimOptions::every_rank), else a stage's first
  double imbalance = 0;  // max busy / mean busy - 1
  Bytes peak_memory;     // the largest rank's
  bool fits = true;
  int simulated_steps = 0;
  int tasks = 0;
};

// The most tasks one simulated run holds (about 100 bytes each): a run that needs more is
// refused with InvalidArgument naming --steps, before its memory is spent. A steady schedule
// is extrapolated after a few steps and never comes near it; one that never settles (a host
// drifting against the device) simulates every step: 10,000 steps of 8 PipeFusion stages x 64
// patches would be 15 million tasks.
inline constexpr size_t kMaxSimulatedTasks = 8'000'000;

// `scheduler`, when given, receives the simulated task graph (for traces); with
// extrapolation it holds the steps that were simulated.
StatusOr<SimResult> Simulate(const SimInput& input, const SimOptions& options = {}, TaskScheduler* scheduler = nullptr);

// The modelled device time of rank `rank`'s denoising loop per engine kernel
// (OpCost::kernel names; "other" for ops that name none): its forwards (PipeFusion: the
// warm-up forwards of the whole sequence, then one per patch) through its stage's blocks,
// with the embeddings and final layer on the first stage. Communication is not in it.
StatusOr<std::map<std::string, Seconds>> ModelledKernelTimes(const SimInput& input, int rank);
// The same loop's device time per op class (indexed by OpClass): what a profiler trace's
// kernel time by class is compared with.
StatusOr<std::array<Seconds, kNumOpClasses>> ModelledClassTimes(const SimInput& input, int rank);

// Writes `scheduler`'s schedule as a Chrome trace (Perfetto opens it): a process per rank,
// a thread per stream; representative ranks are replicated to the ranks they stand for.
// InvalidArgument, before anything is built, where that is more than kMaxTraceEvents events.
inline constexpr size_t kMaxTraceEvents = 4'000'000;
Status WriteChromeTrace(const TaskScheduler& scheduler, const SimInput& input, const std::string& path);

}  // namespace ditune

#endif  // DITUNE_SIMULATOR_SIMULATE_H_
