#include "planner/validate_suite.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/validate.h"
#include "planner/enumerate.h"
#include "planner/predict.h"

namespace ditune {
namespace {

double Metric(const SimResult& r, SuiteScope scope) {
  switch (scope) {
    case SuiteScope::kE2e: return r.total.value();
    case SuiteScope::kDit: return r.dit.value();
    case SuiteScope::kStep: return r.step.value();
  }
  return r.total.value();
}

struct Prediction {
  ParallelConfig config;
  SimResult result;
};

// The prediction of a row's config, or of the fastest feasible config for "best".
StatusOr<Prediction> PredictRow(const SuiteRow& row, const Catalog& catalog, const std::vector<Fit>& fits) {
  DITUNE_ASSIGN_OR_RETURN(Cluster cluster, ResolveCluster(row.cluster, catalog));
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(row.workload.model_id));
  DITUNE_ASSIGN_OR_RETURN(CostModels models, ModelsFor(cluster, model->id, fits));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*model, row.workload));
  ValidationContext ctx{model, tokens, row.workload.steps, row.workload.batch, cluster.gpus()};
  std::vector<ParallelConfig> candidates;
  if (row.best()) {
    candidates = EnumerateConfigs(ctx, cluster);
    if (candidates.empty()) return Status::Infeasible(fmt::format("line {}: no valid configuration", row.line));
  } else {
    Status v = ValidateConfig(ctx, *row.config);
    if (!v.ok()) return v.WithContext(fmt::format("line {}", row.line));
    candidates = {*row.config};
  }
  std::optional<Prediction> best;
  for (const auto& c : candidates) {
    SimInput in{model, row.workload, &cluster, c, &models.compute, models.comm.get()};
    SimOptions sim;
    sim.terms = models.terms;
    DITUNE_ASSIGN_OR_RETURN(SimResult r, Simulate(in, sim));
    const bool better = !best || (r.fits && !best->result.fits) ||
                        (r.fits == best->result.fits && Metric(r, row.scope) < Metric(best->result, row.scope));
    if (better) best = Prediction{c, std::move(r)};
  }
  return *best;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * (static_cast<double>(v.size()) - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

StatusOr<SuiteReport> ValidateSuite(const std::vector<SuiteRow>& rows, const Catalog& catalog, Store* store) {
  std::vector<Fit> base;
  if (store != nullptr) {
    DITUNE_ASSIGN_OR_RETURN(base, store->ActiveFits());
    // Earlier suites' e2e scales must not leak into this one: it recalibrates them.
    base.erase(std::remove_if(base.begin(), base.end(), [](const Fit& f) { return f.kind == kFitKindE2e; }),
               base.end());
  }
  // Calibrate: measured / modelled per calibrate row, pooled (median) per (GPU, model).
  std::map<std::string, std::vector<std::pair<double, double>>> ratios;  // key -> (modelled, measured)
  std::map<std::string, std::vector<int64_t>> ids;
  std::vector<Measurement> measurements;
  for (const auto& row : rows) {
    if (row.role != SuiteRole::kCalibrate) continue;
    DITUNE_ASSIGN_OR_RETURN(Prediction p, PredictRow(row, catalog, base));
    const std::string key = E2eFitKey(row.cluster.gpu_id, row.workload.model_id);
    ratios[key].emplace_back(Metric(p.result, row.scope), *row.latency_s);
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
  if (store != nullptr && !measurements.empty()) {
    DITUNE_ASSIGN_OR_RETURN(std::vector<int64_t> new_ids, store->AddMeasurements(measurements));
    for (size_t i = 0; i < measurements.size(); ++i) {
      ids[E2eFitKey(measurements[i].device, measurements[i].params["model"])].push_back(new_ids[i]);
    }
  }
  std::vector<Fit> fits = base;
  std::vector<Fit> e2e;
  for (const auto& [key, pairs] : ratios) {
    std::vector<double> modelled, measured;
    for (auto [a, b] : pairs) {
      modelled.push_back(a);
      measured.push_back(b);
    }
    DITUNE_ASSIGN_OR_RETURN(Fit f, ScaleFit(key, "compute_scale", modelled, measured, ids[key]));
    e2e.push_back(f);
  }
  fits.insert(fits.end(), e2e.begin(), e2e.end());
  if (store != nullptr && !e2e.empty()) DITUNE_RETURN_IF_ERROR(store->ReplaceFits(e2e));

  SuiteReport report;
  std::vector<double> apes;
  for (const auto& row : rows) {
    SuiteRowResult res;
    res.row = &row;
    DITUNE_ASSIGN_OR_RETURN(Prediction p, PredictRow(row, catalog, fits));
    res.config = Label(p.config);
    res.feasible = p.result.fits;
    if (p.result.fits) res.predicted_s = Metric(p.result, row.scope);
    if (row.role == SuiteRole::kPredict) {
      ++report.summary.rows;
      if (!row.latency_s) {
        ++report.summary.oom_rows;
        report.summary.oom_agree += !p.result.fits;
      } else if (!p.result.fits) {
        ++report.summary.false_oom;
        res.ape = 1.0;  // a run that worked, predicted not to fit: counted as 100% off
        apes.push_back(1.0);
      } else {
        res.ape = std::abs(*res.predicted_s - *row.latency_s) / *row.latency_s;
        apes.push_back(*res.ape);
      }
    }
    report.rows.push_back(std::move(res));
  }
  // Choice quality: per (group, GPU count) with two or more published latencies.
  std::map<std::pair<std::string, int>, std::vector<const SuiteRowResult*>> sets;
  for (const auto& r : report.rows) {
    if (r.row->role == SuiteRole::kPredict && r.row->latency_s && r.predicted_s && !r.row->best()) {
      sets[{r.row->group, r.row->cluster.gpus}].push_back(&r);
    }
  }
  for (const auto& [key, set] : sets) {
    if (set.size() < 2) continue;
    ++report.summary.choice_sets;
    const SuiteRowResult* chosen = set.front();
    double fastest = *set.front()->row->latency_s;
    for (const auto* r : set) {
      if (*r->predicted_s < *chosen->predicted_s) chosen = r;
      fastest = std::min(fastest, *r->row->latency_s);
    }
    report.summary.choice_pass += *chosen->row->latency_s <= 1.10 * fastest;
  }
  report.summary.median_ape = Quantile(apes, 0.5);
  report.summary.p90_ape = Quantile(apes, 0.9);
  return report;
}

}  // namespace ditune
