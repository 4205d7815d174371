#include "calibration/measured_runs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config_rules.h"
#include "costmodels/calibration.h"
#include "calibration/learn.h"
#include "calibration/predict.h"
#include "calibration/validate_suite.h"
#include "core/stats.h"

namespace ditune {
namespace {

std::string GroupOf(const SuiteRow& r) {
  const Workload& w = r.workload;
  return fmt::format("{}/{}/{}x{}{}/{}", r.cluster.gpu_id, w.model_id, w.height, w.width,
                     w.frames > 1 ? fmt::format("x{}", w.frames) : "", w.steps);
}

// One trace's measured / modelled ratio per fit class, and the modelled seconds per step.
struct ClassSample {
  std::map<std::string, double> ratio;
  std::map<std::string, double> modelled_s;
  bool relative = false;
  int64_t id = 0;
};

// The whole number `key` of `p`, `fallback` when absent; InvalidArgument when it is not one.
StatusOr<int> IntParam(const nlohmann::json& p, const char* key, int fallback) {
  if (!p.contains(key)) return fallback;
  if (!p[key].is_number_integer() || p[key].get<int64_t>() < 0 || p[key].get<int64_t>() > 1'000'000) {
    return Status::InvalidArgument(fmt::format("params.{} is not a whole number up to 1000000", key));
  }
  return static_cast<int>(p[key].get<int64_t>());
}

// The class ratios of one profile measurement against `fits` (no class scales among them),
// or the reason there are none.
StatusOr<ClassSample> SampleTrace(const Measurement& m, const Catalog& catalog, const std::vector<Fit>& fits,
                                  std::vector<std::string>* quarantined) {
  const auto& p = m.params;
  if (!p.is_object() || !p.contains("model") || !p["model"].is_string()) {
    return Status::InvalidArgument(
        "its kernel time by class names no workload: ingest the trace with --model, --steps and --config");
  }
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(p["model"].get<std::string>()));
  Workload w{model->id, 0, 0, 0, 0, 0, OutputType::kLatent};
  DITUNE_ASSIGN_OR_RETURN(w.height, IntParam(p, "height", model->default_height));
  DITUNE_ASSIGN_OR_RETURN(w.width, IntParam(p, "width", model->default_width));
  DITUNE_ASSIGN_OR_RETURN(w.frames, IntParam(p, "frames", model->default_frames));
  DITUNE_ASSIGN_OR_RETURN(w.steps, IntParam(p, "steps", model->default_steps));
  DITUNE_ASSIGN_OR_RETURN(w.batch, IntParam(p, "batch", 1));
  DITUNE_ASSIGN_OR_RETURN(const int rank, IntParam(p, "rank", 0));
  if (p.contains("config") && !p["config"].is_string()) return Status::InvalidArgument("params.config is not text");
  DITUNE_ASSIGN_OR_RETURN(ParallelConfig config, ParseParallelConfig(p.value("config", "")));
  if (config.world_size() != m.ranks) {
    return Status::InvalidArgument(fmt::format("its configuration '{}' runs on {} GPUs, the trace's run on {}",
                                               ToString(config), config.world_size(), m.ranks));
  }
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*model, w));
  DITUNE_RETURN_IF_ERROR(ValidateConfig({model, tokens, w.steps, w.batch, m.ranks}, config));
  DITUNE_ASSIGN_OR_RETURN(Cluster cluster, ResolveCluster(ClusterSpec{m.device, m.ranks}, catalog));
  DITUNE_ASSIGN_OR_RETURN(CostModels models, ModelsFor(cluster, model->id, fits, "cuda", Runtime::kEager));
  models.compute.set_scale(1.0);
  SimInput in{model, w, &cluster, config, &models.compute, models.comm.get()};
  DITUNE_ASSIGN_OR_RETURN(auto loop, ModelledClassTimes(in, rank >= 0 && rank < m.ranks ? rank : 0));
  ClassSample sample;
  sample.id = m.id;
  // Measured seconds of one class: a number >= 0 (0 when absent).
  auto seconds = [](const nlohmann::json& by_class, const char* cls) -> StatusOr<double> {
    if (!by_class.contains(cls)) return 0.0;
    if (!by_class[cls].is_number() || !(by_class[cls].get<double>() >= 0)) {
      return Status::InvalidArgument(fmt::format("its GPU time of class '{}' is not seconds >= 0", cls));
    }
    return by_class[cls].get<double>();
  };
  const nlohmann::json* measured = nullptr;
  if (p.contains("gpu_kernel_s_per_step") && p["gpu_kernel_s_per_step"].is_object()) {
    measured = &p["gpu_kernel_s_per_step"];
  } else if (p.contains("gpu_kernel_s") && p["gpu_kernel_s"].is_object()) {
    measured = &p["gpu_kernel_s"];
    sample.relative = true;
  } else {
    return Status::InvalidArgument("no GPU kernel time by class in its params");
  }
  double measured_sum = 0, modelled_sum = 0;
  for (const auto& c : TraceClasses()) {
    double modelled = 0;
    for (OpClass op : c.ops) modelled += loop[static_cast<int>(op)].value() / w.steps;
    sample.modelled_s[c.fit] = modelled;
    DITUNE_ASSIGN_OR_RETURN(const double x, seconds(*measured, c.trace));
    if (!(x > 0) || !(modelled > 0)) continue;
    sample.ratio[c.fit] = x / modelled;
    measured_sum += x;
    modelled_sum += modelled;
  }
  // Without a time per step only the proportions are known: the measured share of each class
  // over its modelled share.
  if (sample.relative) {
    for (auto& [cls, r] : sample.ratio) r *= modelled_sum / measured_sum;
  }
  for (auto it = sample.ratio.begin(); it != sample.ratio.end();) {
    if (it->second >= kMinClassScale && it->second <= kMaxClassScale) {
      ++it;
      continue;
    }
    quarantined->push_back(fmt::format(
        "{} kernels quarantined: {:.3g}x their modelled time{} is outside [{}, {}] (a trace of another workload or "
        "configuration than the ingest was given, or ProfilerStep windows of one denoising step rather than one "
        "generation?)",
        it->first, it->second, sample.relative ? " (relative to the other classes)" : "", kMinClassScale,
        kMaxClassScale));
    it = sample.ratio.erase(it);
  }
  return sample;
}

// The kernel_class fits of the profile measurements: per GPU, the median ratio per class over
// its traces with a time per step, else over its relative ones.
StatusOr<std::vector<Fit>> FitKernelClasses(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                            const std::vector<Fit>& fits, std::vector<std::string>* skipped) {
  auto note = [&](const Measurement& m, const std::string& why) {
    if (skipped != nullptr) skipped->push_back(fmt::format("measurement {} (profiler trace): {}", m.id, why));
  };
  std::vector<Fit> base;
  for (const auto& f : fits) {
    if (f.kind != kFitKindKernelClass) base.push_back(f);
  }
  std::map<std::string, std::vector<ClassSample>> by_gpu;
  for (const auto& m : measurements) {
    if (m.kind != MeasurementKind::kE2e || m.op != "profile" || m.backend != "xdit") continue;
    std::vector<std::string> quarantined;
    auto sample = SampleTrace(m, catalog, base, &quarantined);
    if (!sample.ok()) {
      note(m, sample.status().message());
      continue;
    }
    for (const auto& q : quarantined) note(m, q);
    if (!sample->ratio.empty()) by_gpu[m.device].push_back(std::move(*sample));
  }
  std::vector<Fit> out;
  for (auto& [gpu, all] : by_gpu) {
    std::vector<ClassSample> used;
    for (const auto& s : all) {
      if (!s.relative) used.push_back(s);
    }
    const bool relative = used.empty();
    if (relative) used = all;
    Fit f;
    f.kind = kFitKindKernelClass;
    f.key = gpu;
    nlohmann::json weights = nlohmann::json::object();
    double error = 0;
    int errors = 0;
    for (const auto& c : TraceClasses()) {
      std::vector<double> ratios;
      double weight = 0;
      for (const auto& s : used) {
        weight += s.modelled_s.at(c.fit) / static_cast<double>(used.size());
        if (s.ratio.count(c.fit)) ratios.push_back(s.ratio.at(c.fit));
      }
      weights[c.fit] = weight;
      if (ratios.empty()) continue;
      const double k = Median(ratios);
      f.params[c.fit] = k;
      for (double r : ratios) {
        error += std::abs(k / r - 1);
        ++errors;
      }
    }
    std::vector<std::string> ids;
    for (const auto& s : used) {
      f.measurement_ids.push_back(s.id);
      ids.push_back(std::to_string(s.id));
    }
    f.params["weights_s"] = weights;
    f.params["relative"] = relative;
    f.params["origin"] = fmt::format("profiler trace{} (measurement{} {})", used.size() > 1 ? "s" : "",
                                     used.size() > 1 ? "s" : "", fmt::join(ids, ", "));
    f.points = static_cast<int>(used.size());
    f.mape = errors > 0 ? error / errors : 0;
    out.push_back(std::move(f));
  }
  return out;
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

QuarantineCheck CheckAgainstPrediction(const SuiteRow& row, double measured_s, double predicted_s,
                                       const IntervalTable* bands) {
  QuarantineCheck q;
  const double r = std::log(measured_s / predicted_s);
  const double ratio = std::log(kQuarantineRatio);
  q.lo = -ratio;
  q.hi = ratio;
  if (bands != nullptr) {
    const PredictionInterval band = IntervalFor(*bands, row.runtime, Provenance::kPublished, predicted_s);
    q.lo = std::log(band.lo_s / predicted_s);
    q.hi = std::log(band.hi_s / predicted_s);
  }
  if (std::abs(r) > ratio) {
    q.verdict = QuarantineCheck::kQuarantined;
    q.why = fmt::format("more than {}x apart", kQuarantineRatio);
  } else if (bands != nullptr && (r > 2 * q.hi || r < 2 * q.lo)) {
    q.verdict = QuarantineCheck::kQuarantined;
    q.why = fmt::format("{:+.0f}%, beyond twice its 80% interval's {:+.0f}% .. {:+.0f}%", 100 * std::expm1(r),
                        100 * std::expm1(q.lo), 100 * std::expm1(q.hi));
  } else if (bands != nullptr && (r > q.hi || r < q.lo)) {
    q.verdict = QuarantineCheck::kOutside;
  }
  return q;
}

StatusOr<std::string> LikelyCause(const SuiteRow& row, double measured_s, double predicted_s, const Catalog& catalog,
                                  const std::vector<Fit>& fits) {
  // The same run timed as the other scope: the DiT alone for a whole-pipeline run, or the
  // whole pipeline for a DiT-only one.
  if (row.scope == SuiteScope::kE2e || row.scope == SuiteScope::kDit) {
    SuiteRow other = row;
    other.scope = row.scope == SuiteScope::kE2e ? SuiteScope::kDit : SuiteScope::kE2e;
    DITUNE_ASSIGN_OR_RETURN(std::optional<double> alt, PredictRowLatency(other, catalog, fits));
    if (alt && *alt > 0 &&
        std::abs(std::log(measured_s / *alt)) < 0.5 * std::abs(std::log(measured_s / predicted_s))) {
      return row.scope == SuiteScope::kE2e
                 ? fmt::format("the text encoding and VAE decode are not in the timing: the DiT alone is predicted "
                               "at {:.3g} s (a latent-output run, or a timer around the denoising loop; record it "
                               "with --output-type latent)",
                               *alt)
                 : fmt::format("the text encoding and VAE decode are in the timing: the whole pipeline is "
                               "predicted at {:.3g} s",
                               *alt);
    }
  }
  if (measured_s > predicted_s) {
    return std::string(
        "a timed call without warm-up (the first call compiles kernels and autotunes), a GPU shared or "
        "throttled while it ran, or a regression in the runtime or driver");
  }
  return std::string("a log of another configuration, step count or resolution than recorded, or a faster runtime "
                     "version than the one ditune's constants describe");
}

StatusOr<std::vector<Fit>> FitMeasuredRuns(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                           const std::vector<Fit>& given, std::vector<std::string>* skipped) {
  auto note = [&](const Measurement& m, const std::string& why) {
    if (skipped != nullptr) {
      skipped->push_back(fmt::format("measurement {} ({}): {}", m.id, m.op == "launch" ? "profiler trace" : "xDiT run",
                                     why));
    }
  };
  // Profiler traces first: the class efficiencies then price the runs.
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> out, FitKernelClasses(measurements, catalog, given, skipped));
  std::vector<Fit> fits = given;
  for (const auto& f : out) {
    std::erase_if(fits, [&](const Fit& g) { return g.kind == f.kind && g.key == f.key; });
    fits.push_back(f);
  }
  std::vector<SuiteRow> rows;
  std::vector<const Measurement*> used;
  // Each run against its prediction's 80% interval (the shipped bands). Far outside it, the
  // run is quarantined with its likely cause. A multi-GPU run refines its GPU's constants
  // only beside a second run on that GPU that agrees. An accepted run (`ditune calibrate
  // accept`) counts as it is.
  DITUNE_ASSIGN_OR_RETURN(std::optional<IntervalTable> bands, ShippedIntervals(catalog.data_dir()));
  struct Held {
    SuiteRow row;
    const Measurement* measurement;
    double residual;  // ln(measured / predicted)
    double lo, hi;    // the band's edges, in the same log terms
  };
  std::vector<Held> held;
  // Every run not quarantined, held ones too: a peak memory needs no agreement on time.
  std::vector<std::pair<SuiteRow, const Measurement*>> peaks;
  for (auto& run : MeasuredXditRuns(measurements, catalog)) {
    if (!run.row) {
      note(*run.measurement, run.skipped);
      continue;
    }
    const bool accepted = run.measurement->params.is_object() && run.measurement->params.value("accepted", false);
    DITUNE_ASSIGN_OR_RETURN(std::optional<double> predicted, PredictRowLatency(*run.row, catalog, fits));
    const double measured = *run.row->latency_s;
    if (!accepted && predicted && *predicted > 0) {
      const QuarantineCheck q = CheckAgainstPrediction(*run.row, measured, *predicted, bands ? &*bands : nullptr);
      if (q.verdict == QuarantineCheck::kQuarantined) {
        DITUNE_ASSIGN_OR_RETURN(std::string cause, LikelyCause(*run.row, measured, *predicted, catalog, fits));
        note(*run.measurement, fmt::format("quarantined: {:.3g} s measured against {:.3g} s predicted ({}); likely "
                                           "{}. `ditune calibrate accept {}` counts it",
                                           measured, *predicted, q.why, cause, run.measurement->id));
        continue;
      }
      if (run.row->role == SuiteRole::kPredict) {
        held.push_back({*run.row, run.measurement, std::log(measured / *predicted), q.lo, q.hi});
        peaks.emplace_back(*run.row, run.measurement);
        continue;
      }
    }
    rows.push_back(*run.row);
    used.push_back(run.measurement);
    peaks.emplace_back(*run.row, run.measurement);
  }
  // A multi-GPU run counts once another on its GPU agrees: its deviation from the prediction
  // within the band's width of this one's. One slow run alone (a regression the user is
  // reporting, a shared GPU) refines nothing for everyone using the store; runs that agree
  // count, each of them.
  for (const Held& h : held) {
    int agree = 0;
    for (const Held& o : held) {
      if (&o == &h || o.row.cluster.gpu_id != h.row.cluster.gpu_id) continue;
      agree += std::abs(o.residual - h.residual) <= (h.hi - h.lo);
    }
    if (agree == 0) {
      note(*h.measurement,
           fmt::format("held: {:.3g} s measured is {:+.0f}% from its prediction (80% interval {:+.0f}% .. "
                       "{:+.0f}%), and no other run on {} agrees; a run refines its GPU's constants beside one that "
                       "does, or after `ditune calibrate accept {}`",
                       *h.row.latency_s, 100 * std::expm1(h.residual), 100 * std::expm1(h.lo), 100 * std::expm1(h.hi),
                       h.row.cluster.gpu_id, h.measurement->id));
      continue;
    }
    rows.push_back(h.row);
    used.push_back(h.measurement);
  }
  // One-GPU runs: the (GPU, model) compute scale, measured / modelled at scale 1 — a scale
  // of 1 present, so that the class efficiencies apply normalised, as beside the fitted one.
  std::vector<Fit> unscaled;
  for (const auto& f : fits) {
    if (f.kind != kFitKindE2e || f.key.find('/') != f.key.rfind('/')) unscaled.push_back(f);
  }
  std::set<std::string> calibrated;
  for (const auto& row : rows) {
    if (row.role == SuiteRole::kCalibrate) calibrated.insert(E2eFitKey(row.cluster.gpu_id, row.workload.model_id));
  }
  for (const auto& key : calibrated) {
    unscaled.push_back(UnitComputeScale(key));
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
  std::vector<Fit> scales;
  for (const auto& [key, v] : ratios) {
    Fit f;
    f.kind = kFitKindE2e;
    f.key = key;
    f.params = {{"compute_scale", Median(v.first)}};
    f.points = static_cast<int>(v.first.size());
    f.measurement_ids = v.second;
    scales.push_back(std::move(f));
  }
  // Then refined until the runs are reproduced (host time does not scale).
  std::vector<Fit> others;
  for (const auto& f : unscaled) {
    if (f.kind != kFitKindE2e || ratios.count(f.key) == 0) others.push_back(f);
  }
  std::vector<const SuiteRow*> calibrate_rows;
  for (const auto& row : rows) {
    if (row.role == SuiteRole::kCalibrate) calibrate_rows.push_back(&row);
  }
  DITUNE_RETURN_IF_ERROR(RefineComputeScales(calibrate_rows, catalog, others, &scales));
  out.insert(out.end(), scales.begin(), scales.end());
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
  for (const auto& f : out) {
    if (f.kind == kFitKindE2e) with_scales.push_back(f);
  }
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
      opt.start.eager_op_us = Median(it->second.first);  // measured; LearnOptions keeps it fixed
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
  for (const auto& [row, measurement] : peaks) {
    const auto& p = measurement->params;
    if (!p.contains("peak_memory_gb") || !p["peak_memory_gb"].is_number()) continue;
    const ModelSpec& model = **catalog.Model(row.workload.model_id);
    const GpuSpec& gpu = **catalog.Gpu(row.cluster.gpu_id);
    const double peak_gb = p["peak_memory_gb"].get<double>();
    if (!(peak_gb > 0) || peak_gb * 1e9 > gpu.memory.value()) {
      // A store written before ingest checked this: one impossible peak would price every
      // later plan on the GPU as not fitting.
      if (skipped != nullptr) {
        skipped->push_back(fmt::format("measurement {} (xDiT run): peak memory {} GB is beyond {}'s {:.0f} GB; left "
                                       "out of the runtime overhead",
                                       measurement->id, peak_gb, gpu.id, gpu.memory.value() / 1e9));
      }
      continue;
    }
    DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, row.workload));
    const MemoryBreakdown mb = RankMemory(model, tokens, row.workload, *row.config, gpu);
    const Bytes overhead = FitRuntimeOverhead(mb, Gigabytes(p["peak_memory_gb"].get<double>()));
    auto& [v, ids] = overheads[E2eFitKey(row.cluster.gpu_id, model.id)];
    v.push_back(overhead.value() / 1e9);
    ids.push_back(measurement->id);
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

Status CheckXditRunConfig(const nlohmann::json& p, const Catalog& catalog) {
  if (!p.is_object() || !p.contains("config") || !p["config"].is_string()) return Status::Ok();
  if (!p.contains("model") || !p["model"].is_string()) {
    return Status::InvalidArgument("the run names a configuration but no model");
  }
  auto number = [&](const char* key, int fallback) {
    if (!p.contains(key) || !p[key].is_number_integer()) return fallback;
    const int64_t v = p[key].get<int64_t>();
    return v >= 0 && v <= 1'000'000'000 ? static_cast<int>(v) : -1;  // out of range: refused below
  };
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(p["model"].get<std::string>()));
  Workload w{model->id, number("height", model->default_height), number("width", model->default_width),
             number("frames", model->default_frames), number("steps", model->default_steps), number("batch", 1),
             OutputType::kDecoded};
  DITUNE_ASSIGN_OR_RETURN(ParallelConfig config, ParseParallelConfig(p["config"].get<std::string>()));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*model, w));
  const int gpus = number("gpus", config.world_size());
  if (gpus != config.world_size()) {
    return Status::InvalidArgument(fmt::format("the run's configuration '{}' needs {} GPUs; it ran on {}",
                                               Label(config), config.world_size(), gpus));
  }
  ValidationContext ctx{model, tokens, w.steps, w.batch, gpus};
  if (model->runtime("xdit") != nullptr) ctx.runtime = "xdit";
  return ValidateConfig(ctx, config).WithContext(fmt::format("{}x{}", w.height, w.width));
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
