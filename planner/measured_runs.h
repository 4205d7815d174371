// The user's own xDiT runs (ingested logs and timings) as calibration: what they set, and
// what is not trusted.
//
// Every stored xDiT run moves the next prediction:
// - a one-GPU run sets the compute scale of its (GPU, model), as a suite's calibrate row does
//   (it replaces the factory scale);
// - multi-GPU runs refine the global constants for their GPU: a short search from the
//   constants in force (LearnMechanisms) over that GPU's runs, kept as the mechanisms fit
//   "xdit@<gpu>", which then prices that GPU's plans instead of the global one;
// - a run whose log printed its peak memory sets the memory model's runtime overhead of its
//   (GPU, model) (FitRuntimeOverhead);
// - a profiler trace's host time per kernel launch (op "launch", backend "xdit") is that GPU's
//   eager per-op host time (Mechanisms::eager_op_us, held fixed while the runs refine the
//   others); outside its bounds the launches waited on the device and the trace is left out.
// A run measured more than kQuarantineRatio times slower or faster than predicted is
// quarantined: stored, listed with the reason, and used by nothing (a run without warm-up, a
// shared or throttled GPU, a log of another configuration).
#ifndef DITUNE_PLANNER_MEASURED_RUNS_H_
#define DITUNE_PLANNER_MEASURED_RUNS_H_

#include <optional>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/workload.h"
#include "costmodels/measurement.h"
#include "costmodels/store.h"
#include "planner/suite.h"

namespace ditune {

inline constexpr double kQuarantineRatio = 3.0;
// The fit kind of a (GPU, model)'s measured memory overhead: params {"runtime_overhead_gb"}.
inline constexpr const char* kFitKindMemory = "memory";

// One stored xDiT run as a suite row (group "<gpu>/<model>/<h>x<w>[x<frames>]/<steps>"), or
// the reason it cannot be one.
struct MeasuredRun {
  const Measurement* measurement = nullptr;
  std::optional<SuiteRow> row;
  std::string skipped;  // why not, when row is empty
};
std::vector<MeasuredRun> MeasuredXditRuns(const std::vector<Measurement>& measurements, const Catalog& catalog);

// The fits the stored xDiT runs make, over `fits` (the store's others, the mechanisms and
// factory scales among them): scales of one-GPU runs, mechanisms per GPU with multi-GPU runs,
// memory overheads. `skipped` receives a line per run left out, with the reason.
StatusOr<std::vector<Fit>> FitMeasuredRuns(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                           const std::vector<Fit>& fits, std::vector<std::string>* skipped = nullptr);

// The memory fit of (gpu, model), when the store's runs printed their peak.
std::optional<Bytes> MeasuredRuntimeOverhead(const std::vector<Fit>& fits, const std::string& gpu,
                                             const std::string& model);

// Explanation lines for the configurations of `configs` (ToString) the store's runs measured
// for `workload` on `cluster`: "measured: ulysses=4 ran in 4.24 s (measurement 12); predicted 4.95 s".
std::vector<std::string> MeasuredLines(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                       const Workload& workload, const Cluster& cluster,
                                       const std::vector<std::pair<std::string, double>>& configs);

}  // namespace ditune

#endif  // DITUNE_PLANNER_MEASURED_RUNS_H_
