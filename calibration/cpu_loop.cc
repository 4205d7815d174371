#include "calibration/cpu_loop.h"

#include <algorithm>

#include <fmt/format.h>

#include "costmodels/fitting.h"
#include "planner/predict.h"
#include "simulator/simulate.h"

namespace ditune::calibration {

StatusOr<Cluster> CpuCluster(const Catalog& catalog, int ranks) {
  ClusterSpec spec{"cpu", ranks};
  spec.intra_id = "shm";
  return ResolveCluster(spec, catalog);
}

StatusOr<double> PredictOnCpu(const Catalog& catalog, const Workload& w, const ParallelConfig& config, int ranks,
                              const std::vector<Fit>& fits) {
  DITUNE_ASSIGN_OR_RETURN(Cluster cluster, CpuCluster(catalog, ranks));
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(w.model_id));
  DITUNE_ASSIGN_OR_RETURN(CostModels models, ModelsFor(cluster, model->id, fits));
  Workload latent = w;
  latent.output = OutputType::kLatent;
  SimInput in{model, latent, &cluster, config, &models.compute, models.comm.get()};
  SimOptions opt;
  opt.terms = models.terms;
  DITUNE_ASSIGN_OR_RETURN(SimResult r, Simulate(in, opt));
  return r.dit.value();
}

StatusOr<Fit> RefitCpuComputeScale(const std::vector<Fit>& fits, const std::string& model_id,
                                   const std::vector<double>& predicted, const std::vector<double>& measured) {
  DITUNE_ASSIGN_OR_RETURN(double scale, FitScale(predicted, measured));
  const std::string key = E2eFitKey("cpu", model_id);
  double previous = 1.0;
  for (const auto& f : fits) {
    if (f.kind == kFitKindE2e && f.key == key && f.params.contains("compute_scale") &&
        f.params["compute_scale"].is_number()) {
      previous = f.params["compute_scale"].get<double>();
    }
  }
  Fit fit;
  fit.kind = kFitKindE2e;
  fit.key = key;
  fit.params = {{"compute_scale", previous * scale}};
  fit.points = static_cast<int>(predicted.size());
  return fit;
}

std::vector<Fit> WithFit(std::vector<Fit> fits, const Fit& fit) {
  std::erase_if(fits, [&](const Fit& f) { return f.kind == fit.kind && f.key == fit.key; });
  fits.push_back(fit);
  return fits;
}

}  // namespace ditune::calibration
