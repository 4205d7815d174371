#include "planner/predict.h"

#include <fmt/format.h>

namespace ditune {

std::string E2eFitKey(const std::string& gpu, const std::string& model) { return fmt::format("{}/{}", gpu, model); }

StatusOr<CostModels> ModelsFor(const Cluster& cluster, const std::string& model_id, const std::vector<Fit>& fits) {
  DITUNE_ASSIGN_OR_RETURN(CostModels m, MakeCostModels(cluster, fits));
  const std::string key = E2eFitKey(cluster.gpu->id, model_id);
  for (const auto& f : fits) {
    if (f.active && f.kind == kFitKindE2e && f.key == key) {
      if (!f.params.contains("compute_scale") || !f.params["compute_scale"].is_number()) {
        return Status::Corruption(fmt::format("fit {} '{}': no compute_scale", f.id, f.key));
      }
      m.compute.set_scale(f.params["compute_scale"].get<double>());
    }
  }
  return m;
}

}  // namespace ditune
