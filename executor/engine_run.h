// Measured runs of the DiT engine (the cuda kernels on a GPU, or the ref kernels on the
// host): the whole model on one device; exactly one rank's share of a multi-device plan with
// its transfers left out (--emulate-rank); or every rank of the plan, one process each,
// exchanging for real over a world communicator. Warm-up iterations first, then timed ones
// with device events, the ranks aligned by a barrier before each; an iteration's latency is
// its slowest rank's; median, p10 and p90 over the iterations.
#ifndef DITUNE_EXECUTOR_ENGINE_RUN_H_
#define DITUNE_EXECUTOR_ENGINE_RUN_H_

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/workload.h"
#include "executor/engine.h"
#include "executor/profiling_kernels.h"

namespace ditune::exec {

struct EngineRunOptions {
  std::string kernels = "cuda";  // "cuda" or "ref"
  int rank = 0;                  // the rank of `config` to run (0 for one device; the world's rank with one)
  Comm* world = nullptr;         // every rank at once: a world of the plan's size (MPI or NCCL)
  int warmup = 1;
  int iters = 3;
  // After the timed iterations, one more with every kernel timed on the device
  // (ProfilingKernels): the result's `profile`.
  bool profile = false;
  EngineOptions engine;
};

struct EngineRunResult {
  std::string device_name;     // the device's own name (e.g. "NVIDIA H100 80GB HBM3")
  EngineWork work;
  double median_s = 0, p10_s = 0, p90_s = 0;  // the denoising loop, device time
  double step_median_s = 0;    // median step of the timed iterations (this rank)
  std::vector<double> rank_median_s;  // across ranks: every rank's own median loop
  double spread = 0;           // across ranks: slowest / fastest rank median - 1
  double comm_median_s = 0;    // across ranks: this rank's host time in transfers, median
  int iters = 0;
  int64_t weight_bytes = 0;
  int64_t peak_bytes = 0;
  std::vector<Mat> latents;    // exact runs: the last iteration's output
  // With options.profile: this rank's device time per kernel over one denoising loop, and
  // that loop's own time (events around every kernel make it a little slower).
  std::vector<KernelProfileRow> profile;
  std::vector<KernelEvent> profile_events;  // every kernel of that loop on the device's timeline
  double profile_loop_s = 0;
};

// Refuses, before allocating, a rank whose weights and activations exceed the device's
// memory (InvalidArgument naming both sizes).
StatusOr<EngineRunResult> MeasureEngineRun(const ModelSpec& model, const Workload& workload,
                                           const ParallelConfig& config, const EngineRunOptions& options);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_ENGINE_RUN_H_
