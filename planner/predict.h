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

// Models for `cluster` with the store's fits and, if there are any, the e2e scales of
// (cluster GPU, model): the framework's compute scale ("<gpu>/<model>"), and the text
// encoding and VAE decode scales ("<gpu>/<model>/text_encode", ".../vae_decode").
StatusOr<CostModels> ModelsFor(const Cluster& cluster, const std::string& model_id, const std::vector<Fit>& fits);

// Fits of the text-encoding and VAE-decode terms: every e2e measurement whose op is
// text_encode or vae_decode and whose params name the workload (model, height, width,
// frames, batch) gives measured / modelled; the median per (GPU, model, term) is the fit.
// `skipped` receives measurements that cannot be used, with the reason.
StatusOr<std::vector<Fit>> FitPipelineTerms(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                            std::vector<std::string>* skipped = nullptr);

// Refits everything the store's measurements calibrate — per-op and collective curves and
// the text-encoding / VAE terms — and replaces the active fits in one transaction.
StatusOr<std::vector<Fit>> RecalibrateAll(Store* store, const Catalog& catalog,
                                          std::vector<std::string>* skipped = nullptr);

}  // namespace ditune

#endif  // DITUNE_PLANNER_PREDICT_H_
