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
//   eager per-op host time (Mechanisms::eager_op_us, which runs never refine: without a
//   trace it stays as it is); outside its bounds the launches waited on the device and the
//   trace is left out;
// - a profiler trace's GPU kernel time by class (op "profile", backend "xdit", ingested with
//   its workload and configuration) sets that GPU's efficiency per op class: the class's
//   measured kernel seconds per denoising step over the compute model's device seconds per
//   step for the same workload, configuration and rank (simulator ModelledClassTimes, at
//   compute scale 1 and without earlier class scales). Trace "gemm" kernels stand for the
//   gemm and linear-attention classes, "attention" for attention, "other" for elementwise;
//   NCCL kernels are the collectives' business. A class further than [kMinClassScale,
//   kMaxClassScale] from its model is quarantined with the reason; a trace without a time per
//   step (no ProfilerStep windows, or no --steps) gives only the classes' proportions, so its
//   scales are relative. Fit kFitKindKernelClass keyed "<gpu>" (the median over that GPU's traces).
//   How they apply with the (GPU, model) compute scale: ModelsFor (predict.h).
// A run far outside its prediction's 80% interval (CheckAgainstPrediction) is quarantined:
// stored, listed with its likely cause (LikelyCause), and used by nothing until accepted
// (`ditune calibrate accept ID`, Store::AcceptMeasurement). A multi-GPU run refines its
// GPU's constants only once another run on that GPU agrees (its deviation from the
// prediction within the interval's width of the other's), or once accepted.
#ifndef DITUNE_CALIBRATION_MEASURED_RUNS_H_
#define DITUNE_CALIBRATION_MEASURED_RUNS_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/workload.h"
#include "costmodels/dit_ops.h"
#include "costmodels/measurement.h"
#include "store/store.h"
#include "calibration/intervals.h"
#include "calibration/kernel_classes.h"
#include "calibration/suite.h"

namespace ditune {

// Always quarantined beyond this ratio, whatever the interval.
inline constexpr double kQuarantineRatio = 3.0;

// A measured run against its prediction: inside the 80% interval, outside it, or far
// outside (beyond the interval stretched twice in log terms on its side, or
// kQuarantineRatio apart). `bands` null: only the ratio applies. `lo`, `hi`: the interval's
// edges as ln(bound / predicted); `why` says which limit a quarantined run passed.
struct QuarantineCheck {
  enum Verdict { kInside, kOutside, kQuarantined } verdict = kInside;
  double lo = 0, hi = 0;
  std::string why;
};
QuarantineCheck CheckAgainstPrediction(const SuiteRow& row, double measured_s, double predicted_s,
                                       const IntervalTable* bands);

// What most likely made a run differ from its prediction: the text encoding and VAE decode
// left out of (or counted in) the timing, where the other scope's prediction explains the
// run; else a slower run's usual causes (no warm-up, a shared or throttled GPU, a
// regression) or a faster one's (another configuration or step count).
StatusOr<std::string> LikelyCause(const SuiteRow& row, double measured_s, double predicted_s, const Catalog& catalog,
                                  const std::vector<Fit>& fits);
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
// factory scales among them): class efficiencies of profiler traces, scales of one-GPU runs
// (measured / modelled with the new class efficiencies normalised, as they will apply beside
// the scale), mechanisms per GPU with multi-GPU runs, memory overheads. `skipped` receives a
// line per run or trace left out, with the reason.
StatusOr<std::vector<Fit>> FitMeasuredRuns(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                           const std::vector<Fit>& fits, std::vector<std::string>* skipped = nullptr);

// Checks the configuration of an xDiT run's parameters (an e2e measurement's params: "model",
// "config", and "height", "width", "frames", "steps", "batch", "gpus" where given) against its
// workload as xDiT's entry point checks it: a configuration a log announces gets the checks
// --config gets. InvalidArgument naming the rule; Ok for a valid one.
Status CheckXditRunConfig(const nlohmann::json& params, const Catalog& catalog);

// The memory fit of (gpu, model), when the store's runs printed their peak.
std::optional<Bytes> MeasuredRuntimeOverhead(const std::vector<Fit>& fits, const std::string& gpu,
                                             const std::string& model);

// Explanation lines for the configurations of `configs` (ToString) the store's runs measured
// for `workload` on `cluster`: "measured: ulysses=4 ran in 4.24 s (measurement 12); predicted 4.95 s".
std::vector<std::string> MeasuredLines(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                       const Workload& workload, const Cluster& cluster,
                                       const std::vector<std::pair<std::string, double>>& configs);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_MEASURED_RUNS_H_
