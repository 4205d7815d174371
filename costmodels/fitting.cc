#include "costmodels/fitting.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "core/stats.h"

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
    const double rate = Median(rates);
    if (c[1] <= 0) {
      // Size does not matter in this range: pure latency.
      std::vector<double> ts;
      for (const auto& p : pts) ts.push_back(p.t);
      seg.latency_s = Median(ts);
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

// Candidate split points the segmentation search tries at most: every boundary between
// distinct sizes when there are fewer, else this many at quantiles of the points, each
// chosen split then refined over all boundaries between its neighbouring candidates.
constexpr size_t kMaxCandidateSplits = 256;
// Huber re-weighting rounds of the segmentation search (each: a search, then robust
// weights from the finest segmentation found), and IRLS passes per round.
constexpr int kRobustRounds = 2;
constexpr int kIrlsPasses = 10;
// A fit whose mean robust loss is below this (relative RMS error ~1.4e-6, below any
// timer's resolution) is exact: splitting it further only fits rounding noise.
constexpr double kExactMeanLoss = 1e-12;

// Relative-error least squares through sufficient statistics. With v = 1 / t and u = x / t
// the relative residual of t ~ a + b x is a v + b u - 1, so a weighted fit of any run of
// points needs only these sums, and prefix sums over the sorted points make every run O(1).
// Long double: differences of prefix sums of u^2 over 1e5 points keep more digits.
struct Moments {
  long double w = 0, v = 0, u = 0, vv = 0, uv = 0, uu = 0;

  void Add(double weight, const FitPoint& p) {
    const long double vi = 1.0L / p.t;
    const long double ui = static_cast<long double>(p.x) / p.t;
    w += weight;
    v += weight * vi;
    u += weight * ui;
    vv += weight * vi * vi;
    uv += weight * vi * ui;
    uu += weight * ui * ui;
  }
  Moments operator-(const Moments& o) const {
    return {w - o.w, v - o.v, u - o.u, vv - o.vv, uv - o.uv, uu - o.uu};
  }
};

struct LineFit {
  double a = 0;     // latency, s (>= 0)
  double b = 0;     // 1 / rate, s per size unit (>= 0)
  double loss = 0;  // sum of w r^2 over the run, r the relative residual
};

// Least sum of w (a v + b u - 1)^2 subject to a >= 0 and b >= 0, exact for two unknowns:
// the unconstrained optimum when it is feasible, else the better of the two one-term fits
// (through the origin: a = 0; size-independent: b = 0).
LineFit SolveMoments(const Moments& m) {
  LineFit best;
  if (!(m.w > 0) || !(m.vv > 0) || !(m.uu > 0)) return best;
  const long double loss_a_only = m.w - m.v * m.v / m.vv;
  const long double loss_b_only = m.w - m.u * m.u / m.uu;
  if (loss_a_only <= loss_b_only) {
    best = {static_cast<double>(m.v / m.vv), 0.0, static_cast<double>(loss_a_only)};
  } else {
    best = {0.0, static_cast<double>(m.u / m.uu), static_cast<double>(loss_b_only)};
  }
  const long double det = m.vv * m.uu - m.uv * m.uv;
  if (det > 1e-12L * m.vv * m.uu) {  // else all sizes are (nearly) one: a one-term fit
    const long double a = (m.uu * m.v - m.uv * m.u) / det;
    const long double b = (m.vv * m.u - m.uv * m.v) / det;
    const long double loss = m.w - (a * m.v + b * m.u);
    if (a >= 0 && b >= 0 && loss < best.loss) {
      best = {static_cast<double>(a), static_cast<double>(b), static_cast<double>(loss)};
    }
  }
  best.loss = std::max(0.0, best.loss);
  return best;
}

// Huber loss of relative residuals: r^2 / 2 within delta, linear beyond (an outlier
// counts as much as a residual of about 2 delta^2 per unit of |r|, not r^2).
double HuberLoss(double r, double delta) {
  const double a = std::abs(r);
  return a <= delta ? 0.5 * r * r : delta * (a - 0.5 * delta);
}

// Robust loss of the robust fit (FitSegment) of points [lo, hi), the fit in `out`.
double SegmentLoss(const std::vector<FitPoint>& pts, size_t lo, size_t hi, double delta,
                   LatencyRateSegment* out) {
  std::vector<FitPoint> part(pts.begin() + static_cast<long>(lo), pts.begin() + static_cast<long>(hi));
  LatencyRateSegment s = FitSegment(part, delta);
  double e = 0;
  for (const auto& p : part) e += HuberLoss((SegmentSeconds(s, p.x) - p.t) / p.t, delta);
  if (out != nullptr) *out = s;
  return e;
}

// Huber IRLS weights of points [lo, hi) for one line through them, a few passes.
void UpdateHuberWeights(const std::vector<FitPoint>& pts, size_t lo, size_t hi, double delta,
                        std::vector<double>* weights) {
  std::vector<double>& w = *weights;
  for (int pass = 0; pass < kIrlsPasses; ++pass) {
    Moments m;
    for (size_t i = lo; i < hi; ++i) m.Add(w[i], pts[i]);
    const LineFit f = SolveMoments(m);
    bool changed = false;
    for (size_t i = lo; i < hi; ++i) {
      const double r = std::abs(f.a + f.b * pts[i].x - pts[i].t) / pts[i].t;
      const double next = r <= delta ? 1.0 : delta / r;
      changed = changed || std::abs(next - w[i]) > 1e-6;
      w[i] = next;
    }
    if (!changed) break;
  }
}

// The best segmentation of sorted points into 1..kmax runs of at least m points, each
// starting at a distinct size, under the weighted least-squares loss of each run's line.
// O(n + kmax C^2) for C <= kMaxCandidateSplits candidates. splits[k] holds the run starts
// after the first (k - 1 of them) of the best k-run segmentation; empty where none exists.
class Segmenter {
 public:
  Segmenter(const std::vector<FitPoint>& pts, size_t m) : pts_(pts), m_(m) {
    for (size_t i = 1; i < pts.size(); ++i) {
      if (pts[i].x != pts[i - 1].x) boundaries_.push_back(i);
    }
    cand_.push_back(0);
    if (boundaries_.size() <= kMaxCandidateSplits) {
      cand_.insert(cand_.end(), boundaries_.begin(), boundaries_.end());
    } else {
      const size_t n = pts.size();
      for (size_t q = 1; q <= kMaxCandidateSplits; ++q) {
        const size_t target = q * n / (kMaxCandidateSplits + 1);
        auto it = std::lower_bound(boundaries_.begin(), boundaries_.end(), target);
        if (it != boundaries_.end() && *it > cand_.back()) cand_.push_back(*it);
      }
    }
    cand_.push_back(pts.size());
  }

  // Recomputes the prefix sums for point weights `w` (Huber weights, 1 for plain LS).
  void SetWeights(const std::vector<double>& w) {
    prefix_.assign(pts_.size() + 1, Moments{});
    Moments run;
    for (size_t i = 0; i < pts_.size(); ++i) {
      run.Add(w[i], pts_[i]);
      prefix_[i + 1] = run;
    }
  }

  double Cost(size_t lo, size_t hi) const {
    if (hi < lo + m_) return std::numeric_limits<double>::infinity();
    return SolveMoments(prefix_[hi] - prefix_[lo]).loss;
  }

  std::vector<std::vector<size_t>> Search(int kmax) const {
    const double inf = std::numeric_limits<double>::infinity();
    const size_t c = cand_.size() - 1;  // candidate positions 0..c, cand_[c] = n
    std::vector<std::vector<double>> best(kmax + 1, std::vector<double>(c + 1, inf));
    std::vector<std::vector<size_t>> from(kmax + 1, std::vector<size_t>(c + 1, 0));
    best[0][0] = 0;
    for (int k = 1; k <= kmax; ++k) {
      for (size_t j = 1; j <= c; ++j) {
        for (size_t i = 0; i < j; ++i) {
          if (best[k - 1][i] == inf) continue;
          const double e = best[k - 1][i] + Cost(cand_[i], cand_[j]);
          if (e < best[k][j]) {
            best[k][j] = e;
            from[k][j] = i;
          }
        }
      }
    }
    std::vector<std::vector<size_t>> splits(kmax + 1);
    for (int k = 1; k <= kmax; ++k) {
      if (best[k][c] == inf) continue;
      std::vector<size_t> at;  // candidate indices of the run starts after the first
      for (size_t j = c, kk = static_cast<size_t>(k); kk > 1; --kk) {
        j = from[kk][j];
        at.insert(at.begin(), j);
      }
      splits[k] = Refine(at);
    }
    return splits;
  }

 private:
  // Moves each split to the best distinct-size boundary between its neighbouring
  // candidates, the other splits held (one sweep; a no-op when every boundary was a
  // candidate).
  std::vector<size_t> Refine(const std::vector<size_t>& at) const {
    std::vector<size_t> split;
    for (size_t a : at) split.push_back(cand_[a]);
    for (size_t s = 0; s < split.size(); ++s) {
      const size_t lo = s == 0 ? 0 : split[s - 1];
      const size_t hi = s + 1 == split.size() ? pts_.size() : split[s + 1];
      const size_t left = cand_[at[s] - 1];
      const size_t right = cand_[at[s] + 1];
      auto first = std::upper_bound(boundaries_.begin(), boundaries_.end(), left);
      double best = Cost(lo, split[s]) + Cost(split[s], hi);
      for (auto it = first; it != boundaries_.end() && *it < right; ++it) {
        const double e = Cost(lo, *it) + Cost(*it, hi);
        if (e < best) {
          best = e;
          split[s] = *it;
        }
      }
    }
    return split;
  }

  const std::vector<FitPoint>& pts_;
  const size_t m_;
  std::vector<size_t> boundaries_;  // indices i > 0 with x[i] != x[i - 1]
  std::vector<size_t> cand_;        // 0, candidate run starts, n
  std::vector<Moments> prefix_;     // prefix_[i]: moments of points [0, i)
};

// Checks a point the fit can take: size and time finite and > 0, and 1 / t and x / t small
// enough that sums of their squares over all points stay finite.
Status CheckFitPoint(const FitPoint& p, size_t n) {
  if (!(p.x > 0) || !(p.t > 0) || !std::isfinite(p.x) || !std::isfinite(p.t)) {
    return Status::InvalidArgument(fmt::format("fit point ({}, {}) must have size > 0 and time > 0", p.x, p.t));
  }
  const double v = 1.0 / p.t;
  const double u = p.x / p.t;
  const double count = static_cast<double>(n);
  if (!std::isfinite(v * v * count) || !std::isfinite(u * u * count)) {
    return Status::InvalidArgument(fmt::format(
        "fit point ({}, {}): size / time = {} per second or 1 / time overflows the least-squares sums",
        p.x, p.t, u));
  }
  return Status::Ok();
}

}  // namespace

PiecewiseLatencyModel::PiecewiseLatencyModel(std::vector<LatencyRateSegment> segments)
    : segments_(std::move(segments)) {}

double PiecewiseLatencyModel::TimeAt(double x) const {
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
  for (const auto& p : points) DITUNE_RETURN_IF_ERROR(CheckFitPoint(p, points.size()));
  std::vector<FitPoint> sorted = points;
  std::sort(sorted.begin(), sorted.end(), [](const FitPoint& a, const FitPoint& b) { return a.x < b.x; });
  return FitSegment(sorted, huber_delta);
}

StatusOr<PiecewiseFitResult> FitPiecewiseLatency(std::vector<FitPoint> points,
                                                 const PiecewiseFitOptions& opt) {
  if (points.size() < 2) return Status::InvalidArgument("a piecewise fit needs at least 2 points");
  for (const auto& p : points) DITUNE_RETURN_IF_ERROR(CheckFitPoint(p, points.size()));
  std::sort(points.begin(), points.end(), [](const FitPoint& a, const FitPoint& b) { return a.x < b.x; });
  const size_t n = points.size();
  const size_t m = static_cast<size_t>(std::max(2, opt.min_points_per_segment));
  const int kmax = std::max(1, std::min<int>(opt.max_segments, static_cast<int>(n / m)));

  // The best segmentation for each number of runs: a search over candidate splits with
  // O(1) weighted least-squares costs, re-weighted (Huber) from the finest segmentation so
  // outliers do not place splits, then refitted robustly.
  std::vector<std::vector<size_t>> splits(kmax + 1);
  if (kmax > 1) {
    Segmenter segmenter(points, m);
    std::vector<double> weights(n, 1.0);
    for (int round = 0;; ++round) {
      segmenter.SetWeights(weights);
      splits = segmenter.Search(kmax);
      if (round == kRobustRounds) break;
      int finest = kmax;
      while (finest > 1 && splits[finest].empty()) --finest;
      for (size_t s = 0; s <= splits[finest].size(); ++s) {
        const size_t lo = s == 0 ? 0 : splits[finest][s - 1];
        const size_t hi = s == splits[finest].size() ? n : splits[finest][s];
        UpdateHuberWeights(points, lo, hi, opt.huber_delta, &weights);
      }
    }
  }
  splits[1].clear();  // one run over everything, whatever the minimum run length
  auto ranges_of = [n](const std::vector<size_t>& split) {
    std::vector<std::pair<size_t, size_t>> ranges;
    size_t lo = 0;
    for (size_t s : split) {
      ranges.push_back({lo, s});
      lo = s;
    }
    ranges.push_back({lo, n});
    return ranges;
  };

  // How many runs: a further run must cut the robust loss of the robust fits by
  // min_improvement, unless the fit is already exact.
  std::vector<double> loss(kmax + 1, std::numeric_limits<double>::infinity());
  for (int k = 1; k <= kmax; ++k) {
    if (k > 1 && splits[k].empty()) continue;
    loss[k] = 0;
    for (auto [lo, hi] : ranges_of(splits[k])) loss[k] += SegmentLoss(points, lo, hi, opt.huber_delta, nullptr);
  }
  int chosen = 1;
  const double exact = kExactMeanLoss * static_cast<double>(n);
  for (int k = 2; k <= kmax; ++k) {
    if (loss[chosen] > exact && loss[k] < opt.min_improvement * loss[chosen]) chosen = k;
  }
  std::vector<std::pair<size_t, size_t>> ranges = ranges_of(splits[chosen]);

  // Merge adjacent ranges until rates do not decrease with size.
  std::vector<LatencyRateSegment> segs(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    SegmentLoss(points, ranges[i].first, ranges[i].second, opt.huber_delta, &segs[i]);
  }
  for (bool merged = true; merged && segs.size() > 1;) {
    merged = false;
    for (size_t i = 0; i + 1 < segs.size(); ++i) {
      if (segs[i + 1].rate < segs[i].rate) {
        ranges[i].second = ranges[i + 1].second;
        ranges.erase(ranges.begin() + static_cast<long>(i) + 1);
        segs.erase(segs.begin() + static_cast<long>(i) + 1);
        SegmentLoss(points, ranges[i].first, ranges[i].second, opt.huber_delta, &segs[i]);
        merged = true;
        break;
      }
    }
  }
  PiecewiseFitResult result;
  result.model = PiecewiseLatencyModel(segs);
  result.points = static_cast<int>(n);
  double sum = 0;
  for (const auto& p : points) sum += std::abs(result.model.TimeAt(p.x) - p.t) / p.t;
  result.mape = sum / static_cast<double>(n);
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
