#include "calibration/factory.h"

#include <cstdlib>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodels/calibration.h"
#include "calibration/measured_runs.h"
#include "calibration/predict.h"

namespace ditune {
namespace {

nlohmann::json SummaryJson(const SuiteSummary& s, double loss) {
  nlohmann::json j = SuiteSummaryJson(s);
  j["loss"] = loss;
  return j;
}

}  // namespace

nlohmann::json FactoryCalibrationJson(const LearnResult& learned, const std::string& suite,
                                      const std::vector<SuiteRow>& rows) {
  nlohmann::json scales = nlohmann::json::array();
  for (const auto& f : learned.scales) {
    nlohmann::json from = nlohmann::json::array();
    for (const auto& r : rows) {
      if (r.role == SuiteRole::kCalibrate && E2eFitKey(r.cluster.gpu_id, r.workload.model_id) == f.key) {
        from.push_back(fmt::format("{} {} ({})", r.group, RowPlace(r), r.source));
      }
    }
    scales.push_back({{"key", f.key}, {"compute_scale", f.params["compute_scale"]}, {"rows", from}});
  }
  std::map<std::string, int> groups;
  for (const auto& r : rows) groups[r.group]++;
  std::string flags;
  for (size_t a = 0, b; a <= suite.size(); a = b + 3) {
    b = suite.find(" + ", a);
    if (b == std::string::npos) b = suite.size();
    flags += " --suite " + suite.substr(a, b - a);
  }
  return {{"about", "learned by `ditune calibrate learn" + flags +
                        "`: global mechanism constants fitted on every row of the suites, and the compute scale "
                        "of each (GPU, model) from its published single-GPU runs"},
          {"suite", suite},
          {"rows", rows.size()},
          {"groups", groups.size()},
          {"evaluations", learned.evaluations},
          {"min_gain", learned.min_gain},
          {"defaults", MechanismsToJson(learned.start)},
          {"mechanisms", MechanismsToJson(learned.mechanisms)},
          {"before", SummaryJson(learned.before, learned.loss_before)},
          {"after", SummaryJson(learned.after, learned.loss_after)},
          {"scales", scales}};
}

StatusOr<std::vector<Fit>> FactoryFits(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("mechanisms") || !doc.contains("scales") || !doc["scales"].is_array()) {
    return Status::InvalidArgument("factory calibration: expected an object with 'mechanisms' and 'scales' (an array)");
  }
  DITUNE_ASSIGN_OR_RETURN(Mechanisms m, MechanismsFromJson(doc["mechanisms"]));
  std::vector<Fit> fits = {MechanismsFit(m)};
  fits.back().params["origin"] = fmt::format("learned from {}", doc.value("suite", "the published record"));
  for (const auto& s : doc["scales"]) {
    if (!s.is_object() || !s.contains("key") || !s["key"].is_string() || !s.contains("compute_scale") ||
        !s["compute_scale"].is_number() || !(s["compute_scale"].get<double>() > 0)) {
      return Status::InvalidArgument(
          "factory calibration: each of 'scales' needs a 'key' (\"<gpu>/<model>\") and a positive 'compute_scale'");
    }
    Fit f;
    f.kind = kFitKindE2e;
    f.key = s["key"].get<std::string>();
    std::vector<std::string> from;
    if (s.contains("rows") && s["rows"].is_array()) {
      for (const auto& r : s["rows"]) from.push_back(r.is_string() ? r.get<std::string>() : r.dump());
    }
    const std::string rows = fmt::format("{}", fmt::join(from, "; "));
    f.params = {{"compute_scale", s["compute_scale"]},
                {"origin", fmt::format("published: {}", rows.empty() ? doc.value("suite", "?") : rows)}};
    fits.push_back(std::move(f));
  }
  return fits;
}

StatusOr<std::vector<Fit>> LoadFactoryFits(const Catalog& catalog) {
  const auto path = catalog.data_dir() / kFactoryCalibrationPath;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::vector<Fit>{};
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::InvalidArgument(fmt::format("{}: not valid JSON", path.string()));
  auto fits = FactoryFits(doc);
  if (!fits.ok()) return fits.status().WithContext(path.string());
  const uint64_t release = FactoryReleaseOf(text.str());
  for (auto& f : *fits) f.factory_release = release;
  return fits;
}

uint64_t FactoryReleaseOf(std::string_view text) {
  // FNV-1a, 64 bits: any edit of the file is another release.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h != 0 ? h : 1;  // 0 marks the user's own fits
}

StatusOr<std::unique_ptr<Store>> OpenCalibrationStore(const Catalog& catalog, const std::string& path) {
  StoreOptions options;
  DITUNE_ASSIGN_OR_RETURN(options.seed_fits, LoadFactoryFits(catalog));
  return Store::Open(path, options);
}

StatusOr<std::unique_ptr<Store>> OpenStoreForPricing(const Catalog& catalog, const std::string& explicit_path,
                                                     std::string* note) {
  note->clear();
  const std::string path = explicit_path.empty() ? Store::DefaultPath() : explicit_path;
  StatusOr<std::unique_ptr<Store>> opened = OpenCalibrationStore(catalog, path);
  const char* env = std::getenv("DITUNE_DB");
  if (opened.ok() || !explicit_path.empty() || (env != nullptr && *env != '\0')) return opened;
  *note = fmt::format("the default calibration store {} could not be opened ({}): priced with the shipped factory "
                      "calibration only (--db or DITUNE_DB names a store)",
                      path, opened.status().message());
  return OpenCalibrationStore(catalog, ":memory:");
}

std::vector<std::string> CalibrationSources(const std::vector<Fit>& fits, const Cluster& cluster,
                                            const std::string& model_id) {
  std::vector<std::string> out;
  const std::string key = E2eFitKey(cluster.gpu->id, model_id);
  const Fit* scale = nullptr;
  const Fit* mech = nullptr;
  const Fit* refined = nullptr;
  int compute = 0, comm = 0;
  for (const auto& f : fits) {
    if (!f.active) continue;
    if (f.kind == kFitKindE2e && f.key == key) scale = &f;
    if (f.kind == kFitKindMechanisms && f.key == kMechanismsKeyXdit) mech = &f;
    if (f.kind == kFitKindMechanisms && f.key == MechanismsKeyFor(cluster.gpu->id)) refined = &f;
    if (f.kind == kFitKindCompute && f.key.starts_with(cluster.gpu->id + "/")) ++compute;
    if (f.kind == kFitKindComm && (f.key.find("/" + cluster.intra->id) != std::string::npos ||
                                   f.key.find("/" + cluster.inter->id) != std::string::npos)) {
      ++comm;
    }
  }
  if (scale != nullptr && scale->params.contains("compute_scale") && scale->params["compute_scale"].is_number()) {
    const double k = scale->params["compute_scale"].get<double>();
    const std::string origin = FactoryOrigin(*scale);
    out.push_back(!origin.empty() ? fmt::format("compute scale of {}: {:.3f}, learned from published runs ({})", key, k,
                                                origin)
                                  : fmt::format("compute scale of {}: {:.3f}, fitted from {} measurement(s) in the store",
                                                key, k, scale->measurement_ids.size()));
  } else {
    out.push_back(fmt::format("compute of {}: catalog peak and default efficiencies (no published or measured run of "
                              "this GPU and model calibrates a scale)",
                              key));
  }
  const std::string mech_origin = mech != nullptr ? FactoryOrigin(*mech) : "";
  if (refined != nullptr) {
    out.push_back(fmt::format("global constants: refined on {} of your runs on {}, starting from {}",
                              refined->measurement_ids.size(), cluster.gpu->id,
                              mech_origin.empty() ? "the defaults" : "the constants " + mech_origin));
  } else {
    constexpr const char* kWhat =
        "global constants (eager host overhead per block family at the catalog's time per op, "
        "framework ops per method, collective efficiencies, VAE scales)";
    out.push_back(mech == nullptr ? fmt::format("{}: the code's defaults", kWhat)
                                  : fmt::format("{}: {}", kWhat,
                                                mech_origin.empty() ? "learned (calibrate learn)"
                                                                    : mech_origin));
  }
  out.push_back(compute > 0 ? fmt::format("per-op curves on {}: {} fitted from measurements", cluster.gpu->id, compute)
                            : fmt::format("per-op curves on {}: catalog defaults", cluster.gpu->id));
  // The class efficiencies as ModelsFor applies them to xDiT's kernels.
  const bool scaled = scale != nullptr && scale->params.contains("compute_scale");
  auto classes = KernelClassScales(fits, cluster.gpu->id, scaled);
  for (const auto& f : fits) {
    if (!classes.ok() || !*classes || !f.active || f.kind != kFitKindKernelClass || f.key != cluster.gpu->id) continue;
    const auto& k = **classes;
    const bool relative = f.params.contains("relative") && f.params["relative"].is_boolean() &&
                          f.params["relative"].get<bool>();
    out.push_back(fmt::format(
        "efficiency per op class of xDiT's kernels on {}: gemm {:.2f}x, attention {:.2f}x, elementwise {:.2f}x the "
        "modelled device time, measured from {}{}",
        cluster.gpu->id, k[static_cast<int>(OpClass::kGemm)], k[static_cast<int>(OpClass::kAttention)],
        k[static_cast<int>(OpClass::kElementwise)], FactoryOrigin(f).empty() ? "profiler traces" : FactoryOrigin(f),
        scaled || relative
            ? fmt::format("; normalised to a time-weighted mean of 1 ({})",
                          scaled ? "the compute scale holds the level" : "the traces had no time per step")
            : ""));
  }
  out.push_back(comm > 0 ? fmt::format("collectives: {} curve(s) fitted from measurements", comm)
                         : fmt::format("collectives on {}{}: catalog bandwidth and latency, times the global "
                                       "efficiencies",
                                       cluster.intra->id, cluster.nodes() > 1 ? " and " + cluster.inter->id : ""));
  return out;
}

std::string FactoryOrigin(const Fit& fit) {
  if (!fit.params.is_object() || !fit.params.contains("origin") || !fit.params["origin"].is_string()) return "";
  return fit.params["origin"].get<std::string>();
}

}  // namespace ditune
