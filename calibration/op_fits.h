// Measurements into fits: per-op curves (compute), collective curves (comm) and the engine's
// launch overhead, each group of measurements fitted once it has enough distinct sizes. The
// fits are read into models by costmodels/calibration.h (ApplyFits, MakeCostModels), whose
// key scheme (CommFitKey, ComputeFitKeys) they are filed under.
#ifndef DITUNE_CALIBRATION_OP_FITS_H_
#define DITUNE_CALIBRATION_OP_FITS_H_

#include <string>
#include <vector>

#include "core/status.h"
#include "costmodels/fit.h"
#include "costmodels/measurement.h"

namespace ditune {

// Whether BuildFits can take `m`: an op measurement names an op class (gemm, attention,
// linear_attention, elementwise, norm) or is a host-launch timing (op "launch" with
// params.launches >= 1), a collective one a collective. InvalidArgument
// naming the field and the valid names otherwise; other kinds pass.
Status CheckFittable(const Measurement& m);

// Groups the measurements by what they calibrate and fits each group that has enough
// points (>= 2 distinct sizes). Measurements nothing calibrates (steps, e2e) are skipped.
// A measurement beyond the physical bounds of measurement.h (Measurement::CheckPhysicalBounds,
// or a fit size per second above kMaxMeasuredRatePerSecond) is left out of every fit rather
// than failing it: a store keeps working whatever one row holds.
// `skipped`, when given, receives one line per group that could not be fitted and one per
// measurement left out of a group ("<kind> <key>: measurement <id> left out of the fit: <why>").
StatusOr<std::vector<Fit>> BuildFits(const std::vector<Measurement>& measurements,
                                     std::vector<std::string>* skipped = nullptr);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_OP_FITS_H_
