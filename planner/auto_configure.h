// Automatic configuration for launchers that embed ditune: the best parallel configuration
// for a workload on a cluster, from the calibrated models, cached per calibration.
//
//   ditune::Workload w{"flux.1-dev", 1024, 1024, 1, 28, 1, ditune::OutputType::kDecoded};
//   ditune::ClusterSpec c{"h100-sxm5-80gb", 8};
//   auto plan = ditune::AutoConfigure(w, c, {});
//   if (plan.ok()) launch_with(plan->ranked.front().xdit->command);  // the model's entry point
#ifndef DITUNE_PLANNER_AUTO_CONFIGURE_H_
#define DITUNE_PLANNER_AUTO_CONFIGURE_H_

#include <string>

#include "core/cluster.h"
#include "core/status.h"
#include "core/workload.h"
#include "planner/plan.h"

namespace ditune {

struct AutoConfigureOptions {
  PlanOptions plan;
  // The calibration store; empty = Store::DefaultPath(). ":memory:" uses no file.
  std::string db_path;
  // Reuse a plan cached for the same workload, cluster, options and calibration version.
  bool use_cache = true;
  // Set on return: whether the ranking came from the cache.
  bool* from_cache = nullptr;
  // Set on return where the default store could not be opened and the shipped factory
  // calibration priced alone (OpenStoreForPricing's note; also in the plan's explanation);
  // cleared otherwise.
  std::string* store_note = nullptr;
};

// Loads the default catalog and the store's fits, and plans. The ranking is cached in the
// store under (workload, cluster, options) for the store's calibration version, so a new
// calibration invalidates it.
StatusOr<Plan> AutoConfigure(const Workload& workload, const ClusterSpec& cluster,
                             const AutoConfigureOptions& options = {});

}  // namespace ditune

#endif  // DITUNE_PLANNER_AUTO_CONFIGURE_H_
