#include "planner/predict.h"

#include <map>

#include <fmt/format.h>

namespace ditune {

std::string E2eFitKey(const std::string& gpu, const std::string& model) { return fmt::format("{}/{}", gpu, model); }

StatusOr<CostModels> ModelsFor(const Cluster& cluster, const std::string& model_id, const std::vector<Fit>& fits) {
  DITUNE_ASSIGN_OR_RETURN(CostModels m, MakeCostModels(cluster, fits));
  const std::string key = E2eFitKey(cluster.gpu->id, model_id);
  for (const auto& f : fits) {
    if (!f.active || f.kind != kFitKindE2e) continue;
    if (f.key == key + "/text_encode" || f.key == key + "/vae_decode") {
      if (!f.params.contains("scale") || !f.params["scale"].is_number()) {
        return Status::Corruption(fmt::format("fit {} '{}': no scale", f.id, f.key));
      }
      (f.key.ends_with("text_encode") ? m.terms.text_encode : m.terms.vae_decode) = f.params["scale"].get<double>();
    }
    if (f.key == key) {
      if (!f.params.contains("compute_scale") || !f.params["compute_scale"].is_number()) {
        return Status::Corruption(fmt::format("fit {} '{}': no compute_scale", f.id, f.key));
      }
      m.compute.set_scale(f.params["compute_scale"].get<double>());
    }
  }
  return m;
}

StatusOr<std::vector<Fit>> FitPipelineTerms(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                            std::vector<std::string>* skipped) {
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> pairs;  // key -> (modelled, measured)
  std::map<std::string, std::vector<int64_t>> ids;
  for (const auto& m : measurements) {
    if (m.kind != MeasurementKind::kE2e || (m.op != "text_encode" && m.op != "vae_decode")) continue;
    auto why = [&](const std::string& reason) {
      if (skipped != nullptr) skipped->push_back(fmt::format("measurement {} ({}): {}", m.id, m.op, reason));
    };
    const auto& p = m.params;
    if (!p.is_object() || !p.contains("model") || !p["model"].is_string()) {
      why("params must name the model, height, width, frames and batch");
      continue;
    }
    auto model = catalog.Model(p["model"].get<std::string>());
    auto gpu = catalog.Gpu(m.device);
    if (!model.ok() || !gpu.ok()) {
      why(!model.ok() ? model.status().message() : gpu.status().message());
      continue;
    }
    Workload w{(*model)->id, p.value("height", (*model)->default_height), p.value("width", (*model)->default_width),
               p.value("frames", 1), p.value("steps", 1), p.value("batch", 1), OutputType::kDecoded};
    if (auto g = ComputeTokenGeometry(**model, w); !g.ok()) {
      why(g.status().message());
      continue;
    }
    const ComputeModel cm = ComputeModel::Defaults(**gpu);
    const double modelled = m.op == "text_encode" ? TextEncodeTime(cm, **model, w).value()
                                                  : VaeDecodeTime(cm, **model, w).value();
    const std::string key = fmt::format("{}/{}", E2eFitKey(m.device, (*model)->id), m.op);
    pairs[key].first.push_back(modelled);
    pairs[key].second.push_back(m.median.value());
    ids[key].push_back(m.id);
  }
  std::vector<Fit> fits;
  for (const auto& [key, pm] : pairs) {
    DITUNE_ASSIGN_OR_RETURN(double k, FitScale(pm.first, pm.second));
    Fit f;
    f.kind = kFitKindE2e;
    f.key = key;
    f.params = {{"scale", k}};
    f.points = static_cast<int>(pm.first.size());
    std::vector<double> scaled;
    for (double x : pm.first) scaled.push_back(x * k);
    f.mape = MeanAbsolutePercentageError(scaled, pm.second);
    f.measurement_ids = ids[key];
    fits.push_back(std::move(f));
  }
  return fits;
}

StatusOr<std::vector<Fit>> RecalibrateAll(Store* store, const Catalog& catalog, std::vector<std::string>* skipped) {
  DITUNE_ASSIGN_OR_RETURN(std::vector<Measurement> all, store->Measurements());
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> fits, BuildFits(all, skipped));
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> terms, FitPipelineTerms(all, catalog, skipped));
  fits.insert(fits.end(), terms.begin(), terms.end());
  if (!fits.empty()) DITUNE_RETURN_IF_ERROR(store->ReplaceFits(fits));
  return fits;
}

}  // namespace ditune
