// Recalibration: every fit the store's measurements make, in one transaction.
#ifndef DITUNE_CALIBRATION_RECALIBRATE_H_
#define DITUNE_CALIBRATION_RECALIBRATE_H_

#include <string>
#include <vector>

#include "core/catalog.h"
#include "costmodels/fit.h"
#include "store/store.h"

namespace ditune {

// Refits everything the store's measurements calibrate — per-op and collective curves, the
// text-encoding / VAE terms, the engine scales, and what the user's xDiT runs set
// (FitMeasuredRuns: scales, per-GPU constants, memory overheads) — and replaces the active
// fits in one transaction.
StatusOr<std::vector<Fit>> RecalibrateAll(Store* store, const Catalog& catalog,
                                          std::vector<std::string>* skipped = nullptr);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_RECALIBRATE_H_
