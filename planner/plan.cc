#include "planner/plan.h"

#include "calibration/factory.h"
#include "calibration/measured_runs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/enum_names.h"
#include "core/parallel_for.h"

#include "costmodels/memory_model.h"
#include "calibration/predict.h"

namespace ditune {
namespace {

double Score(const Candidate& c, Objective o) {
  switch (o) {
    case Objective::kLatency: return c.result.total.value();
    case Objective::kThroughput: return -c.images_per_s;
    case Objective::kGpuSeconds: return c.gpu_s_per_image;
  }
  return c.result.total.value();
}

std::string Pct(double part, double whole) { return fmt::format("{:.0f}%", whole > 0 ? 100 * part / whole : 0); }

// What holds a configuration back, in numbers: its largest loss over the whole generation
// against pure compute.
std::string Weakness(const Candidate& c, const Cluster& cluster, int steps) {
  const SimResult& r = c.result;
  const StepBreakdown& b = r.steady;
  const double step = r.step.value();
  const double n = std::max(0, steps - (r.warmup.value() > 0 ? 1 : 0));
  const double total = r.total.value();
  struct Loss {
    double seconds;
    std::string text;
  };
  const std::vector<Loss> losses = {
      {n * b.exposed_comm.value(),
       fmt::format("{} of its time is communication it cannot hide ({} of each step, over {}{})",
                   Pct(n * b.exposed_comm.value(), total), Pct(b.exposed_comm.value(), step), cluster.intra->id,
                   cluster.nodes() > 1 ? " and " + cluster.inter->id : "")},
      {n * b.bubble.value(), fmt::format("{} of its time is pipeline bubble", Pct(n * b.bubble.value(), total))},
      {n * b.host_wait.value(),
       fmt::format("{} of its time waits for the host to issue kernels (too little work per GPU for eager "
                   "execution)",
                   Pct(n * b.host_wait.value(), total))},
      {r.warmup.value(), fmt::format("{} of its time is synchronous warm-up ({:.2f} s)", Pct(r.warmup.value(), total),
                                     r.warmup.value())},
      {r.imbalance * r.dit.value(), fmt::format("its ranks are {:.0f}% imbalanced", 100 * r.imbalance)},
  };
  auto worst = std::max_element(losses.begin(), losses.end(),
                                [](const Loss& x, const Loss& y) { return x.seconds < y.seconds; });
  if (worst->seconds <= 0.02 * total) return "is compute-bound: it simply has more compute per GPU";
  return worst->text;
}

// Simulates one configuration with the calibrated models and scores it.
StatusOr<Candidate> SimulateCandidate(const ModelSpec& model, const Workload& workload, const Cluster& cluster,
                                      const ParallelConfig& c, const CostModels& models, SimOptions sim) {
  SimInput in{&model, workload, &cluster, c, &models.compute, models.comm.get()};
  sim.terms = models.terms;
  sim.every_rank = false;  // a stage's figures are each of its ranks'; thousands of candidates are kept
  DITUNE_ASSIGN_OR_RETURN(SimResult r, Simulate(in, sim));
  Candidate cand{c, std::move(r)};
  cand.images_per_s = workload.batch / cand.result.total.value();
  cand.gpu_s_per_image = cand.result.total.value() * cluster.gpus() / workload.batch;
  return cand;
}

}  // namespace

constexpr EnumName<PlanFor> kPlanForNames[] = {
    {PlanFor::kXdit, "xdit"},
    {PlanFor::kDitune, "ditune"},
};

std::string_view PlanForName(PlanFor p) { return NameIn(kPlanForNames, p); }

StatusOr<PlanFor> ParsePlanFor(std::string_view s) { return ParseIn(kPlanForNames, s, "--executor"); }

constexpr EnumName<Objective> kObjectiveNames[] = {
    {Objective::kLatency, "latency"},
    {Objective::kThroughput, "throughput"},
    {Objective::kGpuSeconds, "gpu-seconds"},
};

std::string_view ObjectiveName(Objective o) { return NameIn(kObjectiveNames, o); }

StatusOr<Objective> ParseObjective(std::string_view s) { return ParseIn(kObjectiveNames, s, "--objective"); }

// Ranks the simulated candidates, adds the single-GPU reference and the explanation.
StatusOr<Plan> FinishPlan(const Catalog& catalog, const ModelSpec& model_spec, const TokenGeometry& tokens,
                          const CostModels& models, std::vector<Candidate> all, const PlanOptions& opt, Plan plan) {
  const ModelSpec* model = &model_spec;
  const Workload& workload = plan.workload;
  const Cluster& cluster = plan.cluster;
  std::stable_sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
    return Score(a, opt.objective) < Score(b, opt.objective);
  });
  // A rank order that changes nothing is noise: keep a non-default order only where it is
  // predicted better than xDiT's default order of the same degrees.
  {
    std::map<std::string, double> default_score;
    for (const auto& c : all) {
      if (c.config.order == kDefaultRankOrder) default_score[ToString(c.config)] = Score(c, opt.objective);
    }
    std::vector<Candidate> kept;
    for (auto& c : all) {
      if (c.config.order != kDefaultRankOrder) {
        ParallelConfig d = c.config;
        d.order = kDefaultRankOrder;
        auto it = default_score.find(ToString(d));
        if (it != default_score.end() && !(Score(c, opt.objective) < it->second - 1e-9 * std::abs(it->second))) {
          continue;
        }
      }
      kept.push_back(std::move(c));
    }
    all = std::move(kept);
  }
  // The single-GPU reference for speedup and efficiency.
  if (cluster.gpus() > 1) {
    ClusterSpec one = cluster.spec;
    one.gpus = 1;
    one.nodes = 1;
    one.gpus_per_node = 1;
    one.inter_id = "none";
    Cluster single = cluster;
    single.spec = one;
    auto none = catalog.Link("none");
    if (!none.ok()) return none.status().WithContext("the single-GPU reference needs the link 'none'");
    single.inter = *none;
    // One GPU as a whole pipeline, or, where that does not fit and xDiT offloads the model,
    // with model CPU offload.
    ParallelConfig one_gpu;
    ValidationContext ctx1{model, tokens, workload.steps, workload.batch, 1};
    MemoryBreakdown mem = RankMemory(*model, tokens, workload, one_gpu, *cluster.gpu, opt.sim.memory);
    if (!mem.fits() && opt.executor == PlanFor::kXdit && !cluster.gpu->is_cpu) {
      one_gpu.offload = 1;
      ctx1.xdit = true;
      mem = RankMemory(*model, tokens, workload, one_gpu, *cluster.gpu, opt.sim.memory);
    }
    if (mem.fits() && IsValidConfig(ctx1, one_gpu)) {
      CostModels single_models{models.compute, std::make_unique<CommModel>(single), models.terms};
      auto c = SimulateCandidate(*model, workload, single, one_gpu, single_models, opt.sim);
      if (c.ok()) plan.single_gpu = std::move(*c);
    }
  }
  // Explanation: the winner's numbers, then what holds each runner-up back.
  const Candidate& best = all.front();
  plan.explanation.push_back(fmt::format(
      "{} wins on {}: {:.3f} s per generation ({:.2f} images/s, {:.1f} GPU-s per image); per step {:.1f} ms of "
      "which compute {}, exposed communication {}, bubble {}, host wait {}",
      Label(best.config), ObjectiveName(opt.objective), best.result.total.value(), best.images_per_s,
      best.gpu_s_per_image, 1e3 * best.result.step.value(), Pct(best.result.steady.compute.value(), best.result.step.value()),
      Pct(best.result.steady.exposed_comm.value(), best.result.step.value()),
      Pct(best.result.steady.bubble.value(), best.result.step.value()),
      Pct(best.result.steady.host_wait.value(), best.result.step.value())));
  if (plan.single_gpu) {
    const double speedup = plan.single_gpu->result.total.value() / best.result.total.value();
    plan.explanation.push_back(fmt::format("{:.2f}x faster than one GPU ({:.3f} s), {:.0f}% parallel efficiency",
                                           speedup, plan.single_gpu->result.total.value(),
                                           100 * speedup / cluster.gpus()));
  }
  if (best.config.offload != 0) {
    ParallelConfig whole = best.config;
    whole.offload = 0;
    const OffloadTraffic moves = OffloadMoves(*model, best.config);
    plan.explanation.push_back(fmt::format(
        "model CPU offload (xDiT's --enable_model_cpu_offload): the whole pipeline needs {:.1f} GB per GPU of "
        "{:.1f} usable; with each part on the GPU only while it runs, {:.1f} GB; {:.1f} GB of weights cross the "
        "host link per generation, there and back (in the text/VAE times)",
        RankMemory(*model, tokens, workload, whole, *cluster.gpu, opt.sim.memory).peak().value() / 1e9,
        best.result.ranks.front().memory.capacity.value() / 1e9, best.result.peak_memory.value() / 1e9,
        (moves.before_loop + moves.after_loop).value() / 1e9));
  }
  const double fixed = best.result.text_encode.value() + best.result.vae_decode.value();
  if (fixed > 0.1 * best.result.total.value()) {
    plan.explanation.push_back(fmt::format(
        "text encoding and VAE decode take {:.0f}% of the winner's time and do not shrink with more GPUs",
        100 * fixed / best.result.total.value()));
  }
  for (size_t i = 1; i < all.size() && i < static_cast<size_t>(std::max(2, opt.top_k)); ++i) {
    const Candidate& c = all[i];
    plan.explanation.push_back(fmt::format("{} ({:+.1f}%): {}", Label(c.config),
                                           100 * (Score(c, opt.objective) / Score(best, opt.objective) - 1),
                                           Weakness(c, cluster, workload.steps)));
  }
  if (plan.pruned_memory > 0) {
    plan.explanation.push_back(fmt::format("{} of {} valid configurations do not fit in {:.0f} GB per GPU",
                                           plan.pruned_memory, plan.enumerated, cluster.gpu->memory.value() / 1e9));
  }
  if (best.config.order != kDefaultRankOrder) {
    plan.explanation.push_back(fmt::format(
        "the winner uses rank order {} instead of xDiT's tp-sp-pp-cfg-dp, to keep its chatty groups inside a "
        "node or socket",
        RankOrderToString(best.config.order)));
  }
  all.resize(std::min<size_t>(all.size(), static_cast<size_t>(std::max(1, opt.top_k))));
  if (opt.executor == PlanFor::kXdit && !cluster.gpu->is_cpu) {
    // The line that launches each ranked plan through the model's xDiT entry point.
    for (auto& c : all) {
      auto launch = MakeXditLaunch(*model, workload, cluster, c.config, opt.xdit);
      if (!launch.ok()) return launch.status().WithContext("a ranked plan xDiT cannot run");
      c.xdit = std::move(*launch);
    }
  }
  plan.ranked = std::move(all);
  return plan;
}


namespace {

// What both ways of making a plan start from.
struct PlanStart {
  const ModelSpec* model = nullptr;
  TokenGeometry tokens;
  CostModels models;
  Plan plan;
};

// The options as the executor runs them: xDiT's stage split, and parallel VAE only where the
// model's entry point has it.
PlanOptions ForExecutor(const ModelSpec& model, const Cluster& cluster, PlanOptions opt) {
  const bool xdit = opt.executor == PlanFor::kXdit && !cluster.gpu->is_cpu && model.xdit;
  if (xdit) {
    opt.sim.stage_partition = model.xdit->stages;
    opt.sim.parallel_vae = opt.xdit.parallel_vae && model.xdit->runs(XditMethod::kParallelVae);
  }
  return opt;
}

// How the plan's runs execute: ditune's engine, xDiT under torch.compile (where xDiT's entry
// point compiles for the model), or eager xDiT.
Runtime PlanRuntime(const ModelSpec& model, const Cluster& cluster, const PlanOptions& opt) {
  if (opt.executor == PlanFor::kDitune) return cluster.gpu->is_cpu ? Runtime::kEager : Runtime::kEngine;
  const bool compiled = opt.xdit.torch_compile && !cluster.gpu->is_cpu && model.xdit &&
                        model.xdit->runs(XditMethod::kTorchCompile);
  return compiled ? Runtime::kCompiled : Runtime::kEager;
}

StatusOr<PlanStart> StartPlan(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                              const std::vector<Fit>& fits, const PlanOptions& opt) {
  PlanStart s;
  DITUNE_ASSIGN_OR_RETURN(s.model, catalog.Model(workload.model_id));
  DITUNE_ASSIGN_OR_RETURN(s.tokens, ComputeTokenGeometry(*s.model, workload));
  if (opt.executor == PlanFor::kDitune) DITUNE_RETURN_IF_ERROR(ExecutorRunsModel(*s.model));
  DITUNE_ASSIGN_OR_RETURN(s.models,
                          ModelsFor(cluster, s.model->id, fits, "cuda", PlanRuntime(*s.model, cluster, opt)));
  s.plan.workload = workload;
  s.plan.cluster = cluster;
  s.plan.objective = opt.objective;
  s.plan.executor = opt.executor;
  return s;
}

}  // namespace

StatusOr<Plan> MakePlan(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                        const std::vector<Fit>& fits, const PlanOptions& options) {
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* spec, catalog.Model(workload.model_id));
  PlanOptions opt = ForExecutor(*spec, cluster, options);
  // The runtime overhead the user's runs of this GPU and model measured, if any.
  if (auto overhead = MeasuredRuntimeOverhead(fits, cluster.gpu->id, spec->id)) opt.sim.memory.runtime_overhead = *overhead;
  DITUNE_ASSIGN_OR_RETURN(PlanStart start, StartPlan(catalog, workload, cluster, fits, opt));
  const ModelSpec* model = start.model;
  const TokenGeometry& tokens = start.tokens;
  const CostModels& models = start.models;
  Plan plan = std::move(start.plan);
  ValidationContext ctx{model, tokens, workload.steps, workload.batch, cluster.gpus()};
  // xDiT's rules for GPUs; on the CPU "GPU" the plan is for ditune's engine on the cpu kernels.
  ctx.xdit = opt.executor == PlanFor::kXdit && !cluster.gpu->is_cpu;
  if (ctx.xdit) DITUNE_RETURN_IF_ERROR(XditRunsWorkload(*model, workload));
  std::vector<ParallelConfig> configs =
      EnumerateConfigs(ctx, cluster, ctx.xdit ? XditOnly(opt.enumerate) : opt.enumerate);
  if (ctx.xdit) {
    // Price what xDiT runs: adjusted patch counts and clamped warm-ups, each once.
    std::set<std::string> seen;
    std::vector<ParallelConfig> runs;
    for (const auto& c : configs) {
      ParallelConfig r = XditRunsAs(tokens, workload.steps, c);
      if (seen.insert(ToString(r)).second) runs.push_back(r);
    }
    configs = std::move(runs);
  }
  plan.enumerated = static_cast<int>(configs.size());
  if (configs.empty()) {
    return Status::Infeasible(fmt::format("no valid configuration of {} for {} GPUs{} (see `ditune check`)",
                                          model->id, cluster.gpus(),
                                          ctx.xdit ? " that xDiT runs for it" : ""));
  }
  std::vector<Candidate> all;
  Bytes smallest(std::numeric_limits<double>::infinity());
  const bool can_shard = ctx.xdit && model->xdit->runs(XditMethod::kFullyShard);
  const bool can_offload = ctx.xdit && model->xdit->runs(XditMethod::kCpuOffload);
  // Per configuration that fits (as enumerated, or sharded/offloaded until it does), the
  // variants to simulate; the fastest of each is kept.
  std::vector<ParallelConfig> variants;
  std::vector<size_t> owner;  // variants[i] belongs to the owner[i]-th configuration kept
  size_t kept = 0;
  for (const ParallelConfig& config : configs) {
    // Memory first: it is cheap and rules out configurations without simulating them.
    const MemoryBreakdown mem = RankMemory(*model, tokens, workload, config, *cluster.gpu, opt.sim.memory);
    std::vector<ParallelConfig> fitting;
    if (mem.fits()) fitting.push_back(config);
    smallest = std::min(smallest, mem.peak());
    if (!mem.fits()) {
      // Where it does not fit, xDiT can shard the DiT's weights (the fewest ranks that make it
      // fit) or keep each part of the pipeline on the GPU only while it runs: whichever fits
      // and is faster, the first with both if neither alone fits.
      auto try_fit = [&](const ParallelConfig& v) {
        if (!IsValidConfig(ctx, v)) return false;
        const MemoryBreakdown m = RankMemory(*model, tokens, workload, v, *cluster.gpu, opt.sim.memory);
        smallest = std::min(smallest, m.peak());
        if (m.fits()) fitting.push_back(v);
        return m.fits();
      };
      auto try_shards = [&](ParallelConfig v) {
        for (int f = 2; can_shard && f <= cluster.gpus(); ++f) {
          v.fsdp = f;
          if (try_fit(v)) return;
        }
      };
      ParallelConfig offloaded = config;
      offloaded.offload = 1;
      if (can_offload) try_fit(offloaded);
      try_shards(config);
      if (fitting.empty() && can_offload) try_shards(offloaded);
    }
    if (fitting.empty()) {
      ++plan.pruned_memory;
      continue;
    }
    for (ParallelConfig& c : fitting) {
      variants.push_back(std::move(c));
      owner.push_back(kept);
    }
    ++kept;
  }
  // The simulations are independent: on the host's cores, each into its own slot, then read
  // back in enumeration order, so the ranking (and the first error) is the same on any count.
  std::vector<std::optional<StatusOr<Candidate>>> priced(variants.size());
  ParallelFor(variants.size(), [&](size_t i) {
    priced[i] = SimulateCandidate(*model, workload, cluster, variants[i], models, opt.sim);
  });
  std::vector<std::optional<Candidate>> best(kept);
  for (size_t i = 0; i < variants.size(); ++i) {
    DITUNE_ASSIGN_OR_RETURN(Candidate cand, std::move(*priced[i]));
    std::optional<Candidate>& b = best[owner[i]];
    if (!b || cand.result.total < b->result.total) b = std::move(cand);
  }
  for (auto& b : best) all.push_back(std::move(*b));
  if (all.empty()) {
    return Status::Infeasible(fmt::format(
        "none of the {} valid configurations of {} fits in {:.0f} GB per {}; the smallest needs {:.1f} GB per "
        "GPU — add GPUs, or use a larger GPU",
        plan.enumerated, model->id, cluster.gpu->memory.value() / 1e9, cluster.gpu->id, smallest.value() / 1e9));
  }
  DITUNE_ASSIGN_OR_RETURN(Plan done, FinishPlan(catalog, *model, tokens, models, std::move(all), opt, std::move(plan)));
  for (auto& line : CalibrationSources(fits, done.cluster, model->id)) done.explanation.push_back(std::move(line));
  return done;
}

StatusOr<Plan> MakePlanFromConfigs(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                   const std::vector<Fit>& fits, const PlanOptions& options,
                                   const std::vector<ParallelConfig>& ranked, int enumerated, int pruned_memory) {
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* spec, catalog.Model(workload.model_id));
  PlanOptions opt = ForExecutor(*spec, cluster, options);
  // The runtime overhead the user's runs of this GPU and model measured, if any.
  if (auto overhead = MeasuredRuntimeOverhead(fits, cluster.gpu->id, spec->id)) opt.sim.memory.runtime_overhead = *overhead;
  DITUNE_ASSIGN_OR_RETURN(PlanStart start, StartPlan(catalog, workload, cluster, fits, opt));
  const ModelSpec* model = start.model;
  const TokenGeometry& tokens = start.tokens;
  const CostModels& models = start.models;
  Plan plan = std::move(start.plan);
  plan.enumerated = enumerated;
  plan.pruned_memory = pruned_memory;
  std::vector<Candidate> all;
  for (const auto& c : ranked) {
    ValidationContext ctx{model, tokens, workload.steps, workload.batch, cluster.gpus()};
    ctx.xdit = opt.executor == PlanFor::kXdit && !cluster.gpu->is_cpu;
    DITUNE_RETURN_IF_ERROR(ValidateConfig(ctx, c));
    DITUNE_ASSIGN_OR_RETURN(Candidate cand, SimulateCandidate(*model, workload, cluster, c, models, opt.sim));
    all.push_back(std::move(cand));
  }
  if (all.empty()) return Status::InvalidArgument("no configurations to plan with");
  DITUNE_ASSIGN_OR_RETURN(Plan done, FinishPlan(catalog, *model, tokens, models, std::move(all), opt, std::move(plan)));
  for (auto& line : CalibrationSources(fits, done.cluster, model->id)) done.explanation.push_back(std::move(line));
  return done;
}

StatusOr<std::vector<StatusOr<Candidate>>> PriceConfigs(const Catalog& catalog, const Workload& workload,
                                                         const Cluster& cluster, const std::vector<Fit>& fits,
                                                         const PlanOptions& options,
                                                         const std::vector<ParallelConfig>& configs) {
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* spec, catalog.Model(workload.model_id));
  PlanOptions opt = ForExecutor(*spec, cluster, options);
  if (auto overhead = MeasuredRuntimeOverhead(fits, cluster.gpu->id, spec->id)) opt.sim.memory.runtime_overhead = *overhead;
  DITUNE_ASSIGN_OR_RETURN(PlanStart start, StartPlan(catalog, workload, cluster, fits, opt));
  std::vector<StatusOr<Candidate>> out;
  out.reserve(configs.size());
  for (const auto& c : configs) {
    ValidationContext ctx{start.model, start.tokens, workload.steps, workload.batch, cluster.gpus()};
    ctx.xdit = opt.executor == PlanFor::kXdit && !cluster.gpu->is_cpu;
    if (Status st = ValidateConfig(ctx, c); !st.ok()) {
      out.push_back(st);
      continue;
    }
    out.push_back(SimulateCandidate(*start.model, workload, cluster, c, start.models, opt.sim));
  }
  return out;
}

StatusOr<SimResult> SimulateAsPlanned(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                      const std::vector<Fit>& fits, const PlanOptions& options,
                                      const ParallelConfig& config, ParallelConfig* priced_as,
                                      TaskScheduler* scheduler, bool every_rank) {
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* spec, catalog.Model(workload.model_id));
  PlanOptions opt = ForExecutor(*spec, cluster, options);
  if (auto overhead = MeasuredRuntimeOverhead(fits, cluster.gpu->id, spec->id)) opt.sim.memory.runtime_overhead = *overhead;
  DITUNE_ASSIGN_OR_RETURN(PlanStart start, StartPlan(catalog, workload, cluster, fits, opt));
  ValidationContext ctx{start.model, start.tokens, workload.steps, workload.batch, cluster.gpus()};
  ctx.xdit = opt.executor == PlanFor::kXdit && !cluster.gpu->is_cpu;
  DITUNE_RETURN_IF_ERROR(ValidateConfig(ctx, config));
  if (ctx.xdit) DITUNE_RETURN_IF_ERROR(XditRunsWorkload(*start.model, workload));
  const ParallelConfig c = ctx.xdit ? XditRunsAs(start.tokens, workload.steps, config) : config;
  if (priced_as != nullptr) *priced_as = c;
  SimInput in{start.model, workload, &cluster, c, &start.models.compute, start.models.comm.get()};
  SimOptions sim = opt.sim;
  sim.terms = start.models.terms;
  sim.every_rank = every_rank;
  if (scheduler != nullptr) sim.extrapolate = false;  // a trace shows every step
  return Simulate(in, sim, scheduler);
}

nlohmann::json PlanToJson(const Plan& plan) {
  auto cand = [&](const Candidate& c) {
    nlohmann::json j = {
        {"config", ToString(c.config)},
        {"label", Label(c.config)},
        {"latency_s", c.result.total.value()},
        {"text_encode_s", c.result.text_encode.value()},
        {"dit_s", c.result.dit.value()},
        {"vae_decode_s", c.result.vae_decode.value()},
        {"warmup_s", c.result.warmup.value()},
        {"step_s", c.result.step.value()},
        {"per_step", {{"compute_s", c.result.steady.compute.value()},
                      {"exposed_comm_s", c.result.steady.exposed_comm.value()},
                      {"bubble_s", c.result.steady.bubble.value()},
                      {"host_wait_s", c.result.steady.host_wait.value()}}},
        {"images_per_s", c.images_per_s},
        {"gpu_s_per_image", c.gpu_s_per_image},
        {"memory_gb", c.result.peak_memory.value() / 1e9},
        {"imbalance", c.result.imbalance},
    };
    j["xdit_flags"] = c.xdit ? nlohmann::json(c.xdit->parallel_flags) : nlohmann::json(nullptr);
    j["xdit_command"] = c.xdit ? nlohmann::json(c.xdit->command) : nlohmann::json(nullptr);
    if (c.xdit && !c.xdit->notes.empty()) j["xdit_notes"] = c.xdit->notes;
    if (plan.single_gpu) {
      const double speedup = plan.single_gpu->result.total.value() / c.result.total.value();
      j["speedup"] = speedup;
      j["efficiency"] = speedup / plan.cluster.gpus();
    }
    return j;
  };
  nlohmann::json ranked = nlohmann::json::array();
  for (const auto& c : plan.ranked) ranked.push_back(cand(c));
  const Workload& w = plan.workload;
  nlohmann::json out = {
      {"workload", {{"model", w.model_id}, {"height", w.height}, {"width", w.width}, {"frames", w.frames},
                    {"steps", w.steps}, {"batch", w.batch}, {"output_type", OutputTypeName(w.output)}}},
      {"cluster", {{"gpu", plan.cluster.spec.gpu_id}, {"gpus", plan.cluster.gpus()}, {"nodes", plan.cluster.nodes()},
                   {"gpus_per_node", plan.cluster.gpus_per_node()}, {"intra", plan.cluster.spec.intra_id},
                   {"inter", plan.cluster.spec.inter_id}}},
      {"objective", ObjectiveName(plan.objective)},
      {"executor", PlanForName(plan.executor)},
      {"enumerated", plan.enumerated},
      {"pruned_memory", plan.pruned_memory},
      {"ranked", ranked},
      {"explanation", plan.explanation},
  };
  out["single_gpu_s"] = plan.single_gpu ? nlohmann::json(plan.single_gpu->result.total.value()) : nlohmann::json(nullptr);
  return out;
}

StatusOr<ParallelConfig> PlanConfigFromJson(std::string_view text, const std::string& origin,
                                            const Workload& workload) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(
        fmt::format("{}: not JSON ({}); give the output of `ditune plan --json`", origin, e.what()));
  }
  if (!j.is_object() || !j.contains("ranked") || !j["ranked"].is_array() || j["ranked"].empty() ||
      !j["ranked"][0].is_object() || !j["ranked"][0].contains("config") || !j["ranked"][0]["config"].is_string()) {
    return Status::InvalidArgument(fmt::format(
        "{}: no configuration at ranked[0].config; give the output of `ditune plan --json` (a plan that "
        "found no feasible configuration has none to run)",
        origin));
  }
  // A plan is for one workload: its best configuration need not even be valid for another.
  if (j.contains("workload") && j["workload"].is_object()) {
    const nlohmann::json& pw = j["workload"];
    const nlohmann::json mine = {{"model", workload.model_id}, {"height", workload.height}, {"width", workload.width},
                                 {"frames", workload.frames}, {"batch", workload.batch}};
    for (const auto& [key, value] : mine.items()) {
      if (pw.contains(key) && pw[key] != value) {
        return Status::InvalidArgument(fmt::format(
            "{} was made for {} {}, this run's is {}: give the plan's workload flags or plan this one", origin, key,
            pw[key].dump(), value.dump()));
      }
    }
  }
  return ParseParallelConfig(j["ranked"][0]["config"].get<std::string>());
}

std::string PlanCacheKey(const Workload& w, const Cluster& c, const PlanOptions& o) {
  std::string warmups;
  for (int x : o.enumerate.warmups) warmups += fmt::format("{},", x);
  return fmt::format("v3|{}|{}x{}x{}|s{}|b{}|{}|{}x{}|{}n|{}|{}|{}|k{}|p{}w{}d{}o{}|{}|tc{}pv{}", w.model_id, w.height,
                     w.width, w.frames, w.steps, w.batch, OutputTypeName(w.output), c.spec.gpu_id, c.gpus(), c.nodes(),
                     c.spec.intra_id, c.spec.inter_id, ObjectiveName(o.objective), o.top_k,
                     o.enumerate.vary_patches, warmups, o.enumerate.distrifusion, o.enumerate.vary_order,
                     PlanForName(o.executor), o.xdit.torch_compile, o.xdit.parallel_vae);
}

}  // namespace ditune
