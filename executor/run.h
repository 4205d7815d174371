// Measured runs of the executor, by DESIGN.md's rules: warm-up iterations, a barrier before
// each timed one, every rank's times, the slowest rank as the job's latency, the spread.
#ifndef DITUNE_EXECUTOR_RUN_H_
#define DITUNE_EXECUTOR_RUN_H_

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/workload.h"
#include "executor/comm.h"
#include "executor/parallel.h"

namespace ditune::exec {

struct RunOptions {
  int warmup = 1;  // untimed iterations first
  int iters = 3;   // timed iterations
  uint64_t seed = 42;
};

struct RankTimes {
  int rank = 0;
  double dit_median_s = 0;  // this rank's denoising loop, median over iterations
  double step_median_s = 0;
  double gemm_s = 0, attention_s = 0, elementwise_s = 0, comm_s = 0;  // medians per iteration
};

struct RunMeasurement {
  double latency_median_s = 0;  // the slowest rank's denoising loop, median over iterations
  double latency_p10_s = 0, latency_p90_s = 0;
  double step_median_s = 0;     // the slowest rank's median step
  double imbalance = 0;         // max / mean - 1 of the ranks' compute time
  int iters = 0;
  std::vector<RankTimes> ranks;  // every rank (the same on every rank after the gather)
  std::vector<Mat> latents;      // the last iteration's output
};

// Runs `config` on `world` (collective). Refuses, before allocating, a configuration whose
// weights and activations would not fit in this host's available memory.
StatusOr<RunMeasurement> MeasureRun(const ModelSpec& model, const Workload& workload, const ParallelConfig& config,
                                    Comm* world, const RunOptions& options);

// The bytes one rank needs (fp32 weights, activations and buffers) and the bytes the host
// has available (MemAvailable) per rank on it; ResourceExhausted-like InvalidArgument when
// the former exceeds the latter, naming both.
Status CheckHostMemory(const ModelSpec& model, const Workload& workload, const ParallelConfig& config, int ranks_on_host);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_RUN_H_
