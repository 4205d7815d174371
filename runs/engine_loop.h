// The closed loop on ditune's engine, one library call per step: predict a run as the engine
// runs it; record a measured run (the run, its DiT measurement and a profiled run's kernels,
// in one transaction); autotune (price every configuration for the launched ranks, run the
// best K, record them together, refit every model from the store, price them again).
// `ditune run` and `ditune autotune` call these and only parse and print.
#ifndef DITUNE_RUNS_ENGINE_LOOP_H_
#define DITUNE_RUNS_ENGINE_LOOP_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/units.h"
#include "core/workload.h"
#include "store/store.h"
#include "executor/comm.h"
#include "executor/engine_run.h"

namespace ditune::calibration {

struct EnginePrediction {
  std::string priced_as;   // the kernels' prices used (planner EnginePricedAs)
  double dit_s = 0;        // the whole plan's DiT loop on the cluster
  double busy_s = 0;       // rank `rank`'s own compute in it
  // With kernel prices asked for: each kernel of rank `rank`'s loop at its fitted (or
  // default) curve, without the engine scale (what `run --profile` sets beside the measured).
  std::map<std::string, Seconds> kernels;
};

// The prediction of `config` on `cluster` run by the engine's `backend` kernels (cpu, cuda,
// ref). InvalidArgument, naming the command that fixes it, when the ref kernels on the host
// are priced without their own sweep.
StatusOr<EnginePrediction> PredictEngineRun(const ModelSpec& model, const Workload& workload,
                                            const ParallelConfig& config, const Cluster& cluster,
                                            const std::vector<Fit>& fits, const std::string& backend, int rank,
                                            bool kernel_prices);

// What a measured run leaves: `whole` runs (every rank ran, none emulated) are recorded as a
// run with its DiT measurement on `gpu_id` and `backend`; a profiled run's kernels (in `r`'s
// profile events) join the kernel measurements, emulated ranks' too. One transaction.
struct RecordedRun {
  std::string run_id;  // empty when the run was not whole
  size_t kernel_measurements = 0;
};
StatusOr<RecordedRun> RecordEngineRun(Store* store, const ModelSpec& model, const Workload& workload,
                                      const ParallelConfig& config, const std::string& backend,
                                      const std::string& gpu_id, const std::string& comm, double predicted_s,
                                      const exec::EngineRunResult& r, bool whole, int rank);

struct AutotuneOptions {
  std::string backend = "cpu";  // the engine's kernels on every rank
  int candidates = 3;           // the best-priced configurations to run
  int iters = 3;                // timed iterations per run
  exec::Comm* world = nullptr;  // the launched ranks (every rank calls Autotune)
  // Called on rank 0 before each run: (index from 1, of, configuration).
  std::function<void(int, int, const ParallelConfig&)> progress;
};

struct AutotuneRow {
  ParallelConfig config;
  double before_s = 0, measured_s = 0, after_s = 0;  // priced before the runs, measured, priced after
  std::string skipped;                               // why it did not run (every rank refused alike)
};

struct AutotuneResult {
  size_t priced = 0;              // configurations priced
  std::vector<AutotuneRow> rows;  // the K run (or refused), best-priced first
  std::string scale_key;          // the engine scale these runs calibrate (EngineFitKey)
  double scale = 0;               // its value after the refit; 0 when none was fitted
  std::string unfitted;           // then why not
};

// Every rank calls it with the same arguments (the runs are collective); rank 0 records and
// refits, the others return after the runs with the measured times. Errors a rank cannot
// share with its peers (a failed transfer) come back as they are: the caller ends the job.
StatusOr<AutotuneResult> AutotuneEngine(const Catalog& catalog, Store* store, const ModelSpec& model,
                                        const Workload& workload, const Cluster& cluster,
                                        const AutotuneOptions& options);

}  // namespace ditune::calibration

#endif  // DITUNE_RUNS_ENGINE_LOOP_H_
