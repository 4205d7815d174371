#include "calibration/intervals.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibration/factory.h"
#include "calibration/predict.h"
#include "core/json_fields.h"
#include "core/stats.h"

namespace ditune {

std::string_view ProvenanceName(Provenance p) {
  switch (p) {
    case Provenance::kMeasured: return "measured";
    case Provenance::kPublished: return "published";
    case Provenance::kCatalog: return "catalog";
  }
  return "?";
}

Provenance ComputeProvenance(const std::vector<Fit>& fits, const std::string& gpu, const std::string& model) {
  const std::string key = E2eFitKey(gpu, model);
  for (const auto& f : fits) {
    if (!f.active || f.kind != kFitKindE2e || f.key != key) continue;
    if (!f.params.is_object() || !f.params.contains("compute_scale")) continue;
    return FactoryOrigin(f).empty() ? Provenance::kMeasured : Provenance::kPublished;
  }
  return Provenance::kCatalog;
}

std::string RuntimeClass(std::string_view runtime) { return runtime == "xdit" ? "xdit" : "other"; }

namespace {

// The band [lo, hi] of each runtime class from `values` by class (a class with fewer than
// kMinIntervalResiduals takes the "all" band), as LearnIntervals keeps them.
std::map<std::string, std::pair<double, double>> ClassBands(const std::map<std::string, std::vector<double>>& by_class) {
  std::map<std::string, std::pair<double, double>> out;
  auto all = by_class.find("all");
  if (all == by_class.end() || all->second.empty()) return out;
  const std::pair<double, double> pooled{Quantile(all->second, 0.1), Quantile(all->second, 0.9)};
  for (const auto& [cls, values] : by_class) {
    out[cls] = static_cast<int>(values.size()) >= kMinIntervalResiduals
                   ? std::pair<double, double>{Quantile(values, 0.1), Quantile(values, 0.9)}
                   : pooled;
  }
  return out;
}

// [lo, hi] widened by `w` about its middle.
std::pair<double, double> Widened(double lo, double hi, double w) {
  const double mid = (lo + hi) / 2, half = (hi - lo) / 2;
  return {mid - w * half, mid + w * half};
}

// Leave-one-publisher-out: each publisher's residuals judged by the bands of the others'.
// Sets the table's source widening to the least factor (steps of 0.01, up to 4) at which the
// publishers' coverages average 80%: each publisher counts once, as the source a prediction
// never saw is one publisher, however many rows the others' tables have (pooled by row, a
// large publisher's coverage decides and a few well-covered small tables pull the factor
// down).
void LearnSourceWidening(const std::vector<Residual>& residuals, IntervalTable* t) {
  std::map<std::string, std::vector<const Residual*>> by_publisher;
  for (const auto& r : residuals) {
    if (!r.publisher.empty() && r.published_s > 0 && r.predicted_s > 0) by_publisher[r.publisher].push_back(&r);
  }
  t->source_publishers = static_cast<int>(by_publisher.size());
  if (by_publisher.size() < 2) return;
  struct Judged {
    double x, lo, hi;
    size_t publisher;
  };
  std::vector<Judged> judged;
  size_t index = 0;
  for (const auto& [pub, mine] : by_publisher) {
    std::map<std::string, std::vector<double>> others;
    for (const auto& [other, rows] : by_publisher) {
      if (other == pub) continue;
      for (const Residual* r : rows) {
        const double e = std::log(r->published_s / r->predicted_s);
        others[RuntimeClass(r->runtime)].push_back(e);
        others["all"].push_back(e);
      }
    }
    const auto bands = ClassBands(others);
    for (const Residual* r : mine) {
      auto it = bands.find(RuntimeClass(r->runtime));
      const auto band = it != bands.end() ? it->second : bands.at("all");
      judged.push_back({std::log(r->published_s / r->predicted_s), band.first, band.second, index});
    }
    ++index;
  }
  auto coverage = [&](double w) {
    std::vector<int> inside(by_publisher.size(), 0), count(by_publisher.size(), 0);
    for (const auto& j : judged) {
      const auto [lo, hi] = Widened(j.lo, j.hi, w);
      inside[j.publisher] += j.x >= lo && j.x <= hi;
      ++count[j.publisher];
    }
    double sum = 0;
    for (size_t i = 0; i < inside.size(); ++i) sum += static_cast<double>(inside[i]) / std::max(1, count[i]);
    return sum / static_cast<double>(inside.size());
  };
  t->source_coverage_before = coverage(1);
  int step = 100;
  while (step < 400 && coverage(step / 100.0) < 0.8) ++step;
  t->source_widening = step / 100.0;
}

}  // namespace

IntervalTable LearnIntervals(const std::vector<Residual>& residuals, const std::vector<Fit>& fits,
                             std::vector<std::string> sources, const std::vector<MemoryResidual>& memory) {
  IntervalTable t;
  std::vector<double> peaks;
  for (const auto& m : memory) {
    if (m.published_gb > 0 && m.predicted_gb > 0) peaks.push_back(std::log(m.published_gb / m.predicted_gb));
  }
  if (static_cast<int>(peaks.size()) >= kMinIntervalResiduals) {
    t.memory = IntervalBand{"memory", static_cast<int>(peaks.size()), Quantile(peaks, 0.1), Quantile(peaks, 0.9)};
  }
  t.sources = std::move(sources);
  std::map<std::string, std::vector<double>> by_class;
  for (const auto& r : residuals) {
    if (!(r.published_s > 0) || !(r.predicted_s > 0)) continue;
    const double e = std::log(r.published_s / r.predicted_s);
    by_class[RuntimeClass(r.runtime)].push_back(e);
    by_class["all"].push_back(e);
  }
  for (const auto& [cls, values] : by_class) {
    if (static_cast<int>(values.size()) < kMinIntervalResiduals && cls != "all") continue;
    if (values.empty()) continue;
    t.bands.push_back({cls, static_cast<int>(values.size()), Quantile(values, 0.1), Quantile(values, 0.9)});
  }
  std::vector<double> spread;
  for (const auto& f : fits) {
    if (!f.active || f.kind != kFitKindE2e || !f.params.is_object() || !f.params.contains("compute_scale") ||
        !f.params["compute_scale"].is_number()) {
      continue;
    }
    const double k = f.params["compute_scale"].get<double>();
    if (k > 0) spread.push_back(std::abs(std::log(k)));
  }
  t.scales = static_cast<int>(spread.size());
  t.scale_spread = spread.empty() ? 0 : Quantile(spread, 0.8);
  LearnSourceWidening(residuals, &t);
  return t;
}

namespace {

// The rows of a `ditune validate --json` document, each an object; InvalidArgument naming
// `origin` otherwise.
StatusOr<const nlohmann::json*> ValidateRows(const nlohmann::json& doc, std::string_view origin) {
  if (!doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array()) {
    return Status::InvalidArgument(
        fmt::format("{}: not a `ditune validate --json` document (an object with a \"rows\" array)", origin));
  }
  for (const auto& row : doc["rows"]) {
    if (!row.is_object()) return Status::InvalidArgument(fmt::format("{}: a row is not an object", origin));
  }
  return &doc["rows"];
}

// Both numbers of a row, where both are there.
bool Pair(const nlohmann::json& row, const char* published, const char* predicted) {
  return row.contains(published) && row[published].is_number() && row.contains(predicted) &&
         row[predicted].is_number();
}

}  // namespace

StatusOr<std::vector<Residual>> ResidualsFromValidateJson(const nlohmann::json& doc, std::string_view origin) {
  DITUNE_ASSIGN_OR_RETURN(const nlohmann::json* rows, ValidateRows(doc, origin));
  std::vector<Residual> out;
  for (const auto& row : *rows) {
    if (row.value("role", "predict") != "predict" || !Pair(row, "published_s", "predicted_s")) continue;
    Residual r;
    r.runtime = row.contains("runtime") && row["runtime"].is_string() ? row["runtime"].get<std::string>() : "xdit";
    if (row.contains("publisher") && row["publisher"].is_string()) r.publisher = row["publisher"].get<std::string>();
    r.published_s = row["published_s"].get<double>();
    r.predicted_s = row["predicted_s"].get<double>();
    if (r.published_s > 0 && r.predicted_s > 0) out.push_back(r);
  }
  if (out.empty()) {
    return Status::InvalidArgument(fmt::format("{}: no predict row with a published and a predicted latency", origin));
  }
  return out;
}

StatusOr<std::vector<MemoryResidual>> MemoryResidualsFromValidateJson(const nlohmann::json& doc,
                                                                      std::string_view origin) {
  DITUNE_ASSIGN_OR_RETURN(const nlohmann::json* rows, ValidateRows(doc, origin));
  std::vector<MemoryResidual> out;
  for (const auto& row : *rows) {
    if (!Pair(row, "published_memory_gb", "predicted_memory_gb")) continue;
    MemoryResidual m{row["published_memory_gb"].get<double>(), row["predicted_memory_gb"].get<double>()};
    if (m.published_gb > 0 && m.predicted_gb > 0) out.push_back(m);
  }
  if (out.empty()) {
    return Status::InvalidArgument(fmt::format("{}: no row with a published and a predicted peak memory", origin));
  }
  return out;
}

nlohmann::json IntervalTableJson(const IntervalTable& t) {
  nlohmann::json bands = nlohmann::json::array();
  for (const auto& b : t.bands) {
    bands.push_back({{"runtime_class", b.runtime_class}, {"n", b.n}, {"lo", b.lo}, {"hi", b.hi}});
  }
  nlohmann::json out = {{"about",
           "80% intervals: the 10th and 90th percentiles of ln(published / predicted) over held-out predictions, by "
           "runtime class; scale_spread, the 80th percentile of |ln(compute scale)| over the published (GPU, model) "
           "scales, widens predictions that have no scale; source_widening, the factor by which a band widens about "
           "its middle to hold 80% of each publisher's values when learned from the other publishers alone. Written "
           "by `ditune calibrate intervals`."},
          {"bands", bands},
          {"scale_spread", t.scale_spread},
          {"scales", t.scales},
          {"source_widening",
           {{"factor", t.source_widening},
            {"publishers", t.source_publishers},
            {"coverage_before", t.source_coverage_before}}},
          {"sources", t.sources}};
  if (t.memory) out["memory"] = {{"n", t.memory->n}, {"lo", t.memory->lo}, {"hi", t.memory->hi}};
  return out;
}

StatusOr<IntervalTable> IntervalTableFromJson(const nlohmann::json& j, std::string_view origin) {
  JsonFields f(j, std::string(origin));
  (void)f.String("about");
  IntervalTable t;
  t.scale_spread = f.Number("scale_spread", 0, 5);
  t.scales = static_cast<int>(f.Int("scales", 0, 1000000));
  t.sources = f.StringArray("sources");
  const nlohmann::json* bands = f.Array("bands");
  if (f.Has("source_widening")) {
    if (const nlohmann::json* w = f.Object("source_widening")) {
      JsonFields wf(*w, fmt::format("{}: source_widening", origin));
      t.source_widening = wf.Number("factor", 1, 4);
      t.source_publishers = static_cast<int>(wf.Int("publishers", 0, 1000000));
      t.source_coverage_before = wf.Number("coverage_before", 0, 1);
      wf.RejectUnknownKeys();
      if (!wf.status().ok()) return wf.status();
    }
  }
  if (f.Has("memory")) {
    if (const nlohmann::json* m = f.Object("memory")) {
      JsonFields mf(*m, fmt::format("{}: memory", origin));
      IntervalBand band{"memory", static_cast<int>(mf.Int("n", 1, 1000000)), mf.Number("lo", -5, 5), mf.Number("hi", -5, 5)};
      mf.RejectUnknownKeys();
      if (!mf.status().ok()) return mf.status();
      if (band.lo > band.hi) return Status::InvalidArgument(fmt::format("{}: memory's lo is above its hi", origin));
      t.memory = band;
    }
  }
  f.RejectUnknownKeys();
  if (!f.status().ok()) return f.status();
  for (const auto& b : *bands) {
    JsonFields bf(b, fmt::format("{}: bands", origin));
    IntervalBand band;
    band.runtime_class = bf.Enum("runtime_class", {"xdit", "other", "all"});
    band.n = static_cast<int>(bf.Int("n", 1, 1000000));
    band.lo = bf.Number("lo", -5, 5);
    band.hi = bf.Number("hi", -5, 5);
    bf.RejectUnknownKeys();
    if (!bf.status().ok()) return bf.status();
    if (band.lo > band.hi) return Status::InvalidArgument(fmt::format("{}: a band's lo is above its hi", origin));
    t.bands.push_back(band);
  }
  if (std::none_of(t.bands.begin(), t.bands.end(), [](const IntervalBand& b) { return b.runtime_class == "all"; })) {
    return Status::InvalidArgument(fmt::format("{}: no \"all\" band", origin));
  }
  return t;
}

StatusOr<std::optional<IntervalTable>> ShippedIntervals(const std::filesystem::path& data_dir) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const StatusOr<std::optional<IntervalTable>>>> cache;
  const std::string key = data_dir.string();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const std::filesystem::path path = data_dir / "calibration" / "intervals.json";
    std::error_code ec;
    StatusOr<std::optional<IntervalTable>> loaded = std::optional<IntervalTable>();
    if (std::filesystem::exists(path, ec)) {
      auto j = ReadJsonFile(path.string());
      if (!j.ok()) {
        loaded = j.status();
      } else {
        auto t = IntervalTableFromJson(*j, path.string());
        loaded = t.ok() ? StatusOr<std::optional<IntervalTable>>(std::optional<IntervalTable>(*t))
                        : StatusOr<std::optional<IntervalTable>>(t.status());
      }
    }
    it = cache.emplace(key, std::make_shared<const StatusOr<std::optional<IntervalTable>>>(std::move(loaded))).first;
  }
  return *it->second;
}

double PredictionInterval::half_width() const {
  const double mid = std::sqrt(lo_s * hi_s);
  return mid > 0 ? (hi_s - lo_s) / (2 * mid) : 0;
}

PredictionInterval IntervalFor(const IntervalTable& t, std::string_view runtime, Provenance provenance,
                               double predicted_s) {
  const std::string cls = RuntimeClass(runtime);
  const IntervalBand* band = nullptr;
  const IntervalBand* all = nullptr;
  for (const auto& b : t.bands) {
    if (b.runtime_class == cls) band = &b;
    if (b.runtime_class == "all") all = &b;
  }
  PredictionInterval out;
  out.provenance = provenance;
  const IntervalBand* use = band != nullptr ? band : all;
  if (use == nullptr) {
    out.lo_s = out.hi_s = predicted_s;
    out.basis = "no held-out residuals";
    return out;
  }
  auto [lo, hi] = Widened(use->lo, use->hi, t.source_widening);
  out.basis = band != nullptr ? fmt::format("held-out {} predictions (n={})", cls, use->n)
                              : fmt::format("held-out predictions of every runtime (n={}; too few of {} alone)", use->n,
                                            cls);
  if (t.source_widening > 1) {
    out.basis += fmt::format(", widened x{:.2f} for a source they never saw (80% of {} publishers' values on "
                             "average, each judged by the others' bands)",
                             t.source_widening, t.source_publishers);
  }
  if (provenance == Provenance::kCatalog && t.scale_spread > 0) {
    // No compute scale for this (GPU, model): the published scales' spread is what that costs.
    lo -= t.scale_spread;
    hi += t.scale_spread;
    out.basis += fmt::format(", widened by the spread of {} published compute scales (no scale for this GPU and model)",
                             t.scales);
  }
  out.lo_s = predicted_s * std::exp(lo);
  out.hi_s = predicted_s * std::exp(hi);
  return out;
}

std::optional<MemoryInterval> MemoryIntervalFor(const IntervalTable& t, double predicted_gb) {
  if (!t.memory || !(predicted_gb > 0)) return std::nullopt;
  return MemoryInterval{predicted_gb * std::exp(t.memory->lo), predicted_gb * std::exp(t.memory->hi), t.memory->n};
}

}  // namespace ditune
