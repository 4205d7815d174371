// An 80% interval with every predicted latency, from the held-out residuals of comparable
// predictions, and the provenance of the figure (measured on this cluster, learned from
// published runs, or the catalog's peaks alone).
//
// A residual is ln(published / predicted) of a prediction whose constants never saw the
// row: leave-one-group-out on the training suite, and every row of a table the constants
// were not learned on. The interval of a class is its residuals' 10th to 90th percentile.
// Predictions without a compute scale for their (GPU, model) add the spread of the scales
// the published runs fitted: that is what not knowing the scale costs.
#ifndef DITUNE_CALIBRATION_INTERVALS_H_
#define DITUNE_CALIBRATION_INTERVALS_H_

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "costmodels/fit.h"

namespace ditune {

// Where a prediction's compute figure comes from.
enum class Provenance { kMeasured, kPublished, kCatalog };
std::string_view ProvenanceName(Provenance p);
// measured: a compute scale fitted from the store's own runs of (gpu, model); published: one
// learned from published runs (the factory calibration); catalog: neither.
Provenance ComputeProvenance(const std::vector<Fit>& fits, const std::string& gpu, const std::string& model);

// The runtimes are pooled in two classes: xDiT (the training suite's) and every other.
std::string RuntimeClass(std::string_view runtime);

struct IntervalBand {
  std::string runtime_class;  // "xdit", "other", or "all" (every residual)
  int n = 0;
  double lo = 0, hi = 0;      // 10th and 90th percentile of ln(published / predicted)
};

struct IntervalTable {
  std::vector<IntervalBand> bands;
  // Peak memory per GPU: ln(published / predicted) of the published peaks (runtime_class
  // "memory"); absent where none were learned.
  std::optional<IntervalBand> memory;
  // The 80th percentile of |ln(scale)| over the published (GPU, model) compute scales.
  double scale_spread = 0;
  int scales = 0;
  // How much wider a band must be, about its middle, to hold 80% of a publisher's values when
  // learned from the other publishers' residuals alone (leave-one-publisher-out over
  // `source_publishers` of them, their coverages averaged with each publisher counted once;
  // 1 where fewer than two). A user's cluster, runtime version and way of timing are a
  // source the residuals never saw: the bands are widened by this for every prediction.
  // `source_coverage_before`: that average coverage before widening.
  double source_widening = 1;
  int source_publishers = 0;
  double source_coverage_before = 0;
  std::vector<std::string> sources;  // the residual files it was learned from
};

// One held-out residual.
struct Residual {
  std::string runtime;
  double published_s = 0;
  double predicted_s = 0;
  std::string publisher;  // whose table the row is from (validate --json's "publisher"); may be empty
};

// One predicted peak per GPU against a published one (what the table states: allocated
// tensors, `torch.cuda.max_memory_allocated` as most print it).
struct MemoryResidual {
  double published_gb = 0;
  double predicted_gb = 0;
};

// A class needs this many residuals of its own; below it the pooled band serves.
inline constexpr int kMinIntervalResiduals = 10;

// The bands of `residuals` (each runtime class with enough of them, and "all"), and the
// spread of the compute scales among `fits` (e2e fits with a compute_scale).
// With `memory` (at least kMinIntervalResiduals of them), the memory band too.
IntervalTable LearnIntervals(const std::vector<Residual>& residuals, const std::vector<Fit>& fits,
                             std::vector<std::string> sources, const std::vector<MemoryResidual>& memory = {});

// The residuals of a `ditune validate --json` document: predict rows with a published and a
// predicted latency. InvalidArgument naming `origin` for anything else.
StatusOr<std::vector<Residual>> ResidualsFromValidateJson(const nlohmann::json& doc, std::string_view origin);

// The peaks of a `ditune validate --json` document: rows, of either role, with a published
// and a predicted peak memory (the memory model learns nothing from a suite's rows, so every
// one is a prediction). InvalidArgument naming `origin` where there are none.
StatusOr<std::vector<MemoryResidual>> MemoryResidualsFromValidateJson(const nlohmann::json& doc,
                                                                      std::string_view origin);

nlohmann::json IntervalTableJson(const IntervalTable& t);
StatusOr<IntervalTable> IntervalTableFromJson(const nlohmann::json& j, std::string_view origin);

// data/calibration/intervals.json of `data_dir`, read once per process; nullopt where the
// file is absent (predictions then carry no interval), an error where it is malformed.
StatusOr<std::optional<IntervalTable>> ShippedIntervals(const std::filesystem::path& data_dir);

struct PredictionInterval {
  double lo_s = 0, hi_s = 0;
  Provenance provenance = Provenance::kCatalog;
  std::string basis;  // "xdit runs held out (n=94)", "+ the spread of unknown compute scales", ...
  // Half the interval's width relative to the prediction, for "4.14 s ±12%".
  double half_width() const;
};

PredictionInterval IntervalFor(const IntervalTable& t, std::string_view runtime, Provenance provenance,
                               double predicted_s);

// The 80% interval of a predicted peak per GPU (GB), or nullopt where the table has no memory
// band.
struct MemoryInterval {
  double lo_gb = 0, hi_gb = 0;
  int n = 0;  // the published peaks it was learned from
};
std::optional<MemoryInterval> MemoryIntervalFor(const IntervalTable& t, double predicted_gb);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_INTERVALS_H_
