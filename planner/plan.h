// The planner: enumerate every valid configuration, drop what does not fit, simulate the
// rest, rank by an objective, and explain the winner.
#ifndef DITUNE_PLANNER_PLAN_H_
#define DITUNE_PLANNER_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/status.h"
#include "core/workload.h"
#include "store/store.h"
#include "core/enumerate.h"
#include "planner/launch.h"
#include "simulator/simulate.h"
#include "calibration/intervals.h"

namespace ditune {

// latency: seconds of one generation. throughput: images per second of a stream of
// generations of `batch` prompts (data parallelism serves several at once). gpu-seconds:
// GPU time per image.
enum class Objective { kLatency, kThroughput, kGpuSeconds };
std::string_view ObjectiveName(Objective o);
StatusOr<Objective> ParseObjective(std::string_view s);

// Who runs the plan — a runtime of the catalog (Catalog::runtimes) — sets its rules and how
// it is priced: a PyTorch runtime (xDiT, Wan's generate.py, SGLang, ...: framework ops and
// Python glue on the host, the per-model PyTorch scale "<gpu>/<model>", eager or compiled,
// with the methods, split and constraints of its entry point for the model) or ditune's own
// engine (one kernel per op issued from C++, the engine scale "<gpu>/cuda/engine"; on the CPU
// "GPU", the engine's cpu kernels and their fits — every plan on the CPU is the engine's).
inline constexpr const char* kRuntimeAny = "any";
// A runtime id of the catalog, or "any" (MakePlanAny); InvalidArgument naming the valid ids
// (and the closest) otherwise. `flag` names the flag in the message.
StatusOr<std::string> ParseRuntimeChoice(const Catalog& catalog, std::string_view s, std::string_view flag = "--runtime");

// The rules `runtime` plays by for this model, workload and cluster: the runtime's id (its
// entry point's rules, ModelSpec::runtimes), or empty for ditune's engine (which every plan on
// the CPU device is). InvalidArgument for an unknown runtime, "any", or a runtime that does
// not run the model or this workload (the reason and its source named).
StatusOr<std::string> RuntimeRules(const Catalog& catalog, const ModelSpec& model, const Workload& workload,
                                   const Cluster& cluster, std::string_view runtime);

// The method names --methods takes: ulysses, ring, pipefusion, cfg, tp, dp, distrifusion,
// fsdp, offload, te. InvalidArgument naming the valid ones for anything else.
StatusOr<std::vector<std::string>> ParseMethods(std::string_view list);

struct PlanOptions {
  Objective objective = Objective::kLatency;
  std::string runtime = "xdit";  // a catalog runtime id (not "any": see MakePlanAny)
  int top_k = 5;
  EnumerateOptions enumerate;
  SimOptions sim;
  // Runner options printed in the launch line (and priced where they change the time).
  LaunchOptions launch;
  // The methods the search may use (--methods; ParseMethods); empty: every method.
  std::vector<std::string> methods;
};

struct Candidate {
  ParallelConfig config;
  SimResult result;
  double images_per_s = 0;
  double gpu_s_per_image = 0;
  std::string runtime;  // who runs it (a catalog runtime id)
  // How to launch it through the runtime's entry point (absent for ditune's engine, whose
  // launch is `ditune run`).
  std::optional<Launch> launch;
  // The 80% interval of result.total and where its compute figure comes from (absent where
  // no interval table is shipped).
  std::optional<PredictionInterval> interval;
  // The 80% interval of the peak memory per GPU (GB, runtime overhead included), where the
  // shipped intervals have a memory band.
  std::optional<MemoryInterval> memory_interval;
};

struct Plan {
  Workload workload;
  Cluster cluster;
  Objective objective = Objective::kLatency;
  std::string runtime = "xdit";         // who it was priced for ("any": each candidate says)
  std::vector<Candidate> ranked;        // best first, at most top_k
  std::optional<Candidate> single_gpu;  // the same workload on one GPU, when it fits
  int enumerated = 0;                   // valid configurations
  int pruned_memory = 0;                // of those, predicted not to fit
  std::vector<std::string> explanation;  // why the winner wins, in numbers
  // How to measure what the winner's figure predicts: what it covers, and how the runtime's
  // own script times a generation (ReproduceLines).
  std::vector<std::string> reproduce;
};

// What a predicted figure covers (one warm generation; text encoding, the steps, the VAE
// decode; not loading or first-call compilation), and how `runtime`'s own script times a
// generation, with the part of the figure to compare where it leaves something out.
std::vector<std::string> ReproduceLines(const Catalog& catalog, const std::string& runtime, const Workload& workload,
                                        const SimResult& result);

// Plans `workload` on `cluster` with the calibrated `fits`. Infeasible when no valid
// configuration fits in memory (the message says what the smallest needs).
StatusOr<Plan> MakePlan(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                        const std::vector<Fit>& fits, const PlanOptions& options = {});

// A plan over given configurations (already ranked by a search, e.g. from the plan cache):
// each is simulated again with the current models and the plan is finished as MakePlan does.
StatusOr<Plan> MakePlanFromConfigs(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                   const std::vector<Fit>& fits, const PlanOptions& options,
                                   const std::vector<ParallelConfig>& ranked, int enumerated, int pruned_memory);

// Each of `configs` (all for `cluster`'s GPU count) priced as a plan prices it: checked
// against the rules (InvalidArgument naming the rule), simulated, with its memory in
// result.peak_memory and result.fits; without ranking, explanation or the single-GPU
// reference. The outer status fails only for the workload, cluster or fits themselves.
StatusOr<std::vector<StatusOr<Candidate>>> PriceConfigs(const Catalog& catalog, const Workload& workload,
                                                         const Cluster& cluster, const std::vector<Fit>& fits,
                                                         const PlanOptions& options,
                                                         const std::vector<ParallelConfig>& configs);

// One configuration priced exactly as a plan for `options.runtime` prices it — the same
// models, options, rules and, for xDiT, the patch count and warm-up xDiT runs it with
// (XditRunsAs; `*priced_as` receives that configuration) — so `ditune simulate` reproduces a
// plan's figure to the digit. InvalidArgument naming the rule where the executor cannot run
// `config`. `scheduler`, when given, receives the task graph of every step (extrapolation off,
// for --trace); `every_rank` lists every rank in the result, not a stage's first.
StatusOr<SimResult> SimulateAsPlanned(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                      const std::vector<Fit>& fits, const PlanOptions& options,
                                      const ParallelConfig& config, ParallelConfig* priced_as = nullptr,
                                      TaskScheduler* scheduler = nullptr, bool every_rank = false);

// Plans on every runtime that runs the model (ditune's engine included) and ranks the
// (runtime, configuration) pairs together: `ranked` holds the best pairs, each naming its
// runtime; the explanation says, for each runtime, its best configuration and what it lost
// by, or why it has none. Infeasible only when no runtime has a configuration that fits.
StatusOr<Plan> MakePlanAny(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                           const std::vector<Fit>& fits, const PlanOptions& options = {});

// For a plan on options.runtime that found nothing that fits (Infeasible): the other runtimes
// that run the model and have a configuration that fits, each with its fastest configuration,
// its figure and its peak memory per GPU, as a sentence to append to the message ("" where
// none has).
std::string OtherRuntimesThatFit(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                 const std::vector<Fit>& fits, const PlanOptions& options);

// A launch as JSON: {"command", "flags", "notes", "config_file": {"name", "text"} or null}.
// The per-phase peaks of one rank, GB: {"text_encoding", "denoising", "vae_decode",
// "loading", "runtime", "peak_phase"}.
nlohmann::json MemoryPhasesJson(const MemoryBreakdown& memory);
// The 80% interval of a simulated peak memory per GPU (the band on the tensors' peak, the
// runtime overhead added), or nullopt where the table has no memory band.
std::optional<MemoryInterval> PeakMemoryInterval(const IntervalTable& table, const SimResult& result);
nlohmann::json LaunchToJson(const Launch& launch);
// The user's topology as the plan priced it: {"source", "link", "layout", "sockets",
// "gpus_per_switch", "box_gpus", "notes"}; null without one.
nlohmann::json TopologyJson(const Cluster& cluster);

// Sets each candidate's interval from the shipped interval table (ShippedIntervals) and the
// provenance of its compute figure among `fits`; adds the winner's to the explanation.
Status AttachIntervals(const Catalog& catalog, const std::vector<Fit>& fits, Plan* plan);
std::string ProvenanceText(Provenance p);

// The plan as one JSON document (what `ditune plan --json` prints and the cache keeps).
nlohmann::json PlanToJson(const Plan& plan);

// The best configuration of a plan document (`ditune plan --json`) for `workload`:
// InvalidArgument, naming `origin`, when the text is not such a plan, holds no configuration,
// or was made for another workload (the field that differs named).
StatusOr<ParallelConfig> PlanConfigFromJson(std::string_view text, const std::string& origin,
                                            const Workload& workload);

// The key a plan is cached under: the workload, the cluster and the options.
std::string PlanCacheKey(const Workload& workload, const Cluster& cluster, const PlanOptions& options);

}  // namespace ditune

#endif  // DITUNE_PLANNER_PLAN_H_
