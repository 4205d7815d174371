#include "planner/auto_configure.h"

#include <fmt/format.h>

#include "store/store.h"
#include "calibration/factory.h"
#include "calibration/measured_runs.h"

namespace ditune {
namespace {

// What the store's xDiT runs measured of the plan's ranked configurations, beside the prediction.
Status AddMeasured(const Store& store, const Catalog& catalog, Plan* plan) {
  MeasurementFilter filter;
  filter.kind = MeasurementKind::kE2e;
  filter.backend = "xdit";
  filter.device = plan->cluster.gpu->id;
  DITUNE_ASSIGN_OR_RETURN(std::vector<Measurement> runs, store.Measurements(filter));
  if (runs.empty()) return Status::Ok();
  std::vector<std::pair<std::string, double>> configs;
  const bool dit = plan->workload.output == OutputType::kLatent;
  for (const auto& c : plan->ranked) configs.emplace_back(ToString(c.config), dit ? c.result.dit.value() : c.result.total.value());
  for (auto& line : MeasuredLines(runs, catalog, plan->workload, plan->cluster, configs)) {
    plan->explanation.push_back(std::move(line));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Plan> AutoConfigure(const Workload& workload, const ClusterSpec& spec, const AutoConfigureOptions& opt) {
  DITUNE_ASSIGN_OR_RETURN(const Catalog* catalog, Catalog::Default());
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* model, catalog->Model(workload.model_id));
  DITUNE_RETURN_IF_ERROR(ComputeTokenGeometry(*model, workload).status());
  DITUNE_ASSIGN_OR_RETURN(Cluster cluster, ResolveCluster(spec, *catalog));
  std::string fallback;
  StatusOr<std::unique_ptr<Store>> opened = OpenStoreForPricing(*catalog, opt.db_path, &fallback);
  if (!opened.ok()) return opened.status();
  if (opt.store_note != nullptr) *opt.store_note = fallback;
  std::unique_ptr<Store> store = std::move(*opened);
  DITUNE_ASSIGN_OR_RETURN(std::vector<Fit> fits, store->ActiveFits());
  DITUNE_ASSIGN_OR_RETURN(int64_t version, store->CalibrationVersion());
  if (opt.plan.runtime == kRuntimeAny) {
    // Every runtime planned afresh: the cache keeps one runtime's rankings.
    if (opt.from_cache != nullptr) *opt.from_cache = false;
    DITUNE_ASSIGN_OR_RETURN(Plan plan, MakePlanAny(*catalog, workload, cluster, fits, opt.plan));
    DITUNE_RETURN_IF_ERROR(AddMeasured(*store, *catalog, &plan));
    if (!fallback.empty()) plan.explanation.push_back(fallback);
    return plan;
  }
  // The catalog's digest too: a user catalog (--catalog) can change a GPU's figures under its id.
  const std::string key = fmt::format("{}|cat{:x}", PlanCacheKey(workload, cluster, opt.plan), catalog->fingerprint());
  if (opt.from_cache != nullptr) *opt.from_cache = false;
  if (opt.use_cache) {
    DITUNE_ASSIGN_OR_RETURN(std::optional<nlohmann::json> cached, store->GetCachedPlan(key, version));
    if (cached && cached->contains("ranked") && (*cached)["ranked"].is_array()) {
      std::vector<ParallelConfig> ranked;
      bool usable = true;
      for (const auto& c : (*cached)["ranked"]) {
        auto pc = c.is_string() ? ParseParallelConfig(c.get<std::string>()) : StatusOr<ParallelConfig>(Status::Corruption("bad entry"));
        if (!pc.ok()) {
          usable = false;
          break;
        }
        ranked.push_back(*pc);
      }
      if (usable && !ranked.empty()) {
        auto plan = MakePlanFromConfigs(*catalog, workload, cluster, fits, opt.plan, ranked,
                                        cached->value("enumerated", 0), cached->value("pruned_memory", 0));
        if (plan.ok()) {
          if (opt.from_cache != nullptr) *opt.from_cache = true;
          DITUNE_RETURN_IF_ERROR(AddMeasured(*store, *catalog, &*plan));
          return plan;
        }
      }
    }
  }
  StatusOr<Plan> made = MakePlan(*catalog, workload, cluster, fits, opt.plan);
  if (!made.ok() && made.status().code() == Status::Code::kInfeasible) {
    // Nothing fits on this runtime: name the runtimes on which something does.
    return Status::Infeasible(fmt::format("{}{}", made.status().message(),
                                          OtherRuntimesThatFit(*catalog, workload, cluster, fits, opt.plan)));
  }
  DITUNE_ASSIGN_OR_RETURN(Plan plan, std::move(made));
  DITUNE_RETURN_IF_ERROR(AddMeasured(*store, *catalog, &plan));
  if (!fallback.empty()) plan.explanation.push_back(fallback);
  // A read-only store serves cached plans but keeps no new ones.
  if (opt.use_cache && !store->read_only()) {
    nlohmann::json ranked = nlohmann::json::array();
    for (const auto& c : plan.ranked) ranked.push_back(ToString(c.config));
    DITUNE_RETURN_IF_ERROR(store->PutCachedPlan(
        key, version, {{"ranked", ranked}, {"enumerated", plan.enumerated}, {"pruned_memory", plan.pruned_memory}}));
  }
  return plan;
}

}  // namespace ditune
