#include "calibration/predict.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/enumerate.h"
#include "calibration/kernel_classes.h"

namespace ditune {

std::string E2eFitKey(const std::string& gpu, const std::string& model) { return fmt::format("{}/{}", gpu, model); }

std::string EngineFitKey(const std::string& gpu, const std::string& backend, int ranks) {
  return ranks > 1 ? fmt::format("{}/{}/engine@{}", gpu, backend, ranks) : fmt::format("{}/{}/engine", gpu, backend);
}

namespace {

StatusOr<double> ScaleParam(const Fit& f, const char* name) {
  if (!f.params.contains(name) || !f.params[name].is_number()) {
    return Status::Corruption(fmt::format("fit {} '{}': no {}", f.id, f.key, name));
  }
  return f.params[name].get<double>();
}

// Measured and modelled times of one fit's group, and the measurements they came from.
struct ScalePairs {
  std::vector<double> modelled, measured;
  std::vector<int64_t> ids;
  void Add(double modelled_s, const Measurement& m) {
    modelled.push_back(modelled_s);
    measured.push_back(m.median.value());
    ids.push_back(m.id);
  }
};

}  // namespace

Fit UnitComputeScale(const std::string& key) {
  Fit f;
  f.kind = kFitKindE2e;
  f.key = key;
  f.params = {{"compute_scale", 1.0}};
  return f;
}

StatusOr<Fit> ScaleFit(const std::string& key, const std::string& param, const std::vector<double>& modelled,
                       const std::vector<double>& measured, const std::vector<int64_t>& ids) {
  DITUNE_ASSIGN_OR_RETURN(double k, FitScale(modelled, measured));
  Fit f;
  f.kind = kFitKindE2e;
  f.key = key;
  f.params = {{param, k}};
  f.points = static_cast<int>(modelled.size());
  std::vector<double> scaled;
  for (double x : modelled) scaled.push_back(x * k);
  f.mape = MeanAbsolutePercentageError(scaled, measured);
  f.measurement_ids = ids;
  return f;
}

namespace {

// One ScaleFit per group, keyed by the group's key.
StatusOr<std::vector<Fit>> ScaleFits(const std::map<std::string, ScalePairs>& groups, const std::string& param) {
  std::vector<Fit> fits;
  for (const auto& [key, g] : groups) {
    DITUNE_ASSIGN_OR_RETURN(Fit f, ScaleFit(key, param, g.modelled, g.measured, g.ids));
    fits.push_back(std::move(f));
  }
  return fits;
}

}  // namespace

StatusOr<CostModels> ModelsFor(const Cluster& cluster, const std::string& model_id, const std::vector<Fit>& fits,
                               const std::string& backend, Runtime runtime) {
  DITUNE_ASSIGN_OR_RETURN(CostModels m, MakeCostModels(cluster, fits, backend, runtime));
  const std::string key = E2eFitKey(cluster.gpu->id, model_id);
  const bool engine = runtime == Runtime::kEngine;
  const std::string fit_backend = FitBackend(*cluster.gpu, backend);
  std::string engine_key = EngineFitKey(cluster.gpu->id, fit_backend);
  if (engine && cluster.gpus() > 1) {
    const std::string sized = EngineFitKey(cluster.gpu->id, fit_backend, cluster.gpus());
    if (std::any_of(fits.begin(), fits.end(), [&](const Fit& f) { return f.active && f.key == sized; })) {
      engine_key = sized;
    }
  }
  bool text_fitted = false, vae_fitted = false, scaled = false;
  for (const auto& f : fits) {
    if (!f.active || f.kind != kFitKindE2e) continue;
    if (f.key == key + "/text_encode" || f.key == key + "/vae_decode") {
      DITUNE_ASSIGN_OR_RETURN(double k, ScaleParam(f, "scale"));
      const bool text = f.key.ends_with("text_encode");
      (text ? m.terms.text_encode : m.terms.vae_decode) = k;
      (text ? text_fitted : vae_fitted) = true;
    }
    if (f.key == (engine ? engine_key : key)) {
      DITUNE_ASSIGN_OR_RETURN(double k, ScaleParam(f, "compute_scale"));
      m.compute.set_scale(k);
      scaled = true;
    }
  }
  // The GPU's class efficiencies from profiler traces price xDiT's kernels, not the engine's.
  if (!engine) {
    DITUNE_ASSIGN_OR_RETURN(auto classes, KernelClassScales(fits, cluster.gpu->id, /*normalise=*/scaled));
    if (classes) {
      for (int c = 0; c < kNumOpClasses; ++c) m.compute.SetClassScale(static_cast<OpClass>(c), (*classes)[c]);
    }
  }
  m.terms.text_measured = text_fitted;
  m.terms.vae_measured = vae_fitted;
  return m;
}

StatusOr<SimResult> SimulateEngineRun(const ModelSpec& model, const Workload& workload, const ParallelConfig& config,
                                      const Cluster& cluster, const std::vector<Fit>& fits,
                                      const std::string& backend) {
  DITUNE_ASSIGN_OR_RETURN(CostModels models, ModelsFor(cluster, model.id, fits, backend, Runtime::kEngine));
  Workload latent = workload;
  latent.output = OutputType::kLatent;
  SimInput in{&model, latent, &cluster, config, &models.compute, models.comm.get()};
  SimOptions so;
  so.terms = models.terms;
  return Simulate(in, so);
}

StatusOr<std::vector<EngineCandidate>> RankEngineConfigs(const Catalog& catalog, const Workload& workload,
                                                         const Cluster& cluster, const std::vector<Fit>& fits,
                                                         const std::string& backend) {
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(workload.model_id));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*model, workload));
  const ValidationContext ctx{model, tokens, workload.steps, workload.batch, cluster.gpus()};
  std::vector<EngineCandidate> out;
  for (const auto& c : EnumerateConfigs(ctx, cluster)) {
    DITUNE_ASSIGN_OR_RETURN(SimResult r, SimulateEngineRun(*model, workload, c, cluster, fits, backend));
    out.push_back({c, r.dit.value()});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.dit_s < b.dit_s; });
  return out;
}

std::string EnginePricedAs(const std::string& backend, const GpuSpec& gpu) {
  return backend != "cuda" && !gpu.is_cpu ? "cuda" : backend;
}

StatusOr<std::map<std::string, Seconds>> EngineKernelTimes(const ModelSpec& model, const Workload& workload,
                                                           const ParallelConfig& config, const Cluster& cluster,
                                                           const std::vector<Fit>& fits, const std::string& backend,
                                                           int rank) {
  DITUNE_ASSIGN_OR_RETURN(CostModels models, ModelsFor(cluster, model.id, fits, backend, Runtime::kEngine));
  models.compute.set_scale(1.0);
  SimInput in{&model, workload, &cluster, config, &models.compute, models.comm.get()};
  return ModelledKernelTimes(in, rank);
}

StatusOr<std::vector<Fit>> FitEngineScales(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                           const std::vector<Fit>& fits, std::vector<std::string>* skipped) {
  std::map<std::string, ScalePairs> groups;
  for (const auto& m : measurements) {
    if (m.kind != MeasurementKind::kE2e || m.op != "dit" || m.source != MeasurementSource::kExecutor ||
        m.ranks < 1) {
      continue;
    }
    auto why = [&](const std::string& reason) {
      if (skipped != nullptr) skipped->push_back(fmt::format("measurement {} (engine dit): {}", m.id, reason));
    };
    const auto& p = m.params;
    if (!p.is_object() || !p.contains("model") || !p["model"].is_string() || !p.contains("config") ||
        !p["config"].is_string()) {
      why("params must name the model and the config");
      continue;
    }
    // Ranks on GPUs exchanging through the host (MPI) may share one GPU: such runs check the
    // engine, they do not time an N-GPU plan; NCCL runs (one GPU per rank) do.
    if (m.ranks > 1 && m.backend == "cuda" && p.value("comm", "") != "nccl") {
      why("a multi-rank cuda run over MPI (its ranks may share a GPU) does not calibrate N-GPU plans");
      continue;
    }
    auto model = catalog.Model(p["model"].get<std::string>());
    if (!model.ok()) {
      why(model.status().message());
      continue;
    }
    auto config = ParseParallelConfig(p["config"].get<std::string>());
    auto cluster = ResolveCluster(ClusterSpec{m.device, m.ranks}, catalog);
    if (!config.ok() || !cluster.ok()) {
      why(!config.ok() ? config.status().message() : cluster.status().message());
      continue;
    }
    Workload w{(*model)->id, p.value("height", (*model)->default_height), p.value("width", (*model)->default_width),
               p.value("frames", 1), p.value("steps", (*model)->default_steps), p.value("batch", 1),
               OutputType::kLatent};
    auto sim = SimulateEngineRun(**model, w, *config, *cluster, fits, m.backend);
    if (!sim.ok() || sim->dit.value() <= 0) {
      why(sim.ok() ? "the model predicts no DiT time" : sim.status().message());
      continue;
    }
    groups[EngineFitKey(m.device, m.backend, m.ranks)].Add(sim->dit.value(), m);
  }
  return ScaleFits(groups, "compute_scale");
}

StatusOr<std::vector<Fit>> FitPipelineTerms(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                            std::vector<std::string>* skipped) {
  std::map<std::string, ScalePairs> groups;
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
    groups[key].Add(modelled, m);
  }
  return ScaleFits(groups, "scale");
}


}  // namespace ditune
