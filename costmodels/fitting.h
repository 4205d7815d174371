// Robust least-squares fitting of "time = latency + size / rate" per size range.
//
// The same shape serves communication (size = bus bytes, rate = bus bandwidth) and compute
// (size = FLOPs or bytes, rate = achieved FLOP/s or bandwidth): a saturating efficiency
// curve e(x) = e_max x / (x + x_half) is exactly latency + x / rate with
// rate = peak e_max and latency = x_half / rate.
#ifndef DITUNE_COSTMODELS_FITTING_H_
#define DITUNE_COSTMODELS_FITTING_H_

#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ditune {

struct FitPoint {
  double x = 0;  // size (bytes or FLOPs), > 0
  double t = 0;  // measured seconds, > 0
};

// One size range [x_lo, x_hi) with its own latency and rate.
struct LatencyRateSegment {
  double x_lo = 0;
  double x_hi = 0;
  double latency_s = 0;  // >= 0
  double rate = 0;       // size units per second, > 0
};

// A piecewise latency + size / rate model. Sizes below the first segment use the first,
// above the last use the last. Rates never decrease with size.
class PiecewiseLatencyModel {
 public:
  PiecewiseLatencyModel() = default;
  explicit PiecewiseLatencyModel(std::vector<LatencyRateSegment> segments);

  // Seconds at size x (the unit of the segments' latencies and rates).
  double TimeAt(double x) const;
  const std::vector<LatencyRateSegment>& segments() const { return segments_; }
  bool empty() const { return segments_.empty(); }

  nlohmann::json ToJson() const;
  static StatusOr<PiecewiseLatencyModel> FromJson(const nlohmann::json& j);

 private:
  std::vector<LatencyRateSegment> segments_;
};

struct PiecewiseFitOptions {
  int max_segments = 3;
  int min_points_per_segment = 3;
  // A further segment must cut the fit's loss by at least this factor: the Huber loss of the
  // relative errors (half their square within huber_delta, linear beyond, so that outliers
  // do not buy segments), unless the fit is already exact to ~1e-6.
  double min_improvement = 0.5;
  double huber_delta = 0.05;  // relative residual beyond which a point is down-weighted
};

struct PiecewiseFitResult {
  PiecewiseLatencyModel model;
  double mape = 0;  // mean |predicted - measured| / measured over the points, a fraction
  int points = 0;
};

// Fits time = latency + x / rate in relative error (each point weighs 1 / t^2), robustly
// (Huber IRLS), splitting the size axis into up to max_segments ranges where that pays
// (a protocol or algorithm switch), then merging adjacent ranges until rates do not
// decrease with size. Latencies are clamped at 0. Needs >= 2 points with distinct x.
// InvalidArgument naming the point when a size or time is not finite and > 0, or when
// size / time or 1 / time is so large that sums of its square overflow (callers with
// untrusted data screen points first, as BuildFits does with measurement.h's bounds).
//
// Cost: O(n log n) time and O(n) memory in the n points. Splits are searched over at most
// 256 candidates (every boundary between distinct sizes when there are fewer, else quantiles
// of the points, each chosen split then refined over all boundaries near it) with each
// range's weighted least-squares loss O(1) from prefix sums, re-weighted by Huber weights
// twice; the chosen ranges are then fitted robustly, O(n) per range. 100,000 points fit in
// about 0.1 s and 20 MB (docs/PERFORMANCE.md, bench_fitting).
StatusOr<PiecewiseFitResult> FitPiecewiseLatency(std::vector<FitPoint> points,
                                                 const PiecewiseFitOptions& options = {});

// Fits time = latency + x / rate on all points as one range (robust, relative error).
StatusOr<LatencyRateSegment> FitLatencyRate(const std::vector<FitPoint>& points, double huber_delta = 0.05);

// Fits a single scale factor k minimising relative error of measured ~ k * predicted.
// Returns the weighted median of measured / predicted ratios (robust to outliers).
StatusOr<double> FitScale(const std::vector<double>& predicted, const std::vector<double>& measured);

double MeanAbsolutePercentageError(const std::vector<double>& predicted, const std::vector<double>& measured);

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_FITTING_H_
