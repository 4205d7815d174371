#include "calibration/validate_suite.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/config_rules.h"
#include "core/parallel_for.h"
#include "costmodels/fitting.h"
#include "core/enumerate.h"
#include "calibration/predict.h"
#include "core/stats.h"

namespace ditune {
namespace {

// Passes that refine each (GPU, model) compute scale by the ratio its calibrate rows still
// show (RefineComputeScales).
constexpr int kCalibrateRefinements = 2;

struct Prediction {
  ParallelConfig config;
  SimResult result;
};

// The configurations a published PipeFusion point stands for. xDiT's benchmark
// (benchmark/single_node_latency_test.py) runs every PipeFusion degree pp with warm-up steps
// 0, 1 and 2 and max(1, pp/2), pp and 2pp patches, and its charts show the best strategy per
// GPU count (docs/performance/sd3.md); a suite config that names neither the patches nor the
// warm-up is that point, so it is predicted as the fastest of the grid. A config that names
// either is itself.
std::vector<ParallelConfig> PublishedPipeFusionGrid(const SuiteRow& row, const ParallelConfig& c,
                                                    const ValidationContext& ctx) {
  const std::string& text = row.config_text;
  const bool pinned = text.find("patch") != std::string::npos || text.find("warmup") != std::string::npos;
  if (c.pipefusion < 2 || pinned) return {c};
  std::vector<ParallelConfig> grid;
  for (int warmup : {0, 1, 2}) {
    if (warmup > row.workload.steps) continue;
    for (int patches : {std::max(1, c.pipefusion / 2), c.pipefusion, 2 * c.pipefusion}) {
      ParallelConfig v = c;
      v.warmup = warmup;
      v.patches = patches;
      if (ValidateConfig(ctx, v).ok() &&
          std::none_of(grid.begin(), grid.end(), [&](const ParallelConfig& g) { return g == v; })) {
        grid.push_back(v);
      }
    }
  }
  return grid.empty() ? std::vector<ParallelConfig>{c} : grid;
}

// The rules a row's runtime plays by: a runtime's entry point beyond xDiT's (its id), or the
// method rules alone (xDiT's published runs, which ran, and ditune's engine: empty).
std::string RowRules(const SuiteRow& row, const Catalog& catalog) {
  if (row.runtime == "xdit") return {};
  auto spec = catalog.Runtime(row.runtime);
  return spec.ok() && !(*spec)->engine ? row.runtime : std::string();
}

// The configuration a row's rules judge. xDiT's rows play by the method rules alone, which
// are ditune's engine's, but xDiT ran them compiled where the row says compile=1 (its
// --use_torch_compile): how the row ran is RowExecution's, not a rule to refuse it by.
ParallelConfig RulesConfig(const SuiteRow& row, const std::string& rules) {
  ParallelConfig c = *row.config;
  if (rules.empty() && row.runtime == "xdit") c.compile = 0;
  return c;
}

// How a row's runtime executes: ditune's engine; compiled where the row says so (compile=1)
// or the runtime compiles by default, where its entry point compiles the model; else eager.
Runtime RowExecution(const SuiteRow& row, const Catalog& catalog, const ModelSpec& model) {
  if (auto spec = catalog.Runtime(row.runtime); spec.ok() && (*spec)->engine) return Runtime::kEngine;
  const std::string rules = RowRules(row, catalog);
  if (rules.empty()) return row.config && row.config->compile != 0 ? Runtime::kCompiled : Runtime::kEager;
  auto spec = catalog.Runtime(rules);
  return RuntimeCompiles(spec.ok() ? *spec : nullptr, model.runtime(rules), row.config && row.config->compile != 0,
                         row.config && row.config->eager != 0)
             ? Runtime::kCompiled
             : Runtime::kEager;
}

// A row's configuration against its runtime's rules ("best" rows and refused rows pass).
Status CheckRowConfig(const SuiteRow& row, const Catalog& catalog) {
  if (row.best() || !row.refused.empty()) return Status::Ok();
  DITUNE_ASSIGN_OR_RETURN(Cluster cluster, ResolveCluster(row.cluster, catalog));
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(row.workload.model_id));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*model, row.workload));
  const std::string rules = RowRules(row, catalog);
  ValidationContext ctx{model, tokens, row.workload.steps, row.workload.batch, cluster.gpus()};
  ctx.runtime = rules;
  return ValidateConfig(ctx, RulesConfig(row, rules));
}

// The prediction of a row's config (a published PipeFusion point: the best of xDiT's grid),
// or of the fastest feasible config for "best".
StatusOr<Prediction> PredictRow(const SuiteRow& row, const Catalog& catalog, const std::vector<Fit>& fits) {
  DITUNE_ASSIGN_OR_RETURN(Cluster cluster, ResolveCluster(row.cluster, catalog));
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(row.workload.model_id));
  DITUNE_ASSIGN_OR_RETURN(CostModels models,
                          ModelsFor(cluster, model->id, fits, "cuda", RowExecution(row, catalog, *model)));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*model, row.workload));
  const std::string rules = RowRules(row, catalog);
  ValidationContext ctx{model, tokens, row.workload.steps, row.workload.batch, cluster.gpus()};
  ctx.runtime = rules;
  std::vector<ParallelConfig> candidates;
  if (row.best()) {
    candidates = EnumerateConfigs(ctx, cluster);
    if (candidates.empty()) return Status::Infeasible(fmt::format("line {}: no valid configuration", row.line));
  } else {
    const ParallelConfig config = RulesConfig(row, rules);
    Status v = ValidateConfig(ctx, config);
    if (!v.ok()) return v.WithContext(fmt::format("line {}", row.line));
    candidates = PublishedPipeFusionGrid(row, config, ctx);
    for (auto& c : candidates) c.compile = row.config->compile;  // how it ran, for its label
  }
  std::optional<Prediction> best;
  auto consider = [&](const ParallelConfig& c) -> Status {
    SimInput in{model, row.workload, &cluster, c, &models.compute, models.comm.get()};
    SimOptions sim;
    sim.terms = models.terms;
    // How the runtime holds the parts (xDiT's rows play by the method rules alone, but hold
    // the parts as xDiT does).
    const std::string holder = !rules.empty() ? rules : row.runtime == "xdit" ? std::string("xdit") : std::string();
    if (const RuntimeSupport* entry = holder.empty() ? nullptr : model->runtime(holder)) {
      sim.memory.placement = entry->memory;
      sim.tp_split = entry->tp_split;
    }
    // The row's own runtime runs its ring (an xDiT row's is xDiT's, whatever rules it plays by).
    if (auto spec = catalog.Runtime(row.runtime); spec.ok()) sim.ring_merge_fused = (*spec)->ring_merge_fused;
    DITUNE_ASSIGN_OR_RETURN(SimResult r, Simulate(in, sim));
    const bool better = !best || (r.fits && !best->result.fits) ||
                        (r.fits == best->result.fits && ScopeSeconds(r, row.scope) < ScopeSeconds(best->result, row.scope));
    if (better) best = Prediction{c, std::move(r)};
    return Status::Ok();
  };
  for (const auto& c : candidates) DITUNE_RETURN_IF_ERROR(consider(c));
  // A published run that ran (a published OOM did not) where its configuration does not fit
  // on the GPU as a whole pipeline: xDiT's entry points can keep each part on the GPU only
  // while it runs (model CPU offload, which xDiT's examples pass for the large video models on
  // 48 GB parts).
  const RuntimeSupport* offloader = model->runtime(rules.empty() ? std::string("xdit") : rules);
  if (!best->result.fits && !row.best() && row.latency_s && offloader != nullptr &&
      offloader->runs(RuntimeMethod::kCpuOffload)) {
    for (ParallelConfig c : candidates) {
      c.offload = 1;
      DITUNE_RETURN_IF_ERROR(consider(c));
    }
  }
  return *best;
}

}  // namespace

StatusOr<std::optional<double>> PredictRowLatency(const SuiteRow& row, const Catalog& catalog,
                                                  const std::vector<Fit>& fits) {
  DITUNE_ASSIGN_OR_RETURN(Prediction p, PredictRow(row, catalog, fits));
  if (!p.result.fits) return std::optional<double>();
  return std::optional<double>(ScopeSeconds(p.result, row.scope));
}

Status RefineComputeScales(const std::vector<const SuiteRow*>& rows, const Catalog& catalog,
                           const std::vector<Fit>& base, std::vector<Fit>* scales, int passes) {
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<Fit> with = base;
    with.insert(with.end(), scales->begin(), scales->end());
    std::vector<StatusOr<std::optional<double>>> predicted(rows.size(), Status::Internal("not predicted"));
    ParallelFor(rows.size(), [&](size_t i) { predicted[i] = PredictRowLatency(*rows[i], catalog, with); });
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> left;  // key -> predicted, measured
    for (size_t i = 0; i < rows.size(); ++i) {
      DITUNE_ASSIGN_OR_RETURN(std::optional<double> p, std::move(predicted[i]));
      if (rows[i]->role != SuiteRole::kCalibrate || !rows[i]->latency_s || !p || !(*p > 0)) continue;
      auto& [model, measured] = left[E2eFitKey(rows[i]->cluster.gpu_id, rows[i]->workload.model_id)];
      model.push_back(*p);
      measured.push_back(*rows[i]->latency_s);
    }
    for (Fit& f : *scales) {
      auto it = left.find(f.key);
      if (f.kind != kFitKindE2e || it == left.end() || !f.params.contains("compute_scale")) continue;
      const auto& [model, measured] = it->second;
      DITUNE_ASSIGN_OR_RETURN(double r, FitScale(model, measured));
      f.params["compute_scale"] = f.params["compute_scale"].get<double>() * r;
      std::vector<double> scaled;
      for (double x : model) scaled.push_back(x * r);
      f.mape = MeanAbsolutePercentageError(scaled, measured);
    }
  }
  return Status::Ok();
}

StatusOr<SuiteReport> PredictSuite(const std::vector<SuiteRow>& rows, const Catalog& catalog,
                                   const std::vector<Fit>& base, std::vector<Fit>* scales, bool keep_base_scales) {
  // Rows ditune cannot predict are refused with the reason, and the rest predicted: a runtime
  // not priced, a configuration the rules refuse, and every row of a group whose calibrate row
  // is refused (nothing calibrates them).
  std::vector<std::string> refused(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    refused[i] = rows[i].refused;
    if (refused[i].empty()) {
      if (Status v = CheckRowConfig(rows[i], catalog); !v.ok()) refused[i] = v.message();
    }
  }
  auto refuse_groups = [&]() {
    std::map<std::string, int> calibrate_line;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].role == SuiteRole::kCalibrate && !refused[i].empty()) calibrate_line[rows[i].group] = rows[i].line;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      auto it = calibrate_line.find(rows[i].group);
      if (it != calibrate_line.end() && refused[i].empty()) {
        refused[i] = fmt::format("its group's calibrate row (line {}) is refused", it->second);
      }
    }
  };
  refuse_groups();
  std::set<std::string> calibrated;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SuiteRow& row = rows[i];
    if (row.role == SuiteRole::kCalibrate && refused[i].empty()) {
      calibrated.insert(E2eFitKey(row.cluster.gpu_id, row.workload.model_id));
    }
  }
  std::vector<Fit> fits = base;
  fits.erase(std::remove_if(fits.begin(), fits.end(),
                            [&](const Fit& f) {
                              return f.kind == kFitKindE2e && (!keep_base_scales || calibrated.count(f.key) > 0);
                            }),
             fits.end());
  // At scale 1, present: class efficiencies (KernelClassScales) apply normalised, as they
  // will beside the fitted scale.
  std::vector<Fit> uncalibrated = fits;
  for (const auto& key : calibrated) {
    uncalibrated.push_back(UnitComputeScale(key));
  }
  // Calibrate: measured / modelled per calibrate row, pooled (median) per (GPU, model).
  // Rows are predicted on the host's cores, each into its own slot, then read in suite order:
  // the result and the first error reported do not depend on the thread count.
  std::vector<const SuiteRow*> calibrate_rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].role == SuiteRole::kCalibrate && refused[i].empty()) calibrate_rows.push_back(&rows[i]);
  }
  std::vector<StatusOr<Prediction>> calibrate_predictions(calibrate_rows.size(), Status::Internal("not predicted"));
  ParallelFor(calibrate_rows.size(), [&](size_t i) {
    calibrate_predictions[i] = PredictRow(*calibrate_rows[i], catalog, uncalibrated);
  });
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> ratios;  // key -> modelled, measured
  for (size_t i = 0; i < calibrate_rows.size(); ++i) {
    const SuiteRow& row = *calibrate_rows[i];
    DITUNE_ASSIGN_OR_RETURN(Prediction p, std::move(calibrate_predictions[i]));
    auto& [modelled, measured] = ratios[E2eFitKey(row.cluster.gpu_id, row.workload.model_id)];
    modelled.push_back(ScopeSeconds(p.result, row.scope));
    measured.push_back(*row.latency_s);
  }
  std::vector<Fit> e2e;
  for (const auto& [key, pairs] : ratios) {
    DITUNE_ASSIGN_OR_RETURN(Fit f, ScaleFit(key, "compute_scale", pairs.first, pairs.second, {}));
    e2e.push_back(f);
  }
  // So that the calibrate rows are reproduced.
  DITUNE_RETURN_IF_ERROR(RefineComputeScales(calibrate_rows, catalog, fits, &e2e, kCalibrateRefinements));
  fits.insert(fits.end(), e2e.begin(), e2e.end());
  if (scales != nullptr) *scales = e2e;

  SuiteReport report;
  int refused_rows = 0;
  std::vector<ScoredRow> scored;
  std::vector<StatusOr<Prediction>> predictions(rows.size(), Status::Internal("not predicted"));
  ParallelFor(rows.size(), [&](size_t i) {
    if (refused[i].empty()) predictions[i] = PredictRow(rows[i], catalog, fits);
  });
  for (size_t i = 0; i < rows.size(); ++i) {
    const SuiteRow& row = rows[i];
    SuiteRowResult res;
    res.row = &row;
    if (refused[i].empty() && !predictions[i].ok() && predictions[i].status().code() != Status::Code::kInternal) {
      refused[i] = predictions[i].status().message();  // e.g. no valid configuration for "best"
    }
    if (!refused[i].empty()) {
      res.refused = refused[i];
      res.config = row.config_text;
      res.feasible = false;
      ++refused_rows;
      report.rows.push_back(std::move(res));
      continue;
    }
    DITUNE_ASSIGN_OR_RETURN(Prediction p, std::move(predictions[i]));
    res.config = Label(p.config);
    res.feasible = p.result.fits;
    if (!p.result.ranks.empty()) {
      const MemoryBreakdown& mem = p.result.ranks.front().memory;
      res.predicted_memory_gb = mem.tensors_peak().value() / 1e9;
      res.memory_phase = std::string(MemoryPhaseName(mem.peak_phase()));
      if (row.memory_gb) res.memory_ape = std::abs(*res.predicted_memory_gb - *row.memory_gb) / *row.memory_gb;
    }
    if (p.result.fits) res.predicted_s = ScopeSeconds(p.result, row.scope);
    if (row.role == SuiteRole::kPredict && row.latency_s) {
      res.ape = p.result.fits ? std::abs(*res.predicted_s - *row.latency_s) / *row.latency_s
                              : 1.0;  // a run that worked, predicted not to fit: counted as 100% off
    }
    scored.push_back(Scored(res));
    report.rows.push_back(std::move(res));
  }
  report.summary = Summarize(scored);
  report.summary.refused = refused_rows;
  return report;
}

ScoredRow Scored(const SuiteRowResult& r) {
  ScoredRow s;
  s.group = r.row->group;
  s.publisher = PublisherOf(*r.row);
  s.runtime = r.row->runtime;
  s.origin = r.row->origin;
  s.line = r.row->line;
  s.gpus = r.row->cluster.gpus;
  s.config = r.config;
  s.published_s = r.row->latency_s;
  s.predicted_s = r.predicted_s;
  s.ape = r.ape;
  s.predict = r.row->role == SuiteRole::kPredict;
  s.best = r.row->best();
  s.compiled = r.row->config && r.row->config->compile != 0;
  s.memory_ape = r.memory_ape;
  return s;
}

nlohmann::json SuiteSummaryJson(const SuiteSummary& s) {
  nlohmann::json j = {{"rows", s.rows},           {"median_ape", s.median_ape}, {"p90_ape", s.p90_ape},
          {"oom_agree", s.oom_agree}, {"oom_rows", s.oom_rows},     {"false_oom", s.false_oom},
          {"choice_sets", s.choice_sets}, {"choice_pass", s.choice_pass}, {"refused", s.refused},
          {"memory_rows", s.memory_rows}, {"memory_median_ape", s.memory_median_ape},
          {"memory_p90_ape", s.memory_p90_ape}};
  if (!s.choice_misses.empty()) {
    nlohmann::json misses = nlohmann::json::array();
    for (const auto& m : s.choice_misses) {
      misses.push_back({{"group", m.group}, {"gpus", m.gpus}, {"chosen", m.chosen},
                        {"chosen_published_s", m.chosen_published_s}, {"chosen_predicted_s", m.chosen_predicted_s},
                        {"fastest", m.fastest}, {"fastest_published_s", m.fastest_published_s},
                        {"fastest_predicted_s", m.fastest_predicted_s}});
    }
    j["choice_misses"] = std::move(misses);
  }
  return j;
}

SuiteSummary Summarize(const std::vector<ScoredRow>& rows) {
  SuiteSummary summary;
  std::vector<double> apes;
  for (const auto& r : rows) {
    if (!r.predict) continue;
    ++summary.rows;
    if (!r.published_s) {
      ++summary.oom_rows;
      summary.oom_agree += !r.predicted_s;
      continue;
    }
    if (!r.predicted_s) ++summary.false_oom;
    if (r.ape) apes.push_back(*r.ape);
  }
  // Choice quality: per (group, GPU count, compiled) with two or more published latencies.
  std::map<std::tuple<std::string, int, bool>, std::vector<const ScoredRow*>> sets;
  for (const auto& r : rows) {
    if (r.predict && r.published_s && r.predicted_s && !r.best) sets[{r.group, r.gpus, r.compiled}].push_back(&r);
  }
  for (const auto& [key, set] : sets) {
    if (set.size() < 2) continue;
    ++summary.choice_sets;
    const ScoredRow* chosen = set.front();
    const ScoredRow* best = set.front();
    for (const auto* r : set) {
      if (*r->predicted_s < *chosen->predicted_s) chosen = r;
      if (*r->published_s < *best->published_s) best = r;
    }
    if (*chosen->published_s <= kChoiceWithin * *best->published_s) {
      ++summary.choice_pass;
      continue;
    }
    summary.choice_misses.push_back({std::get<0>(key), std::get<1>(key), chosen->config, best->config, *chosen->published_s,
                                     *chosen->predicted_s, *best->published_s, *best->predicted_s});
  }
  summary.median_ape = Quantile(apes, 0.5);
  summary.p90_ape = Quantile(apes, 0.9);
  std::vector<double> memory;
  for (const auto& r : rows) {
    if (r.memory_ape) memory.push_back(*r.memory_ape);
  }
  summary.memory_rows = static_cast<int>(memory.size());
  summary.memory_median_ape = Quantile(memory, 0.5);
  summary.memory_p90_ape = Quantile(memory, 0.9);
  return summary;
}

StatusOr<SuiteReport> ValidateSuite(const std::vector<SuiteRow>& rows, const Catalog& catalog, Store* store) {
  std::vector<Fit> base;
  if (store != nullptr) {
    DITUNE_ASSIGN_OR_RETURN(base, store->ActiveFits());
    // Earlier suites' e2e scales must not leak into this one: it recalibrates them.
    base.erase(std::remove_if(base.begin(), base.end(), [](const Fit& f) { return f.kind == kFitKindE2e; }),
               base.end());
  }
  std::vector<Fit> e2e;
  DITUNE_ASSIGN_OR_RETURN(SuiteReport report, PredictSuite(rows, catalog, base, &e2e));
  if (store == nullptr) return report;
  // Every calibrate row becomes an e2e measurement, and the scales name the ones they came from.
  std::vector<Measurement> measurements;
  for (const auto& row : rows) {
    if (row.role != SuiteRole::kCalibrate) continue;
    Measurement m;
    m.source = MeasurementSource::kImport;
    m.kind = row.scope == SuiteScope::kStep ? MeasurementKind::kStep : MeasurementKind::kE2e;
    m.op = row.scope == SuiteScope::kE2e ? "total" : "dit";
    m.backend = "xdit";
    m.device = row.cluster.gpu_id;
    m.ranks = row.cluster.gpus;
    m.params = {{"group", row.group}, {"model", row.workload.model_id}, {"height", row.workload.height},
                {"width", row.workload.width}, {"frames", row.workload.frames}, {"steps", row.workload.steps},
                {"scope", SuiteScopeName(row.scope)}, {"config", row.config_text}, {"source", row.source}};
    m.median = m.p10 = m.p90 = Seconds(*row.latency_s);
    measurements.push_back(std::move(m));
  }
  if (measurements.empty()) return report;
  DITUNE_ASSIGN_OR_RETURN(std::vector<int64_t> ids, store->AddMeasurements(measurements));
  for (auto& f : e2e) {
    for (size_t i = 0; i < measurements.size(); ++i) {
      if (E2eFitKey(measurements[i].device, measurements[i].params["model"]) == f.key) {
        f.measurement_ids.push_back(ids[i]);
      }
    }
  }
  DITUNE_RETURN_IF_ERROR(store->ReplaceFits(e2e));
  return report;
}

double ScopeSeconds(const SimResult& r, SuiteScope scope) {
  switch (scope) {
    case SuiteScope::kE2e: return r.total.value();
    case SuiteScope::kDit: return r.dit.value();
    case SuiteScope::kStep: return r.step.value();
  }
  return r.total.value();
}

}  // namespace ditune
