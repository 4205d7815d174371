#include "planner/measured_runs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/validate.h"
#include "costmodels/calibration.h"
#include "planner/learn.h"
#include "planner/predict.h"
#include "planner/validate_suite.h"

namespace ditune {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string GroupOf(const SuiteRow& r) {
  const Workload& w = r.workload;
  return fmt::format("{}/{}/{}x{}{}/{}", r.cluster.gpu_id, w.model_id, w.height, w.width,
                     w.frames > 1 ? fmt::format("x{}", w.frames) : "", w.steps);
}

}  // namespace

std::vector<MeasuredRun> MeasuredXditRuns(const std::vector<Measurement>& measurements, const Catalog& catalog) {
  std::vector<MeasuredRun> out;
  for (const auto& m : measurements) {
    if (m.backend != "xdit" || m.kind != MeasurementKind::kE2e || (m.op != "total" && m.op != "dit")) continue;
    MeasuredRun run;
    run.measurement = &m;
    auto skip = [&](std::string why) {
      run.skipped = std::move(why);
      out.push_back(run);
    };
    const auto& p = m.params;
    if (!p.is_object() || !p.contains("model") || !p["model"].is_string() || m.ranks < 1) {
      skip("the run names no model (ingest it with --model and --config)");
      continue;
    }
    auto model = catalog.Model(p["model"].get<std::string>());
    if (!model.ok()) {
      skip(model.status().message());
      continue;
    }
    if (p.value("nodes", 1) > 1) {
      skip("a run over several nodes: its inter-node link is not recorded");
      continue;
    }
    SuiteRow row;
    row.line = static_cast<int>(m.id);
    row.workload = Workload{(*model)->id,          p.value("height", (*model)->default_height),
                            p.value("width", (*model)->default_width), p.value("frames", (*model)->default_frames),
                            p.value("steps", (*model)->default_steps), p.value("batch", 1),
                            m.op == "dit" ? OutputType::kLatent : OutputType::kDecoded};
    row.scope = m.op == "dit" ? SuiteScope::kDit : SuiteScope::kE2e;
    row.cluster = ClusterSpec{m.device, m.ranks};
    row.config_text = p.value("config", "");
    auto config = ParseParallelConfig(row.config_text);
    auto cluster = ResolveCluster(row.cluster, catalog);
    auto tokens = ComputeTokenGeometry(**model, row.workload);
    if (!config.ok() || !cluster.ok() || !tokens.ok()) {
      skip(!config.ok() ? config.status().message()
                        : !cluster.ok() ? cluster.status().message() : tokens.status().message());
      continue;
    }
    if (config->world_size() != m.ranks) {
      skip(fmt::format("its configuration '{}' runs on {} GPUs, the run on {}", row.config_text,
                       config->world_size(), m.ranks));
      continue;
    }
    const ValidationContext ctx{*model, *tokens, row.workload.steps, row.workload.batch, m.ranks};
    if (Status v = ValidateConfig(ctx, *config); !v.ok()) {
      skip(v.message());
      continue;
    }
    row.config = *config;
    row.role = m.ranks == 1 ? SuiteRole::kCalibrate : SuiteRole::kPredict;
    row.latency_s = m.median.value();
    row.source = fmt::format("measurement {}", m.id);
    row.group = GroupOf(row);
    run.row = std::move(row);
    out.push_back(std::move(run));
  }
  return out;
}

StatusOr<std::vector<Fit>> FitMeasuredRuns(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                           const std::vector<Fit>& fits, std::vector<std::string>* skipped) {
  auto note = [&](const Measurement& m, const std::string& why) {
    if (skipped != nullptr) {
      skipped->push_back(fmt::format("measurement {} ({}): {}", m.id, m.op == "launch" ? "profiler trace" : "xDiT run",
                                     why));
    }
  };
  std::vector<SuiteRow> rows;
  std::vector<const Measurement*> used;
  for (auto& run : MeasuredXditRuns(measurements, catalog)) {
    if (!run.row) {
      note(*run.measurement, run.skipped);
      continue;
    }
    // Quarantine: a run far from what the current models predict is not trusted.
    DITUNE_ASSIGN_OR_RETURN(std::optional<double> predicted, PredictRowLatency(*run.row, catalog, fits));
    const double measured = *run.row->latency_s;
    if (predicted && (measured > kQuarantineRatio * *predicted || *predicted > kQuarantineRatio * measured)) {
      note(*run.measurement,
           fmt::format("quarantined: {:.3g} s measured against {:.3g} s predicted (more than {}x apart: a run "
                       "without warm-up, a shared GPU, or a log of another configuration?)",
                       measured, *predicted, kQuarantineRatio));
      continue;
    }
    rows.push_back(*run.row);
    used.push_back(run.measurement);
  }
  std::vector<Fit> out;
  // One-GPU runs: the (GPU, model) compute scale, measured / modelled at scale 1.
  std::vector<Fit> unscaled;
  for (const auto& f : fits) {
    if (f.kind != kFitKindE2e || f.key.find('/') != f.key.rfind('/')) unscaled.push_back(f);
  }
  std::map<std::string, std::pair<std::vector<double>, std::vector<int64_t>>> ratios;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].role != SuiteRole::kCalibrate) continue;
    DITUNE_ASSIGN_OR_RETURN(std::optional<double> modelled, PredictRowLatency(rows[i], catalog, unscaled));
    if (!modelled || *modelled <= 0) continue;
    auto& [r, ids] = ratios[E2eFitKey(rows[i].cluster.gpu_id, rows[i].workload.model_id)];
    r.push_back(*rows[i].latency_s / *modelled);
    ids.push_back(used[i]->id);
  }
  for (const auto& [key, v] : ratios) {
    Fit f;
    f.kind = kFitKindE2e;
    f.key = key;
    f.params = {{"compute_scale", Median(v.first)}};
    f.points = static_cast<int>(v.first.size());
    f.measurement_ids = v.second;
    out.push_back(std::move(f));
  }
  // Profiler traces: the host's time per kernel launch of an eager run, measured, is that
  // GPU's eager per-op host time (a framework op launches about one kernel).
  std::map<std::string, std::pair<std::vector<double>, std::vector<int64_t>>> launch_us;
  const MechanismParam* eager = nullptr;
  for (const auto& p : MechanismParams()) {
    if (std::string(p.name) == "eager_op_us") eager = &p;
  }
  for (const auto& m : measurements) {
    if (m.kind != MeasurementKind::kOp || m.op != "launch" || m.backend != "xdit") continue;
    const double launches = m.params.is_object() ? m.params.value("launches", 0.0) : 0.0;
    if (!(launches >= 1)) {
      note(m, "a launch timing without params.launches");
      continue;
    }
    const double us = m.median.value() / launches * 1e6;
    if (us < eager->lo || us > eager->hi) {
      note(m, fmt::format("{:.1f} µs per kernel launch is outside [{}, {}] µs: a trace whose launches waited on the "
                          "device (a full launch queue) times the GPU, not the host",
                          us, eager->lo, eager->hi));
      continue;
    }
    auto& [v, ids] = launch_us[m.device];
    v.push_back(us);
    ids.push_back(m.id);
  }
  // Multi-GPU runs: the constants refined for their GPU, a short search from those in force
  // (with the measured per-launch host time where a trace gave one).
  std::map<std::string, std::vector<SuiteRow>> by_gpu;
  std::map<std::string, std::vector<int64_t>> by_gpu_ids;
  std::map<std::string, int> multi;
  for (size_t i = 0; i < rows.size(); ++i) {
    by_gpu[rows[i].cluster.gpu_id].push_back(rows[i]);
    by_gpu_ids[rows[i].cluster.gpu_id].push_back(used[i]->id);
    multi[rows[i].cluster.gpu_id] += rows[i].role == SuiteRole::kPredict;
  }
  std::vector<Fit> with_scales = fits;
  with_scales.insert(with_scales.end(), out.begin(), out.end());
  std::set<std::string> gpus;
  for (const auto& [gpu, n] : multi) {
    if (n > 0) gpus.insert(gpu);
  }
  for (const auto& [gpu, v] : launch_us) gpus.insert(gpu);
  for (const auto& gpu : gpus) {
    DITUNE_ASSIGN_OR_RETURN(std::optional<Mechanisms> current, MechanismsIn(fits, gpu));
    LearnOptions opt;
    opt.start = current.value_or(Mechanisms{});
    std::vector<int64_t> ids;
    if (auto it = launch_us.find(gpu); it != launch_us.end()) {
      opt.start.eager_op_us = Median(it->second.first);
      opt.fixed.push_back("eager_op_us");
      ids = it->second.second;
    }
    Mechanisms chosen = opt.start;
    int points = static_cast<int>(ids.size());
    double mape = 0;
    if (multi[gpu] > 0) {
      opt.steps = {1.19, 1.09, 1.04};
      opt.passes = 1;
      opt.keep_base_scales = true;
      DITUNE_ASSIGN_OR_RETURN(LearnResult learned, LearnMechanisms(by_gpu[gpu], catalog, with_scales, opt));
      if (learned.loss_after < learned.loss_before) chosen = learned.mechanisms;
      ids.insert(ids.end(), by_gpu_ids[gpu].begin(), by_gpu_ids[gpu].end());
      points += static_cast<int>(by_gpu[gpu].size());
      mape = learned.after.median_ape;
    }
    if (chosen == current.value_or(Mechanisms{})) continue;  // nothing measured moved them
    Fit f = MechanismsFit(chosen);
    f.key = MechanismsKeyFor(gpu);
    f.points = points;
    f.mape = mape;
    f.measurement_ids = ids;
    out.push_back(std::move(f));
  }
  // Peak memory printed by the run: the runtime overhead of its (GPU, model).
  std::map<std::string, std::pair<std::vector<double>, std::vector<int64_t>>> overheads;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& p = used[i]->params;
    if (!p.contains("peak_memory_gb") || !p["peak_memory_gb"].is_number()) continue;
    const ModelSpec& model = **catalog.Model(rows[i].workload.model_id);
    const GpuSpec& gpu = **catalog.Gpu(rows[i].cluster.gpu_id);
    DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, rows[i].workload));
    const MemoryBreakdown mb = RankMemory(model, tokens, rows[i].workload, *rows[i].config, gpu);
    const Bytes overhead = FitRuntimeOverhead(mb, Gigabytes(p["peak_memory_gb"].get<double>()));
    auto& [v, ids] = overheads[E2eFitKey(rows[i].cluster.gpu_id, model.id)];
    v.push_back(overhead.value() / 1e9);
    ids.push_back(used[i]->id);
  }
  for (const auto& [key, v] : overheads) {
    Fit f;
    f.kind = kFitKindMemory;
    f.key = key;
    f.params = {{"runtime_overhead_gb", Median(v.first)}};
    f.points = static_cast<int>(v.first.size());
    f.measurement_ids = v.second;
    out.push_back(std::move(f));
  }
  return out;
}

std::optional<Bytes> MeasuredRuntimeOverhead(const std::vector<Fit>& fits, const std::string& gpu,
                                             const std::string& model) {
  for (const auto& f : fits) {
    if (f.active && f.kind == kFitKindMemory && f.key == E2eFitKey(gpu, model) &&
        f.params.contains("runtime_overhead_gb") && f.params["runtime_overhead_gb"].is_number()) {
      return Gigabytes(f.params["runtime_overhead_gb"].get<double>());
    }
  }
  return std::nullopt;
}

std::vector<std::string> MeasuredLines(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                       const Workload& workload, const Cluster& cluster,
                                       const std::vector<std::pair<std::string, double>>& configs) {
  std::vector<std::string> out;
  for (const auto& run : MeasuredXditRuns(measurements, catalog)) {
    if (!run.row) continue;
    const SuiteRow& r = *run.row;
    const Workload& w = r.workload;
    if (r.cluster.gpu_id != cluster.gpu->id || r.cluster.gpus != cluster.gpus() || w.model_id != workload.model_id ||
        w.height != workload.height || w.width != workload.width || w.frames != workload.frames ||
        w.steps != workload.steps || w.output != workload.output) {
      continue;
    }
    for (const auto& [config, predicted] : configs) {
      if (ToString(*r.config) != config) continue;
      const bool quarantined = *r.latency_s > kQuarantineRatio * predicted || predicted > kQuarantineRatio * *r.latency_s;
      out.push_back(fmt::format("measured: {} ran in {:.3f} s (measurement {}); predicted {:.3f} s ({:+.1f}%){}",
                                config.empty() ? "1 device" : config, *r.latency_s, run.measurement->id, predicted,
                                100 * (predicted - *r.latency_s) / *r.latency_s,
                                quarantined ? "; over 3x apart: calibration leaves such a run out" : ""));
    }
  }
  return out;
}

}  // namespace ditune
