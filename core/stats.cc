#include "core/stats.h"

#include <algorithm>
#include <cmath>

namespace ditune {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * (static_cast<double>(v.size()) - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
  const double a = v[lo];
  if (hi == lo) return a;
  const double b = *std::min_element(v.begin() + static_cast<std::ptrdiff_t>(lo) + 1, v.end());
  return a + (b - a) * (pos - static_cast<double>(lo));
}

double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

double NearestRank(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  // 1e-9 keeps p x n that is a whole number in floating point (0.95 x 20) on its rank.
  size_t rank = static_cast<size_t>(std::ceil(std::clamp(p, 0.0, 1.0) * static_cast<double>(n) - 1e-9));
  rank = std::clamp<size_t>(rank, 1, n);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank - 1), v.end());
  return v[rank - 1];
}

}  // namespace ditune
