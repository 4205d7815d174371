// One prediction: a workload, a cluster and a configuration through the calibrated models
// and the simulator.
#ifndef DITUNE_PLANNER_PREDICT_H_
#define DITUNE_PLANNER_PREDICT_H_

#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "costmodels/calibration.h"
#include "costmodels/store.h"
#include "simulator/simulate.h"

namespace ditune {

// Calibration that applies to one (GPU, model) beyond the per-op fits: the framework's
// compute scale fitted from end-to-end runs.
inline constexpr const char* kFitKindE2e = "e2e";
std::string E2eFitKey(const std::string& gpu, const std::string& model);

// Models for `cluster` with the store's fits and, if there is one, the e2e scale of
// (cluster GPU, model).
StatusOr<CostModels> ModelsFor(const Cluster& cluster, const std::string& model_id, const std::vector<Fit>& fits);

}  // namespace ditune

#endif  // DITUNE_PLANNER_PREDICT_H_
