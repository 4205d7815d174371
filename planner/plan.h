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
#include "planner/xdit_launch.h"
#include "simulator/simulate.h"

namespace ditune {

// latency: seconds of one generation. throughput: images per second of a stream of
// generations of `batch` prompts (data parallelism serves several at once). gpu-seconds:
// GPU time per image.
enum class Objective { kLatency, kThroughput, kGpuSeconds };
std::string_view ObjectiveName(Objective o);
StatusOr<Objective> ParseObjective(std::string_view s);

// Who runs the plan, which sets how it is priced: xDiT (eager PyTorch: framework ops and
// Python glue on the host, the per-model xDiT scale "<gpu>/<model>") or ditune's own engine
// (one kernel per op issued from C++, the engine scale "<gpu>/cuda/engine"; on the CPU
// "GPU", the engine's cpu kernels and their fits).
enum class PlanFor { kXdit, kDitune };
std::string_view PlanForName(PlanFor p);
// "xdit" or "ditune"; InvalidArgument naming the valid ones otherwise.
StatusOr<PlanFor> ParsePlanFor(std::string_view s);

struct PlanOptions {
  Objective objective = Objective::kLatency;
  PlanFor executor = PlanFor::kXdit;
  int top_k = 5;
  EnumerateOptions enumerate;
  SimOptions sim;
  // Runner options printed in xDiT's launch line (and priced where they change the time).
  XditRunOptions xdit;
};

struct Candidate {
  ParallelConfig config;
  SimResult result;
  double images_per_s = 0;
  double gpu_s_per_image = 0;
  // How to launch it with xDiT (plans for xDiT only).
  std::optional<XditLaunch> xdit;
};

struct Plan {
  Workload workload;
  Cluster cluster;
  Objective objective = Objective::kLatency;
  PlanFor executor = PlanFor::kXdit;    // who it was priced for
  std::vector<Candidate> ranked;        // best first, at most top_k
  std::optional<Candidate> single_gpu;  // the same workload on one GPU, when it fits
  int enumerated = 0;                   // valid configurations
  int pruned_memory = 0;                // of those, predicted not to fit
  std::vector<std::string> explanation;  // why the winner wins, in numbers
};

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

// One configuration priced exactly as a plan for `options.executor` prices it — the same
// models, options, rules and, for xDiT, the patch count and warm-up xDiT runs it with
// (XditRunsAs; `*priced_as` receives that configuration) — so `ditune simulate` reproduces a
// plan's figure to the digit. InvalidArgument naming the rule where the executor cannot run
// `config`. `scheduler`, when given, receives the task graph of every step (extrapolation off,
// for --trace); `every_rank` lists every rank in the result, not a stage's first.
StatusOr<SimResult> SimulateAsPlanned(const Catalog& catalog, const Workload& workload, const Cluster& cluster,
                                      const std::vector<Fit>& fits, const PlanOptions& options,
                                      const ParallelConfig& config, ParallelConfig* priced_as = nullptr,
                                      TaskScheduler* scheduler = nullptr, bool every_rank = false);

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
