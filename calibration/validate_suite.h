// `ditune validate`: calibrate on each group's calibrate row, predict its predict rows, and
// measure the error.
#ifndef DITUNE_CALIBRATION_VALIDATE_SUITE_H_
#define DITUNE_CALIBRATION_VALIDATE_SUITE_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "store/store.h"
#include "calibration/suite.h"
#include "simulator/simulate.h"

namespace ditune {

struct SuiteRowResult {
  const SuiteRow* row = nullptr;
  std::string config;               // the configuration predicted (the planner's for "best")
  std::optional<double> predicted_s;  // empty when it does not fit
  std::optional<double> ape;        // |predicted - published| / published, predict rows with a latency
  bool feasible = true;
  std::string refused;              // why it was not predicted; empty when it was
  // The predicted peak per GPU (the largest rank's tensors at its largest phase, what
  // torch.cuda.max_memory_allocated reports), its phase, and against a published peak
  // (memory_gb) the error.
  std::optional<double> predicted_memory_gb;
  std::string memory_phase;
  std::optional<double> memory_ape;
};

// A set whose configuration ditune predicts fastest measured more than kChoiceWithin of the
// fastest: what ditune picked and what it should have.
struct ChoiceMiss {
  std::string group;
  int gpus = 0;
  std::string chosen, fastest;             // configurations
  double chosen_published_s = 0, chosen_predicted_s = 0;
  double fastest_published_s = 0, fastest_predicted_s = 0;
};

struct SuiteSummary {
  int rows = 0;            // predict rows
  double median_ape = 0;
  double p90_ape = 0;
  int oom_agree = 0;       // published OOM rows predicted not to fit
  int oom_rows = 0;        // published OOM rows
  int false_oom = 0;       // rows that ran but are predicted not to fit
  // Sets of predict rows of one group and GPU count with several published configurations:
  // how many where the configuration ditune predicts fastest is the published fastest or
  // within 10% of it.
  int choice_sets = 0;
  int choice_pass = 0;
  std::vector<ChoiceMiss> choice_misses;  // the sets that did not pass, by group and GPU count
  int refused = 0;  // rows not predicted (SuiteRowResult::refused says why)
  // Rows (calibrate and predict: a peak is never calibrated) with a published peak per GPU,
  // and the error of the predicted peaks.
  int memory_rows = 0;
  double memory_median_ape = 0;
  double memory_p90_ape = 0;
};

// One row as scored: what was published against what was predicted.
struct ScoredRow {
  std::string group;
  std::string publisher;  // PublisherOf the row
  std::string runtime;    // who ran it
  std::string origin;     // the suite file
  int line = 0;
  int gpus = 0;
  std::string config;
  std::optional<double> published_s;  // empty for a published OOM
  std::optional<double> predicted_s;  // empty when predicted not to fit
  std::optional<double> ape;          // predict rows with a latency; 1 when predicted not to fit
  bool predict = true;                // a predict row (calibrate rows are listed, not scored)
  bool best = false;                  // the planner chose the configuration ("best")
  bool compiled = false;              // compile=1: chosen among its runtime's compiled runs
  std::optional<double> memory_ape;   // against a published peak per GPU
};

// The seconds of `r` that a row of `scope` publishes: the whole generation, the denoising
// loop, or one steady step.
double ScopeSeconds(const SimResult& r, SuiteScope scope);

// A choice is right where the configuration ditune predicts fastest measured within this
// factor of the measured fastest.
inline constexpr double kChoiceWithin = 1.10;

// The summary of scored rows: median and p90 APE over predict rows, OOM agreement, and
// choice per (group, GPU count, compiled or not) with two or more published configurations
// (a chart's torch.compile bars are a second set beside its eager ones).
SuiteSummary Summarize(const std::vector<ScoredRow>& rows);
// {"rows", "median_ape", "p90_ape", "oom_agree", "oom_rows", "false_oom", "choice_sets", "choice_pass", ...},
// and "choice_misses" (group, gpus, chosen, fastest and their seconds) where a set did not pass.
nlohmann::json SuiteSummaryJson(const SuiteSummary& s);
ScoredRow Scored(const SuiteRowResult& r);

struct SuiteReport {
  std::vector<SuiteRowResult> rows;
  SuiteSummary summary;
};

// The suite's predictions with `base` fits (their e2e fits aside, which it recalibrates):
// each calibrate row fits the framework's compute scale of its (GPU, model), measured /
// modelled (the median where several rows share one); every row is then predicted with the
// scales, the catalogs and `base`. Nothing is stored; `scales`, when given, receives the
// scale fits (no measurement ids).
// With `keep_base_scales`, a (GPU, model) no calibrate row covers keeps the base's scale.
StatusOr<SuiteReport> PredictSuite(const std::vector<SuiteRow>& rows, const Catalog& catalog,
                                   const std::vector<Fit>& base, std::vector<Fit>* scales = nullptr,
                                   bool keep_base_scales = false);

// One row's predicted latency (its scope's metric) with `fits` as they are; nullopt when it
// is predicted not to fit. An invalid configuration is an error naming the row.
StatusOr<std::optional<double>> PredictRowLatency(const SuiteRow& row, const Catalog& catalog,
                                                  const std::vector<Fit>& fits);

// Refines each compute scale in `scales` (fits of kind e2e keyed "<gpu>/<model>") by the
// median ratio of measured to predicted that its calibrate rows in `rows` still show, over
// `passes` passes: a latency is not proportional to the compute scale where host time and
// work the scale does not touch are part of it, so one ratio leaves the row off. `base` are
// the other fits. Rows predicted not to fit are left out; other rows are ignored.
Status RefineComputeScales(const std::vector<const SuiteRow*>& rows, const Catalog& catalog,
                           const std::vector<Fit>& base, std::vector<Fit>* scales, int passes = 2);

// PredictSuite over the store's active fits. Every calibrate row becomes an e2e measurement (stored in `store` when given) and fits the
// framework's compute scale for its (GPU, model): measured / modelled. Predict rows then use
// the scale of their (GPU, model), the catalogs and the store's other fits — never a predict
// row's latency. A predict row with no calibrate row for its (GPU, model) uses its group's.
StatusOr<SuiteReport> ValidateSuite(const std::vector<SuiteRow>& rows, const Catalog& catalog, Store* store);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_VALIDATE_SUITE_H_
