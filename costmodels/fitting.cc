#include "costmodels/fitting.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>
#include <fmt/format.h>

namespace ditune {
namespace {

// Weighted least squares for t = a + b x in relative error, with Huber re-weighting.
// Returns {a, b} (b = 1 / rate). Unconstrained; the caller clamps.
Eigen::Vector2d RobustLine(const std::vector<FitPoint>& pts, double delta) {
  const int n = static_cast<int>(pts.size());
  Eigen::MatrixXd A(n, 2);
  Eigen::VectorXd y(n);
  Eigen::VectorXd w = Eigen::VectorXd::Ones(n);
  Eigen::Vector2d coef(0, 0);
  for (int iter = 0; iter < 20; ++iter) {
    for (int i = 0; i < n; ++i) {
      // Relative error: divide each row by t_i, times the Huber weight.
      const double s = std::sqrt(w[i]) / pts[i].t;
      A(i, 0) = s;
      A(i, 1) = s * pts[i].x;
      y[i] = s * pts[i].t;
    }
    Eigen::Vector2d next = A.colPivHouseholderQr().solve(y);
    for (int i = 0; i < n; ++i) {
      const double r = std::abs(next[0] + next[1] * pts[i].x - pts[i].t) / pts[i].t;
      w[i] = r <= delta ? 1.0 : delta / r;
    }
    const bool converged = (next - coef).norm() <= 1e-12 * (1 + next.norm());
    coef = next;
    if (converged) break;
  }
  return coef;
}

// Fits one segment, constrained to latency >= 0 and rate > 0.
LatencyRateSegment FitSegment(const std::vector<FitPoint>& pts, double delta) {
  LatencyRateSegment seg;
  seg.x_lo = pts.front().x;
  seg.x_hi = pts.back().x;
  Eigen::Vector2d c = RobustLine(pts, delta);
  if (c[0] < 0 || c[1] <= 0) {
    // Through the origin: t = x / rate, rate = robust ratio.
    std::vector<double> rates;
    for (const auto& p : pts) rates.push_back(p.x / p.t);
    std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
    const double rate = rates[rates.size() / 2];
    if (c[1] <= 0) {
      // Size does not matter in this range: pure latency.
      std::vector<double> ts;
      for (const auto& p : pts) ts.push_back(p.t);
      std::nth_element(ts.begin(), ts.begin() + ts.size() / 2, ts.end());
      seg.latency_s = ts[ts.size() / 2];
      seg.rate = std::numeric_limits<double>::infinity();
      return seg;
    }
    seg.latency_s = 0;
    seg.rate = rate;
    return seg;
  }
  seg.latency_s = c[0];
  seg.rate = 1.0 / c[1];
  return seg;
}

double SegmentSeconds(const LatencyRateSegment& s, double x) {
  return s.latency_s + (std::isinf(s.rate) ? 0.0 : x / s.rate);
}

double SquaredRelError(const std::vector<FitPoint>& pts, size_t lo, size_t hi, double delta,
                       LatencyRateSegment* out) {
  std::vector<FitPoint> part(pts.begin() + static_cast<long>(lo), pts.begin() + static_cast<long>(hi));
  LatencyRateSegment s = FitSegment(part, delta);
  double e = 0;
  for (const auto& p : part) {
    const double r = (SegmentSeconds(s, p.x) - p.t) / p.t;
    e += r * r;
  }
  if (out != nullptr) *out = s;
  return e;
}

}  // namespace

PiecewiseLatencyModel::PiecewiseLatencyModel(std::vector<LatencyRateSegment> segments)
    : segments_(std::move(segments)) {}

double PiecewiseLatencyModel::Seconds(double x) const {
  if (segments_.empty()) return 0;
  for (size_t i = 0; i + 1 < segments_.size(); ++i) {
    if (x < segments_[i + 1].x_lo) return SegmentSeconds(segments_[i], x);
  }
  return SegmentSeconds(segments_.back(), x);
}

nlohmann::json PiecewiseLatencyModel::ToJson() const {
  nlohmann::json segs = nlohmann::json::array();
  for (const auto& s : segments_) {
    segs.push_back({{"x_lo", s.x_lo}, {"x_hi", s.x_hi}, {"latency_s", s.latency_s},
                    {"rate", std::isinf(s.rate) ? nlohmann::json(nullptr) : nlohmann::json(s.rate)}});
  }
  return {{"segments", segs}};
}

StatusOr<PiecewiseLatencyModel> PiecewiseLatencyModel::FromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("segments") || !j["segments"].is_array() || j["segments"].empty()) {
    return Status::Corruption("piecewise model: expected {\"segments\": [...]}");
  }
  std::vector<LatencyRateSegment> segs;
  for (const auto& s : j["segments"]) {
    if (!s.is_object() || !s.contains("x_lo") || !s.contains("latency_s") || !s.contains("rate") ||
        !s["x_lo"].is_number() || !s["latency_s"].is_number()) {
      return Status::Corruption("piecewise model: malformed segment " + s.dump());
    }
    LatencyRateSegment seg;
    seg.x_lo = s["x_lo"].get<double>();
    seg.x_hi = s.value("x_hi", seg.x_lo);
    seg.latency_s = s["latency_s"].get<double>();
    seg.rate = s["rate"].is_number() ? s["rate"].get<double>() : std::numeric_limits<double>::infinity();
    segs.push_back(seg);
  }
  return PiecewiseLatencyModel(std::move(segs));
}

StatusOr<LatencyRateSegment> FitLatencyRate(const std::vector<FitPoint>& points, double huber_delta) {
  if (points.size() < 2) return Status::InvalidArgument("a latency/rate fit needs at least 2 points");
  for (const auto& p : points) {
    if (!(p.x > 0) || !(p.t > 0) || !std::isfinite(p.x) || !std::isfinite(p.t)) {
      return Status::InvalidArgument(fmt::format("fit point ({}, {}) must have size > 0 and time > 0", p.x, p.t));
    }
  }
  std::vector<FitPoint> sorted = points;
  std::sort(sorted.begin(), sorted.end(), [](const FitPoint& a, const FitPoint& b) { return a.x < b.x; });
  return FitSegment(sorted, huber_delta);
}

StatusOr<PiecewiseFitResult> FitPiecewiseLatency(std::vector<FitPoint> points,
                                                 const PiecewiseFitOptions& opt) {
  if (points.size() < 2) return Status::InvalidArgument("a piecewise fit needs at least 2 points");
  for (const auto& p : points) {
    if (!(p.x > 0) || !(p.t > 0) || !std::isfinite(p.x) || !std::isfinite(p.t)) {
      return Status::InvalidArgument(fmt::format("fit point ({}, {}) must have size > 0 and time > 0", p.x, p.t));
    }
  }
  std::sort(points.begin(), points.end(), [](const FitPoint& a, const FitPoint& b) { return a.x < b.x; });
  const size_t n = points.size();
  const size_t m = static_cast<size_t>(std::max(2, opt.min_points_per_segment));

  // Optimal segmentation by dynamic programming over split points (n is small: tens).
  // best[k][j]: least error of the first j points in k segments; splits only between
  // distinct sizes.
  const int kmax = std::max(1, std::min<int>(opt.max_segments, static_cast<int>(n / m)));
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(kmax + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> from(kmax + 1, std::vector<size_t>(n + 1, 0));
  std::vector<std::vector<double>> cost(n + 1, std::vector<double>(n + 1, inf));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + m; j <= n; ++j) {
      if (i > 0 && points[i].x == points[i - 1].x) continue;
      cost[i][j] = SquaredRelError(points, i, j, opt.huber_delta, nullptr);
    }
  }
  best[0][0] = 0;
  for (int k = 1; k <= kmax; ++k) {
    for (size_t j = 1; j <= n; ++j) {
      for (size_t i = 0; i + m <= j; ++i) {
        if (best[k - 1][i] == inf || cost[i][j] == inf) continue;
        const double e = best[k - 1][i] + cost[i][j];
        if (e < best[k][j]) {
          best[k][j] = e;
          from[k][j] = i;
        }
      }
    }
  }
  int chosen = 1;
  if (best[1][n] == inf) {
    // Too few points for the minimum segment size: one segment over everything.
    cost[0][n] = SquaredRelError(points, 0, n, opt.huber_delta, nullptr);
    best[1][n] = cost[0][n];
    from[1][n] = 0;
  }
  for (int k = 2; k <= kmax; ++k) {
    if (best[k][n] < opt.min_improvement * best[chosen][n]) chosen = k;
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t j = n, k = static_cast<size_t>(chosen); k > 0; --k) {
    size_t i = from[k][j];
    ranges.insert(ranges.begin(), {i, j});
    j = i;
  }
  // Merge adjacent ranges until rates do not decrease with size.
  std::vector<LatencyRateSegment> segs;
  auto fit_ranges = [&]() {
    segs.clear();
    for (auto [lo, hi] : ranges) {
      LatencyRateSegment s;
      SquaredRelError(points, lo, hi, opt.huber_delta, &s);
      segs.push_back(s);
    }
  };
  fit_ranges();
  for (bool merged = true; merged && segs.size() > 1;) {
    merged = false;
    for (size_t i = 0; i + 1 < segs.size(); ++i) {
      if (segs[i + 1].rate < segs[i].rate) {
        ranges[i].second = ranges[i + 1].second;
        ranges.erase(ranges.begin() + static_cast<long>(i) + 1);
        fit_ranges();
        merged = true;
        break;
      }
    }
  }
  PiecewiseFitResult result;
  result.model = PiecewiseLatencyModel(segs);
  result.points = static_cast<int>(n);
  std::vector<double> pred, meas;
  for (const auto& p : points) {
    pred.push_back(result.model.Seconds(p.x));
    meas.push_back(p.t);
  }
  result.mape = MeanAbsolutePercentageError(pred, meas);
  return result;
}

StatusOr<double> FitScale(const std::vector<double>& predicted, const std::vector<double>& measured) {
  if (predicted.empty() || predicted.size() != measured.size()) {
    return Status::InvalidArgument("a scale fit needs matching, non-empty predicted and measured lists");
  }
  std::vector<double> ratios;
  for (size_t i = 0; i < predicted.size(); ++i) {
    if (!(predicted[i] > 0) || !(measured[i] > 0)) {
      return Status::InvalidArgument("a scale fit needs positive times");
    }
    ratios.push_back(measured[i] / predicted[i]);
  }
  std::sort(ratios.begin(), ratios.end());
  const size_t k = ratios.size();
  return k % 2 == 1 ? ratios[k / 2] : 0.5 * (ratios[k / 2 - 1] + ratios[k / 2]);
}

double MeanAbsolutePercentageError(const std::vector<double>& predicted, const std::vector<double>& measured) {
  if (predicted.empty()) return 0;
  double s = 0;
  for (size_t i = 0; i < predicted.size(); ++i) s += std::abs(predicted[i] - measured[i]) / measured[i];
  return s / static_cast<double>(predicted.size());
}

}  // namespace ditune
