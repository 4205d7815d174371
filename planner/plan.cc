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
#include <fmt/ranges.h>

#include "core/enum_names.h"
#include "core/text.h"
#include "core/parallel_for.h"

#include "costmodels/memory_model.h"
#include "calibration/predict.h"

namespace ditune {
namespace {

// Where an eager runtime's host time per block comes from, for --explain.
std::string EagerHostOpsLine(const ModelSpec& m) {
  std::vector<std::string> counts;
  for (BlockFamily f : kAllBlockFamilies) {
    if (m.eager_host_ops.Of(f) > 0) counts.push_back(fmt::format("{} {:.0f}", BlockFamilyName(f), m.eager_host_ops.Of(f)));
  }
  if (counts.empty()) {
    return fmt::format("eager host ops of {}'s blocks: counted by hand per block family, times the family's learned "
                       "scale (no count on its block code in the catalog)",
                       m.id);
  }
  return fmt::format("eager host ops of {}'s blocks: {} ATen ops a forward, counted on its block code ({})", m.id,
                     fmt::join(counts, ", "), m.eager_host_ops.source);
}

// Where an eager runtime's host time outside the blocks comes from, for --explain.
std::string StepHostOpsLine(const ModelSpec& m) {
  if (m.step_host_ops.source.empty()) {
    return fmt::format("eager host ops of {}'s step outside its blocks: the embedders and final layer's kernels "
                       "counted by hand, the scheduler not priced (no count on its model code in the catalog)",
                       m.id);
  }
  return fmt::format("eager host ops of {}'s step outside its blocks: {:.0f} ATen ops a forward and {:.0f} a "
                     "scheduler step (once per patch under PipeFusion), counted on its code ({})",
                     m.id, m.step_host_ops.outside, m.step_host_ops.scheduler, m.step_host_ops.source);
}

// The share of an eager winner's step spent waiting for the host above which --explain says
// what torch.compile would make of it.
constexpr double kCompileHintHostShare = 0.2;

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

// Simulates one configuration with these compute and communication models and scores it.
StatusOr<Candidate> SimulateCandidate(const ModelSpec& model, const Workload& workload, const Cluster& cluster,
                                      const ParallelConfig& c, const ComputeModel& compute, const CommModel* comm,
                                      const PipelineTermScales& terms, SimOptions sim) {
  SimInput in{&model, workload, &cluster, c, &compute, comm};
  sim.terms = terms;
  sim.every_rank = false;  // a stage's figures are each of its ranks'; thousands of candidates are kept
  DITUNE_ASSIGN_OR_RETURN(SimResult r, Simulate(in, sim));
  Candidate cand{c, std::move(r)};
  cand.images_per_s = workload.batch / cand.result.total.value();
  cand.gpu_s_per_image = cand.result.total.value() * cluster.gpus() / workload.batch;
  return cand;
}

// The same with the calibrated models.
StatusOr<Candidate> SimulateCandidate(const ModelSpec& model, const Workload& workload, const Cluster& cluster,
                                      const ParallelConfig& c, const CostModels& models, const SimOptions& sim) {
  return SimulateCandidate(model, workload, cluster, c, models.compute, models.comm.get(), models.terms, sim);
}

}  // namespace

namespace {

constexpr const char* kMethodNames[] = {"ulysses", "ring",         "pipefusion", "cfg",     "tp",
                                        "dp",      "distrifusion", "fsdp",       "offload", "te", "vae"};

// Whether `c` uses method `m` (a kMethodNames entry).
bool Uses(const ParallelConfig& c, std::string_view m) {
  if (m == "ulysses") return c.ulysses > 1;
  if (m == "ring") return c.ring > 1;
  if (m == "pipefusion") return c.pipefusion > 1;
  if (m == "cfg") return c.cfg > 1;
  if (m == "tp") return c.tp > 1;
  if (m == "dp") return c.dp > 1;
  if (m == "distrifusion") return c.distrifusion > 1;
  if (m == "fsdp") return c.fsdp > 1;
  if (m == "offload") return c.offload != 0;
  if (m == "te") return c.te != TextEncoderPlacement::kWhole;
  if (m == "vae") return c.vae != VaePlacement::kWhole;
  return false;
}

// Whether the search may use `c` (PlanOptions::methods).
bool Allowed(const PlanOptions& o, const ParallelConfig& c) {
  if (o.methods.empty()) return true;
  for (const char* m : kMethodNames) {
    if (Uses(c, m) && std::find(o.methods.begin(), o.methods.end(), m) == o.methods.end()) return false;
  }
  return true;
}

}  // namespace

StatusOr<std::vector<std::string>> ParseMethods(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string item(Trim(list.substr(start, comma - start)));
    if (std::find(std::begin(kMethodNames), std::end(kMethodNames), item) == std::end(kMethodNames)) {
      return Status::InvalidArgument(fmt::format("--methods: '{}' is not a method; valid: {}", item,
                                                 fmt::join(kMethodNames, ", ")));
    }
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

StatusOr<std::string> ParseRuntimeChoice(const Catalog& catalog, std::string_view s, std::string_view flag) {
  if (s == kRuntimeAny) return std::string(s);
  std::vector<std::string> valid;
  for (const auto& r : catalog.runtimes()) {
    if (r.id == s) return r.id;
    valid.push_back(r.id);
  }
  valid.push_back(kRuntimeAny);
  return Status::InvalidArgument(fmt::format("{}: {}", flag, UnknownIdMessage("runtime", s, valid)));
}

constexpr EnumName<Objective> kObjectiveNames[] = {
    {Objective::kLatency, "latency"},
    {Objective::kThroughput, "throughput"},
    {Objective::kGpuSeconds, "gpu-seconds"},
};

std::string_view ObjectiveName(Objective o) { return NameIn(kObjectiveNames, o); }

StatusOr<Objective> ParseObjective(std::string_view s) { return ParseIn(kObjectiveNames, s, "--objective"); }

StatusOr<std::string> RuntimeRules(const Catalog& catalog, const ModelSpec& model, const Workload& workload,
                                  const Cluster& cluster, std::string_view runtime) {
  if (runtime == kRuntimeAny) {
    return Status::InvalidArgument("--runtime any ranks several runtimes: it plans (MakePlanAny), it does not price "
                                   "one configuration; name one runtime");
  }
  DITUNE_ASSIGN_OR_RETURN(const RuntimeSpec* spec, catalog.Runtime(runtime));
  if (spec->engine || cluster.gpu->is_cpu) {
    if (spec->engine) DITUNE_RETURN_IF_ERROR(ExecutorRunsModel(model));
    return std::string();
  }
  DITUNE_RETURN_IF_ERROR(RuntimeRunsWorkload(model, spec->id, workload));
  return spec->id;
}

// Ranks the simulated candidates, adds the single-GPU reference and the explanation.
std::vector<std::string> ReproduceLines(const Catalog& catalog, const std::string& runtime, const Workload& w,
                                        const SimResult& r) {
  std::vector<std::string> out;
  const bool decoded = w.output == OutputType::kDecoded;
  out.push_back(fmt::format(
      "the figure is one generation with the weights loaded and warm, as its slowest rank sees it: text encoding "
      "{:.2f} s + {} denoising steps {:.2f} s{} + VAE decode {:.2f} s{}; loading the weights and the first call's "
      "compilation and autotuning are not in it",
      r.text_encode.value(), w.steps, r.dit.value(),
      r.warmup.value() > 0 ? fmt::format(" (of which synchronous warm-up steps {:.2f} s)", r.warmup.value()) : "",
      r.vae_decode.value(), decoded ? "" : " (--output-type latent: no decode)"));
  auto spec = catalog.Runtime(runtime);
  if (!spec.ok()) return out;
  const RuntimeSpec& rt = **spec;
  if (!rt.timing) {
    out.push_back(fmt::format(
        "{}: no source ditune has says how it times a generation; to measure the same thing, call the pipeline once "
        "to warm up, then time one call with torch.cuda.synchronize() before each clock read",
        rt.name));
    return out;
  }
  const RuntimeTiming& t = *rt.timing;
  out.push_back(fmt::format("how {} times it: {} ({})", rt.name, t.how, t.source));
  double compare = r.total.value();
  std::vector<std::string> left_out;
  if (t.text_encoding == 0) {
    compare -= r.text_encode.value();
    left_out.push_back("the text encoders");
  }
  if (t.vae_decode == 0 && decoded) {
    compare -= r.vae_decode.value();
    left_out.push_back("the VAE decode");
  }
  std::vector<std::string> unknown;
  if (t.text_encoding < 0) unknown.push_back(fmt::format("the text encoders ({:.2f} s)", r.text_encode.value()));
  if (t.vae_decode < 0 && decoded) unknown.push_back(fmt::format("the VAE decode ({:.2f} s)", r.vae_decode.value()));
  if (!unknown.empty()) {
    out.push_back(fmt::format("no source says whether its figure includes {}", fmt::join(unknown, " or ")));
  }
  if (!left_out.empty()) {
    out.push_back(fmt::format("its figure leaves out {}: compare it with {:.3f} s of this plan's {:.3f} s",
                              fmt::format("{}", fmt::join(left_out, " and ")), compare, r.total.value()));
  }
  if (t.warmup_calls == 0) {
    out.push_back("it runs no warm-up call first: its first figure includes compilation and autotuning; run it twice "
                  "and read the second");
  }
  return out;
}

std::string ProvenanceText(Provenance p) {
  switch (p) {
    case Provenance::kMeasured: return "measured on your cluster (a compute scale fitted from your runs)";
    case Provenance::kPublished: return "learned from published runs of this GPU and model";
    case Provenance::kCatalog: return "the catalog's peak and default efficiencies (no run of this GPU and model)";
  }
  return "";
}

std::optional<MemoryInterval> PeakMemoryInterval(const IntervalTable& table, const SimResult& result) {
  if (result.ranks.empty()) return std::nullopt;
  // The band is of the tensors' peak (what the tables publish) on the rank that holds the
  // most; the runtime's overhead is added.
  const auto largest = std::max_element(result.ranks.begin(), result.ranks.end(), [](const auto& a, const auto& b) {
    return a.memory.peak() < b.memory.peak();
  });
  const MemoryBreakdown& m = largest->memory;
  std::optional<MemoryInterval> band = MemoryIntervalFor(table, m.tensors_peak().value() / 1e9);
  if (!band) return std::nullopt;
  band->lo_gb += m.runtime.value() / 1e9;
  band->hi_gb += m.runtime.value() / 1e9;
  return band;
}

Status AttachIntervals(const Catalog& catalog, const std::vector<Fit>& fits, Plan* plan) {
  DITUNE_ASSIGN_OR_RETURN(std::optional<IntervalTable> table, ShippedIntervals(catalog.data_dir()));
  if (!table) return Status::Ok();
  const Provenance provenance = ComputeProvenance(fits, plan->cluster.gpu->id, plan->workload.model_id);
  auto attach = [&](Candidate& c) {
    c.interval = IntervalFor(*table, c.runtime, provenance, c.result.total.value());
    c.memory_interval = PeakMemoryInterval(*table, c.result);
  };
  for (auto& c : plan->ranked) attach(c);
  if (plan->single_gpu) attach(*plan->single_gpu);
  if (!plan->ranked.empty() && plan->ranked.front().interval) {
    const PredictionInterval& i = *plan->ranked.front().interval;
    plan->explanation.push_back(fmt::format(
        "80% interval of the winner's figure: {:.3f} to {:.3f} s, from {}; its compute figure is {}", i.lo_s, i.hi_s,
        i.basis, ProvenanceText(i.provenance)));
  }
  if (!plan->ranked.empty() && plan->ranked.front().memory_interval) {
    const MemoryInterval& m = *plan->ranked.front().memory_interval;
    plan->explanation.push_back(fmt::format(
        "80% interval of the winner's peak memory: {:.1f} to {:.1f} GB per GPU, from {} published peaks against the "
        "memory model",
        m.lo_gb, m.hi_gb, m.n));
  }
  return Status::Ok();
}

StatusOr<Plan> FinishPlan(const Catalog& catalog, const ModelSpec& model_spec, const TokenGeometry& tokens,
                          const CostModels& models, std::vector<Candidate> all, const PlanOptions& opt,
                          std::string_view rules, Plan plan) {
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
  const RuntimeSupport* entry = rules.empty() ? nullptr : model->runtime(rules);
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
    // One GPU as a whole pipeline, or, where that does not fit and the runtime offloads the
    // model, with model CPU offload.
    ParallelConfig one_gpu;
    ValidationContext ctx1{model, tokens, workload.steps, workload.batch, 1};
    ctx1.runtime = rules;
    MemoryBreakdown mem = RankMemory(*model, tokens, workload, one_gpu, *cluster.gpu, opt.sim.memory);
    if (!mem.fits() && entry != nullptr && entry->runs(RuntimeMethod::kCpuOffload)) {
      one_gpu.offload = 1;
      mem = RankMemory(*model, tokens, workload, one_gpu, *cluster.gpu, opt.sim.memory);
    }
    if (mem.fits() && IsValidConfig(ctx1, one_gpu)) {
      CostModels single_models{models.compute, std::make_unique<CommModel>(single), models.terms};
      auto c = SimulateCandidate(*model, workload, single, one_gpu, single_models, opt.sim);
      if (c.ok()) {
        c->runtime = opt.runtime;
        plan.single_gpu = std::move(*c);
      }
    }
  }
  // Explanation: the winner's numbers, then what holds each runner-up back.
  const Candidate& best = all.front();
  plan.reproduce = ReproduceLines(catalog, opt.runtime, workload, best.result);
  plan.explanation.push_back(fmt::format(
      "{}{} wins on {}: {:.3f} s per generation ({:.2f} images/s, {:.1f} GPU-s per image); per step {:.1f} ms of "
      "which compute {}, exposed communication {}, bubble {}, host wait {}",
      Label(best.config), opt.runtime == "xdit" ? "" : fmt::format(" on {}", opt.runtime), ObjectiveName(opt.objective),
      best.result.total.value(), best.images_per_s,
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
  // An eager winner whose steps mostly wait for the host: what the runtime's torch.compile
  // (one generated kernel an op, no Python between them) would make of the same
  // configuration, where its entry point compiles the model.
  if (models.compute.runtime() == Runtime::kEager && entry != nullptr &&
      entry->runs(RuntimeMethod::kTorchCompile) && best.config.eager == 0 &&
      best.result.steady.host_wait.value() > kCompileHintHostShare * best.result.step.value()) {
    ComputeModel compiled = models.compute;
    compiled.SetRuntime(Runtime::kCompiled);
    auto c = SimulateCandidate(*model, workload, cluster, best.config, compiled, models.comm.get(), models.terms,
                               opt.sim);
    if (c.ok() && c->result.total < best.result.total) {
      const double total = c->result.total.value();
      const std::string* flag = entry->flag(RuntimeMethodKey(RuntimeMethod::kTorchCompile));
      plan.explanation.push_back(fmt::format(
          "{} of each step waits for the host to issue eager ops; compiled ({}), the same configuration is priced "
          "at {:.3f} s ({:+.0f}%): `plan --torch-compile` ranks every configuration that way",
          Pct(best.result.steady.host_wait.value(), best.result.step.value()),
          flag != nullptr ? fmt::format("{}'s {}", entry->runtime_name, *flag) : std::string("compile=1"),
          total, 100 * (total / best.result.total.value() - 1)));
    }
  }
  if (best.config.offload != 0) {
    ParallelConfig whole = best.config;
    whole.offload = 0;
    const OffloadTraffic moves = OffloadMoves(*model, best.config);
    plan.explanation.push_back(fmt::format(
        "model CPU offload ({}): the whole pipeline needs {:.1f} GB per GPU of "
        "{:.1f} usable; with each part on the GPU only while it runs, {:.1f} GB; {:.1f} GB of weights cross the "
        "host link per generation, there and back (in the text/VAE times)",
        entry != nullptr && entry->flag("cpu_offload") != nullptr
            ? fmt::format("{}'s {}", entry->runtime_name, *entry->flag("cpu_offload"))
            : std::string("offload=1"),
        RankMemory(*model, tokens, workload, whole, *cluster.gpu, opt.sim.memory).peak().value() / 1e9,
        best.result.ranks.front().memory.capacity.value() / 1e9, best.result.peak_memory.value() / 1e9,
        (moves.before_loop + moves.after_loop).value() / 1e9));
  }
  if (!best.result.ranks.empty()) {
    plan.explanation.push_back(fmt::format("memory per GPU by phase: {}",
                                           MemoryPhasesText(best.result.ranks.front().memory)));
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
  if (best.config.pipefusion > 1 || best.config.distrifusion > 1) {
    plan.explanation.push_back(
        "note: PipeFusion and DistriFusion reuse one-step-stale activations of the other patches: a cost in image "
        "quality, not in speed, which this plan does not weigh (--methods without them excludes them)");
  }
  if (best.config.order != kDefaultRankOrder) {
    plan.explanation.push_back(fmt::format(
        "the winner uses rank order {} instead of the usual tp-sp-pp-cfg-dp, to keep its chatty groups inside a "
        "node or socket",
        RankOrderToString(best.config.order)));
  }
  all.resize(std::min<size_t>(all.size(), static_cast<size_t>(std::max(1, opt.top_k))));
  for (auto& c : all) c.runtime = opt.runtime;
  if (!rules.empty()) {
    // The line that launches each ranked plan through the runtime's entry point.
    for (auto& c : all) {
      auto launch = MakeLaunch(*model, rules, workload, cluster, c.config, opt.launch);
      if (!launch.ok()) return launch.status().WithContext(fmt::format("a ranked plan {} cannot run", opt.runtime));
      c.launch = std::move(*launch);
    }
  }
  plan.ranked = std::move(all);
  return plan;
}


namespace {

// What both ways of making a plan start from.
struct PlanStart {
  // The rules the plan follows: the runtime's id, or empty for ditune's engine (which every
  // plan on the CPU is).
  std::string rules;
  const ModelSpec* model = nullptr;
  TokenGeometry tokens;
  CostModels models;
  Plan plan;
};

// The options as the runtime runs them: its stage split, and parallel VAE only where its
// entry point for the model has it.
PlanOptions ForRuntime(const ModelSpec& model, std::string_view rules, PlanOptions opt) {
  if (const RuntimeSupport* entry = rules.empty() ? nullptr : model.runtime(rules)) {
    opt.sim.stage_partition = entry->stages;
    opt.sim.tp_split = entry->tp_split;
    opt.sim.parallel_vae = opt.launch.parallel_vae && entry->runs(RuntimeMethod::kParallelVae);
    opt.sim.memory.placement = entry->memory;
  }
  return opt;
}

// How the plan's runs execute: ditune's engine, or a PyTorch runtime compiled (asked for, or
// the runtime's default, where its entry point compiles the model) or eager.
Runtime PlanRuntime(const Catalog& catalog, const ModelSpec& model, const Cluster& cluster, std::string_view rules,
                    const PlanOptions& opt) {
  if (rules.empty()) return cluster.gpu->is_cpu ? Runtime::kEager : Runtime::kEngine;
  auto spec = catalog.Runtime(rules);
  return RuntimeCompiles(spec.ok() ? *spec : nullptr, model.runtime(rules), opt.launch.torch_compile, opt.launch.eager)
             ? Runtime::kCompiled
             : Runtime::kEager;
}

// What every way of pricing starts from: the model, the runtime's rules and options, the
// calibrated models.
StatusOr<PlanStart> StartPlan(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                              const std::vector<Fit>& fits, const PlanOptions& options, PlanOptions* opt) {
  PlanStart s;
  DITUNE_ASSIGN_OR_RETURN(s.model, catalog.Model(workload.model_id));
  DITUNE_ASSIGN_OR_RETURN(s.rules, RuntimeRules(catalog, *s.model, workload, cluster, options.runtime));
  *opt = ForRuntime(*s.model, s.rules, options);
  if (!s.rules.empty()) {
    if (auto spec = catalog.Runtime(s.rules); spec.ok()) opt->sim.ring_merge_fused = (*spec)->ring_merge_fused;
  }
  // The runtime overhead the user's runs of this GPU and model measured, if any.
  if (auto overhead = MeasuredRuntimeOverhead(fits, cluster.gpu->id, s.model->id)) {
    opt->sim.memory.runtime_overhead = *overhead;
  }
  DITUNE_ASSIGN_OR_RETURN(s.tokens, ComputeTokenGeometry(*s.model, workload));
  DITUNE_ASSIGN_OR_RETURN(
      s.models, ModelsFor(cluster, s.model->id, fits, "cuda", PlanRuntime(catalog, *s.model, cluster, s.rules, *opt)));
  s.plan.workload = workload;
  s.plan.cluster = cluster;
  s.plan.objective = opt->objective;
  s.plan.runtime = opt->runtime;
  return s;
}

}  // namespace

StatusOr<Plan> MakePlan(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                        const std::vector<Fit>& fits, const PlanOptions& options) {
  PlanOptions opt;
  DITUNE_ASSIGN_OR_RETURN(PlanStart start, StartPlan(catalog, workload, cluster, fits, options, &opt));
  const ModelSpec* model = start.model;
  const TokenGeometry& tokens = start.tokens;
  const CostModels& models = start.models;
  Plan plan = std::move(start.plan);
  ValidationContext ctx{model, tokens, workload.steps, workload.batch, cluster.gpus()};
  ctx.runtime = start.rules;
  const bool by_runtime = !start.rules.empty();
  std::vector<ParallelConfig> configs =
      EnumerateConfigs(ctx, cluster, by_runtime ? XditOnly(opt.enumerate) : opt.enumerate);
  if (by_runtime) {
    // Price what the runtime runs: xDiT's adjusted patch counts and clamped warm-ups, each once.
    std::set<std::string> seen;
    std::vector<ParallelConfig> runs;
    for (const auto& c : configs) {
      ParallelConfig r = XditRunsAs(tokens, workload.steps, c);
      if (seen.insert(ToString(r)).second) runs.push_back(r);
    }
    configs = std::move(runs);
  }
  if (!opt.methods.empty()) {
    std::vector<ParallelConfig> kept;
    for (auto& c : configs) {
      if (Allowed(opt, c)) kept.push_back(std::move(c));
    }
    configs = std::move(kept);
  }
  plan.enumerated = static_cast<int>(configs.size());
  if (configs.empty()) {
    return Status::Infeasible(fmt::format("no valid configuration of {} for {} GPUs{}{} (see `ditune check`)",
                                          model->id, cluster.gpus(),
                                          by_runtime ? fmt::format(" that {} runs for it", opt.runtime) : "",
                                          opt.methods.empty() ? std::string()
                                                              : fmt::format(" with only {}", fmt::join(opt.methods, ", "))));
  }
  std::vector<Candidate> all;
  // The configuration nearest to fitting, and its memory: what the message names when
  // nothing fits.
  std::optional<std::pair<ParallelConfig, MemoryBreakdown>> nearest;
  const RuntimeSupport* entry = by_runtime ? model->runtime(start.rules) : nullptr;
  auto can = [&](RuntimeMethod m) { return entry != nullptr && entry->runs(m); };
  const bool can_shard = can(RuntimeMethod::kFullyShard);
  const bool can_offload = can(RuntimeMethod::kCpuOffload);
  const bool can_split_encoders = can(RuntimeMethod::kTextEncoderParallel);
  // The memory placements the runtime has, cheapest first: text encoders split over the
  // ranks (they also encode faster), sharded, or on the CPU (slow to encode); the VAE decoded
  // in parallel (faster too) or tile by tile.
  std::vector<TextEncoderPlacement> te_steps = {TextEncoderPlacement::kWhole};
  std::vector<VaePlacement> vae_steps = {VaePlacement::kWhole};
  if (cluster.gpus() > 1 && can_split_encoders) te_steps.push_back(TextEncoderPlacement::kParallel);
  if (cluster.gpus() > 1 && can(RuntimeMethod::kTextEncoderFsdp)) te_steps.push_back(TextEncoderPlacement::kFsdp);
  if (can(RuntimeMethod::kTextEncoderCpu)) te_steps.push_back(TextEncoderPlacement::kCpu);
  if (cluster.gpus() > 1 && can(RuntimeMethod::kParallelVae)) vae_steps.push_back(VaePlacement::kParallel);
  if (can(RuntimeMethod::kVaeTiling)) vae_steps.push_back(VaePlacement::kTiled);
  if (can(RuntimeMethod::kVaeCpu)) vae_steps.push_back(VaePlacement::kCpu);
  // Every pair, by what it costs in time: splitting is free (it is faster), sharding a
  // little (gathers), tiling a little more (overlaps), the CPU most (a prompt's encoding
  // takes seconds there, a decode minutes).
  auto te_cost = [](TextEncoderPlacement p) {
    return p == TextEncoderPlacement::kFsdp ? 1 : p == TextEncoderPlacement::kCpu ? 3 : 0;
  };
  auto vae_cost = [](VaePlacement p) { return p == VaePlacement::kTiled ? 2 : p == VaePlacement::kCpu ? 4 : 0; };
  std::vector<std::pair<TextEncoderPlacement, VaePlacement>> placements;
  for (TextEncoderPlacement te : te_steps) {
    for (VaePlacement vae : vae_steps) placements.emplace_back(te, vae);
  }
  std::stable_sort(placements.begin(), placements.end(), [&](const auto& a, const auto& b) {
    return te_cost(a.first) + vae_cost(a.second) < te_cost(b.first) + vae_cost(b.second);
  });
  // Per configuration that fits (as enumerated, or placed, sharded or offloaded until it
  // does), the variants to simulate; the fastest of each is kept.
  std::vector<ParallelConfig> variants;
  std::vector<size_t> owner;  // variants[i] belongs to the owner[i]-th configuration kept
  size_t kept = 0;
  for (const ParallelConfig& config : configs) {
    // Memory first: it is cheap and rules out configurations without simulating them.
    const MemoryBreakdown mem = RankMemory(*model, tokens, workload, config, *cluster.gpu, opt.sim.memory);
    std::vector<ParallelConfig> fitting;
    if (mem.fits()) fitting.push_back(config);
    auto note = [&](const ParallelConfig& v, const MemoryBreakdown& m) {
      if (!nearest || m.peak() < nearest->second.peak()) nearest.emplace(v, m);
    };
    note(config, mem);
    if (!mem.fits()) {
      // Where it does not fit: the cheapest memory placement that makes it fit; and the
      // runtime may shard the DiT's weights (the fewest ranks that make it fit) or keep each
      // part of the pipeline on the GPU only while it runs: whichever fits and is faster,
      // the first with both if neither alone fits.
      auto try_fit = [&](const ParallelConfig& v) {
        if (!IsValidConfig(ctx, v) || !Allowed(opt, v)) return false;
        const MemoryBreakdown m = RankMemory(*model, tokens, workload, v, *cluster.gpu, opt.sim.memory);
        note(v, m);
        if (m.fits()) fitting.push_back(v);
        return m.fits();
      };
      auto try_shards = [&](ParallelConfig v) {
        for (int f = 2; can_shard && f <= cluster.gpus(); ++f) {
          v.fsdp = f;
          if (try_fit(v)) return;
        }
      };
      for (const auto& [te, vae] : placements) {
        if (te == config.te && vae == config.vae) continue;
        ParallelConfig v = config;
        v.te = te;
        v.vae = vae;
        if (try_fit(v)) break;
      }
      // Text encoders split over the ranks where the runtime can: they also encode faster.
      ParallelConfig base = config;
      if (can_split_encoders && config.world_size() > 1) base.te = TextEncoderPlacement::kParallel;
      ParallelConfig offloaded = base;
      offloaded.offload = 1;
      if (can_offload) try_fit(offloaded);
      try_shards(base);
      if (fitting.empty() && can_offload) try_shards(offloaded);
    }
    if (fitting.empty()) {
      ++plan.pruned_memory;
      continue;
    }
    // A ControlNet split like the DiT where the runtime can: it holds less and runs faster.
    if (model->control.blocks > 0 && can(RuntimeMethod::kControlNetParallel)) {
      const size_t n = fitting.size();
      for (size_t i = 0; i < n; ++i) {
        ParallelConfig v = fitting[i];
        if (v.sp() <= 1 || v.controlnet == ControlNetPlacement::kParallel) continue;
        v.controlnet = ControlNetPlacement::kParallel;
        if (IsValidConfig(ctx, v) && Allowed(opt, v)) fitting.push_back(v);
      }
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
    // Every valid configuration was weighed, so the nearest is known.
    const auto& [config, memory] = *nearest;
    return Status::Infeasible(fmt::format(
        "none of the {} valid configurations of {} fits in {:.0f} GB per {}; the smallest ({}) needs {:.1f} GB per "
        "GPU; at its peak ({}) the largest part is {}; otherwise add GPUs or use a larger GPU",
        plan.enumerated, model->id, cluster.gpu->memory.value() / 1e9, cluster.gpu->id,
        Label(config), memory.peak().value() / 1e9, MemoryPhaseName(memory.peak_phase()),
        MemoryBlocker(config, memory, entry)));
  }
  DITUNE_ASSIGN_OR_RETURN(Plan done, FinishPlan(catalog, *model, tokens, models, std::move(all), opt, start.rules,
                                                std::move(plan)));
  for (auto& line : CalibrationSources(fits, done.cluster, model->id)) done.explanation.push_back(std::move(line));
  done.explanation.push_back(EagerHostOpsLine(*model));
  done.explanation.push_back(StepHostOpsLine(*model));
  DITUNE_RETURN_IF_ERROR(AttachIntervals(catalog, fits, &done));
  return done;
}

StatusOr<Plan> MakePlanFromConfigs(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                   const std::vector<Fit>& fits, const PlanOptions& options,
                                   const std::vector<ParallelConfig>& ranked, int enumerated, int pruned_memory) {
  PlanOptions opt;
  DITUNE_ASSIGN_OR_RETURN(PlanStart start, StartPlan(catalog, workload, cluster, fits, options, &opt));
  const ModelSpec* model = start.model;
  const TokenGeometry& tokens = start.tokens;
  const CostModels& models = start.models;
  Plan plan = std::move(start.plan);
  plan.enumerated = enumerated;
  plan.pruned_memory = pruned_memory;
  std::vector<Candidate> all;
  for (const auto& c : ranked) {
    ValidationContext ctx{model, tokens, workload.steps, workload.batch, cluster.gpus()};
    ctx.runtime = start.rules;
    DITUNE_RETURN_IF_ERROR(ValidateConfig(ctx, c));
    DITUNE_ASSIGN_OR_RETURN(Candidate cand, SimulateCandidate(*model, workload, cluster, c, models, opt.sim));
    all.push_back(std::move(cand));
  }
  if (all.empty()) return Status::InvalidArgument("no configurations to plan with");
  DITUNE_ASSIGN_OR_RETURN(Plan done, FinishPlan(catalog, *model, tokens, models, std::move(all), opt, start.rules,
                                                std::move(plan)));
  for (auto& line : CalibrationSources(fits, done.cluster, model->id)) done.explanation.push_back(std::move(line));
  done.explanation.push_back(EagerHostOpsLine(*model));
  done.explanation.push_back(StepHostOpsLine(*model));
  DITUNE_RETURN_IF_ERROR(AttachIntervals(catalog, fits, &done));
  return done;
}

StatusOr<std::vector<StatusOr<Candidate>>> PriceConfigs(const Catalog& catalog, const Workload& workload,
                                                         const Cluster& cluster, const std::vector<Fit>& fits,
                                                         const PlanOptions& options,
                                                         const std::vector<ParallelConfig>& configs) {
  PlanOptions opt;
  DITUNE_ASSIGN_OR_RETURN(PlanStart start, StartPlan(catalog, workload, cluster, fits, options, &opt));
  std::vector<StatusOr<Candidate>> out;
  out.reserve(configs.size());
  for (const auto& c : configs) {
    ValidationContext ctx{start.model, start.tokens, workload.steps, workload.batch, cluster.gpus()};
    ctx.runtime = start.rules;
    if (Status st = ValidateConfig(ctx, c); !st.ok()) {
      out.push_back(st);
      continue;
    }
    auto cand = SimulateCandidate(*start.model, workload, cluster, c, start.models, opt.sim);
    if (cand.ok()) cand->runtime = opt.runtime;
    out.push_back(std::move(cand));
  }
  return out;
}

StatusOr<SimResult> SimulateAsPlanned(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                      const std::vector<Fit>& fits, const PlanOptions& options,
                                      const ParallelConfig& config, ParallelConfig* priced_as,
                                      TaskScheduler* scheduler, bool every_rank) {
  PlanOptions opt;
  PlanOptions asked = options;
  asked.launch.torch_compile |= config.compile != 0;  // compile=1 is priced as --torch-compile
  asked.launch.eager |= config.eager != 0;            // eager=1 as the runtime's eager mode
  DITUNE_ASSIGN_OR_RETURN(PlanStart start, StartPlan(catalog, workload, cluster, fits, asked, &opt));
  ValidationContext ctx{start.model, start.tokens, workload.steps, workload.batch, cluster.gpus()};
  ctx.runtime = start.rules;
  DITUNE_RETURN_IF_ERROR(ValidateConfig(ctx, config));
  const ParallelConfig c = ctx.runtime.empty() ? config : XditRunsAs(start.tokens, workload.steps, config);
  if (priced_as != nullptr) *priced_as = c;
  SimInput in{start.model, workload, &cluster, c, &start.models.compute, start.models.comm.get()};
  SimOptions sim = opt.sim;
  sim.terms = start.models.terms;
  sim.every_rank = every_rank;
  if (scheduler != nullptr) sim.extrapolate = false;  // a trace shows every step
  return Simulate(in, sim, scheduler);
}

std::string OtherRuntimesThatFit(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                 const std::vector<Fit>& fits, const PlanOptions& options) {
  auto model = catalog.Model(workload.model_id);
  if (!model.ok()) return "";
  std::vector<std::string> fitting;
  for (const RuntimeSpec& r : catalog.runtimes()) {
    if (r.id == options.runtime) continue;
    // The runtimes MakePlanAny weighs: those that run the model; on the CPU, the engine only.
    if (r.engine ? !ExecutorRunsModel(**model).ok() : (cluster.gpu->is_cpu || (*model)->runtime(r.id) == nullptr)) {
      continue;
    }
    PlanOptions one = options;
    one.runtime = r.id;
    one.top_k = 1;
    auto plan = MakePlan(catalog, workload, cluster, fits, one);
    if (!plan.ok() || plan->ranked.empty()) continue;
    const Candidate& best = plan->ranked.front();
    fitting.push_back(fmt::format("{} with {} ({:.1f} GB per GPU, {:.3f} s)", r.id, Label(best.config),
                                  best.result.peak_memory.value() / 1e9, best.result.total.value()));
  }
  if (fitting.empty()) return "";
  return fmt::format("; other runtimes fit it: {} (--runtime any ranks them)", fmt::join(fitting, "; "));
}

StatusOr<Plan> MakePlanAny(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                           const std::vector<Fit>& fits, const PlanOptions& options) {
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog.Model(workload.model_id));
  struct Tried {
    std::string runtime;
    StatusOr<Plan> plan;
  };
  std::vector<Tried> tried;
  for (const RuntimeSpec& r : catalog.runtimes()) {
    // Only runtimes that run the model; on the CPU "GPU" every plan is the engine's.
    if (r.engine ? !ExecutorRunsModel(*model).ok() : (cluster.gpu->is_cpu || model->runtime(r.id) == nullptr)) {
      continue;
    }
    PlanOptions one = options;
    one.runtime = r.id;
    one.top_k = std::max(options.top_k, 2);
    tried.push_back({r.id, MakePlan(catalog, workload, cluster, fits, one)});
    // A bad workload or cluster is every runtime's error: say it once.
    if (!tried.back().plan.ok() && tried.back().plan.status().code() != Status::Code::kInfeasible &&
        tried.back().plan.status().code() != Status::Code::kInvalidArgument) {
      return tried.back().plan.status();
    }
  }
  const Plan* winner = nullptr;
  std::vector<Candidate> all;
  for (const Tried& t : tried) {
    if (!t.plan.ok()) continue;
    for (const Candidate& c : t.plan->ranked) all.push_back(c);
    if (winner == nullptr ||
        Score(t.plan->ranked.front(), options.objective) < Score(winner->ranked.front(), options.objective)) {
      winner = &*t.plan;
    }
  }
  if (winner == nullptr) {
    std::vector<std::string> why;
    for (const Tried& t : tried) why.push_back(fmt::format("{}: {}", t.runtime, t.plan.status().message()));
    if (why.empty()) why.push_back(fmt::format("no runtime runs {}", model->id));
    const bool all_refused = std::all_of(tried.begin(), tried.end(), [](const Tried& t) {
      return t.plan.status().code() == Status::Code::kInvalidArgument;
    });
    if (all_refused && !tried.empty()) {
      return Status::InvalidArgument(fmt::format("no runtime runs this workload of {}:\n  {}", model->id,
                                                 fmt::join(why, "\n  ")));
    }
    return Status::Infeasible(fmt::format("no runtime has a configuration of {} that fits:\n  {}", model->id,
                                          fmt::join(why, "\n  ")));
  }
  std::stable_sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
    return Score(a, options.objective) < Score(b, options.objective);
  });
  all.resize(std::min<size_t>(all.size(), static_cast<size_t>(std::max(1, options.top_k))));
  Plan out = *winner;
  out.runtime = kRuntimeAny;
  out.ranked = std::move(all);
  out.enumerated = 0;
  out.pruned_memory = 0;
  std::vector<std::string> lines;
  const Candidate& best = out.ranked.front();
  lines.push_back(fmt::format("{} on {} wins among the {} runtimes that run {}", Label(best.config), best.runtime,
                              tried.size(), model->id));
  for (const Tried& t : tried) {
    if (!t.plan.ok()) {
      lines.push_back(fmt::format("{}: nothing to run: {}", t.runtime, t.plan.status().message()));
      continue;
    }
    out.enumerated += t.plan->enumerated;
    out.pruned_memory += t.plan->pruned_memory;
    const Candidate& b = t.plan->ranked.front();
    if (t.plan.operator->() == winner) {
      lines.push_back(fmt::format("{}: best {} at {:.3f} s (the winner)", t.runtime, Label(b.config),
                                  b.result.total.value()));
      continue;
    }
    lines.push_back(fmt::format("{}: best {} at {:.3f} s ({:+.1f}%)", t.runtime, Label(b.config), b.result.total.value(),
                                100 * (Score(b, options.objective) / Score(best, options.objective) - 1)));
  }
  lines.insert(lines.end(), winner->explanation.begin(), winner->explanation.end());
  out.explanation = std::move(lines);
  out.reproduce = ReproduceLines(catalog, best.runtime, workload, best.result);
  return out;
}

nlohmann::json MemoryPhasesJson(const MemoryBreakdown& memory) {
  const MemoryPhasesGb g = PhasesGb(memory);
  return {{"text_encoding", g.text_encoding}, {"denoising", g.denoising}, {"vae_decode", g.vae_decode},
          {"loading", g.loading}, {"runtime", g.runtime}, {"peak_phase", g.peak_phase}};
}

nlohmann::json LaunchToJson(const Launch& launch) {
  nlohmann::json j = {{"command", launch.command}, {"flags", launch.parallel_flags}, {"notes", launch.notes}};
  j["config_file"] = launch.config_name.empty()
                         ? nlohmann::json(nullptr)
                         : nlohmann::json{{"name", launch.config_name}, {"text", launch.config_text}};
  return j;
}

nlohmann::json TopologyJson(const Cluster& cluster) {
  if (cluster.topology_intra == nullptr) return nullptr;
  const LinkSpec& l = *cluster.topology_intra;
  return {{"source", l.layout_source}, {"link", l.id}, {"layout", LinkTopologyName(l.topology)},
          {"sockets", l.sockets}, {"gpus_per_switch", l.gpus_per_switch}, {"box_gpus", l.box_gpus},
          {"notes", cluster.topology_notes}};
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
        {"memory_phases_gb", c.result.ranks.empty() ? nlohmann::json(nullptr) : MemoryPhasesJson(c.result.ranks.front().memory)},
        {"imbalance", c.result.imbalance},
    };
    j["runtime"] = c.runtime;
    j["predicted_lo_s"] = c.interval ? nlohmann::json(c.interval->lo_s) : nlohmann::json(nullptr);
    j["predicted_hi_s"] = c.interval ? nlohmann::json(c.interval->hi_s) : nlohmann::json(nullptr);
    j["memory_gb_lo"] = c.memory_interval ? nlohmann::json(c.memory_interval->lo_gb) : nlohmann::json(nullptr);
    j["memory_gb_hi"] = c.memory_interval ? nlohmann::json(c.memory_interval->hi_gb) : nlohmann::json(nullptr);
    j["provenance"] = c.interval ? nlohmann::json{{"compute", ProvenanceName(c.interval->provenance)},
                                                  {"interval", c.interval->basis}}
                                 : nlohmann::json(nullptr);
    j["launch"] = c.launch ? LaunchToJson(*c.launch) : nlohmann::json(nullptr);
    // The names plans had before runtimes other than xDiT's were priced, for xDiT's plans.
    const bool xdit = c.launch && c.runtime == "xdit";
    j["xdit_flags"] = xdit ? nlohmann::json(c.launch->parallel_flags) : nlohmann::json(nullptr);
    j["xdit_command"] = xdit ? nlohmann::json(c.launch->command) : nlohmann::json(nullptr);
    if (xdit && !c.launch->notes.empty()) j["xdit_notes"] = c.launch->notes;
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
                   {"inter", plan.cluster.spec.inter_id}, {"topology", TopologyJson(plan.cluster)}}},
      {"objective", ObjectiveName(plan.objective)},
      {"runtime", plan.runtime},
      {"executor", plan.runtime},
      {"enumerated", plan.enumerated},
      {"pruned_memory", plan.pruned_memory},
      {"ranked", ranked},
      {"explanation", plan.explanation},
      {"reproduce", plan.reproduce},
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
  return fmt::format("v4|{}|{}x{}x{}|s{}|b{}|{}|{}x{}|{}n|{}{}|{}|{}|k{}|p{}w{}d{}o{}|{}|tc{}pv{}e{}|m{}", w.model_id, w.height,
                     w.width, w.frames, w.steps, w.batch, OutputTypeName(w.output), c.spec.gpu_id, c.gpus(), c.nodes(),
                     c.spec.intra_id, TopologyKey(c), c.spec.inter_id, ObjectiveName(o.objective), o.top_k,
                     o.enumerate.vary_patches, warmups, o.enumerate.distrifusion, o.enumerate.vary_order,
                     o.runtime, o.launch.torch_compile, o.launch.parallel_vae, o.launch.eager, fmt::join(o.methods, "+"));
}

}  // namespace ditune
