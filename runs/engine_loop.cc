#include "runs/engine_loop.h"

#include <algorithm>

#include <fmt/format.h>

#include "runs/records.h"
#include "costmodels/calibration.h"
#include "executor/profiling_kernels.h"
#include "calibration/predict.h"
#include "calibration/recalibrate.h"

namespace ditune::calibration {
namespace {

// Refusals every rank makes alike before any transfer (too large for the device, not run
// across ranks): the configuration is skipped, the others still run.
bool SharedRefusal(const Status& st) {
  return st.code() == Status::Code::kInvalidArgument || st.code() == Status::Code::kNotSupported;
}

}  // namespace

StatusOr<EnginePrediction> PredictEngineRun(const ModelSpec& model, const Workload& workload,
                                            const ParallelConfig& config, const Cluster& cluster,
                                            const std::vector<Fit>& fits, const std::string& backend, int rank,
                                            bool kernel_prices) {
  EnginePrediction p;
  p.priced_as = EnginePricedAs(backend, *cluster.gpu);
  if (p.priced_as == "ref" && !HasComputeFits(fits, "cpu", "ref")) {
    return Status::InvalidArgument(
        "the ref kernels on this host are not calibrated (run `ditune calibrate compute --backend ref` first)");
  }
  DITUNE_ASSIGN_OR_RETURN(SimResult sim, SimulateEngineRun(model, workload, config, cluster, fits, p.priced_as));
  p.dit_s = sim.dit.value();
  for (const auto& r : sim.ranks) {
    if (r.rank == rank) p.busy_s = r.busy.value();
  }
  if (kernel_prices) {
    DITUNE_ASSIGN_OR_RETURN(p.kernels,
                            EngineKernelTimes(model, workload, config, cluster, fits, p.priced_as, rank));
  }
  return p;
}

StatusOr<RecordedRun> RecordEngineRun(Store* store, const ModelSpec& model, const Workload& workload,
                                      const ParallelConfig& config, const std::string& backend,
                                      const std::string& gpu_id, const std::string& comm, double predicted_s,
                                      const exec::EngineRunResult& r, bool whole, int rank) {
  RecordedRun out;
  std::vector<RunRecord> runs;
  std::vector<Measurement> measurements;
  if (whole) {
    out.run_id = NewRunId(gpu_id);
    runs.push_back(EngineRunRecord(model, workload, config, backend, gpu_id, comm, predicted_s, r, out.run_id));
    nlohmann::json extra{{"backend", backend}, {"device_name", r.device_name}};
    if (!comm.empty()) extra["comm"] = comm;
    measurements.push_back(DitMeasurement(model, workload, config, config.world_size(), backend, gpu_id, r.median_s,
                                          r.p10_s, r.p90_s, r.iters, out.run_id, extra));
  }
  if (!r.profile_events.empty()) {
    const nlohmann::json params{{"model", model.id},         {"height", workload.height},
                                {"width", workload.width},   {"frames", workload.frames},
                                {"config", ToString(config)}, {"rank", rank}};
    auto kernels = exec::KernelMeasurements(r.profile_events, backend, gpu_id, out.run_id, params);
    out.kernel_measurements = kernels.size();
    measurements.insert(measurements.end(), kernels.begin(), kernels.end());
  }
  if (!measurements.empty()) DITUNE_RETURN_IF_ERROR(store->RecordRuns(runs, measurements).status());
  return out;
}

StatusOr<AutotuneResult> AutotuneEngine(const Catalog& catalog, Store* store, const ModelSpec& model,
                                        const Workload& workload, const Cluster& cluster,
                                        const AutotuneOptions& options) {
  if (options.world == nullptr) return Status::InvalidArgument("autotune needs the launched ranks' world");
  if (options.candidates < 1 || options.iters < 1) return Status::InvalidArgument("candidates and iters must be >= 1");
  exec::Comm* world = options.world;
  const bool root = world->rank() == 0;
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> fits, store->ActiveFits());
  const std::string priced_as = EnginePricedAs(options.backend, *cluster.gpu);
  if (priced_as == "ref" && !HasComputeFits(fits, "cpu", "ref")) {
    return Status::InvalidArgument(
        "the ref kernels on this host are not calibrated: run `ditune calibrate compute --backend ref` first");
  }
  // 1. Price every valid configuration as the engine runs it.
  DITUNE_ASSIGN_OR_RETURN(auto ranked, RankEngineConfigs(catalog, workload, cluster, fits, priced_as));
  if (ranked.empty()) return Status::Infeasible("no valid configuration for the launched ranks");
  AutotuneResult out;
  out.priced = ranked.size();
  // 2. Run the best K for real, across the ranks.
  std::vector<Measurement> measurements;
  std::vector<RunRecord> runs;
  const int k = std::min<int>(options.candidates, static_cast<int>(ranked.size()));
  for (int i = 0; i < k; ++i) {
    const ParallelConfig& c = ranked[i].config;
    if (root && options.progress) options.progress(i + 1, k, c);
    exec::EngineRunOptions ro;
    ro.kernels = options.backend;
    ro.world = world;
    ro.iters = options.iters;
    auto r = exec::MeasureEngineRun(model, workload, c, ro);
    if (!r.ok()) {
      if (!SharedRefusal(r.status())) return r.status();
      out.rows.push_back({c, ranked[i].dit_s, 0, 0, r.status().message()});
      continue;
    }
    out.rows.push_back({c, ranked[i].dit_s, r->median_s, 0, ""});
    const std::string run_id = NewRunId(cluster.spec.gpu_id);
    RunRecord rec = EngineRunRecord(model, workload, c, options.backend, cluster.spec.gpu_id,
                                    std::string(world->backend()), ranked[i].dit_s, *r, run_id);
    rec.plan["autotune"] = true;
    runs.push_back(std::move(rec));
    measurements.push_back(DitMeasurement(model, workload, c, c.world_size(), options.backend, cluster.spec.gpu_id,
                                          r->median_s, r->p10_s, r->p90_s, r->iters, run_id,
                                          {{"backend", options.backend},
                                           {"comm", std::string(world->backend())},
                                           {"autotune", true},
                                           {"predicted_s", ranked[i].dit_s}}));
  }
  if (runs.empty()) {
    return Status::Infeasible(fmt::format("none of the {} best configurations ran: {}", k, out.rows.front().skipped));
  }
  if (!root) return out;
  // 3. Record the runs together, and refit every model from the store (the engine scale of
  // this many ranks on this device and backend comes from these runs); 4. price again.
  DITUNE_RETURN_IF_ERROR(store->RecordRuns(runs, measurements).status());
  std::vector<std::string> skipped;
  DITUNE_RETURN_IF_ERROR(RecalibrateAll(store, catalog, &skipped).status());
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> active, store->ActiveFits());
  out.scale_key = EngineFitKey(cluster.spec.gpu_id, FitBackend(*cluster.gpu, priced_as), cluster.gpus());
  for (const auto& f : active) {
    if (f.kind == kFitKindE2e && f.key == out.scale_key && f.params.contains("compute_scale")) {
      out.scale = f.params["compute_scale"].get<double>();
    }
  }
  if (out.scale <= 0) {
    // Multi-rank cuda runs over MPI (ranks perhaps sharing a GPU) calibrate no N-GPU plans.
    out.unfitted = "none fitted";
    for (const auto& line : skipped) {
      if (line.find("engine dit") != std::string::npos) out.unfitted = line;
    }
  }
  for (auto& row : out.rows) {
    if (!row.skipped.empty()) continue;
    DITUNE_ASSIGN_OR_RETURN(SimResult sim,
                            SimulateEngineRun(model, workload, row.config, cluster, active, priced_as));
    row.after_s = sim.dit.value();
  }
  return out;
}

}  // namespace ditune::calibration
