// Order statistics, one convention for the whole project.
//
// Quantile is the linear interpolation between order statistics that R and NumPy use by
// default (Hyndman and Fan's type 7): for n sorted values v[0..n-1], position q (n - 1) and
// the value interpolated there. Its median is the middle value, or the mean of the middle two
// for an even count. Every median ditune stores or prints (of timed repetitions, of ranks, of
// ratios in a fit) and every quantile of an error distribution is this one, so a stored
// "median" does not depend on which code wrote the row.
//
// NearestRank is the one other order statistic: the smallest observed value with at least a
// fraction p of the values at or below it (an observation, never an interpolation). It is
// kept for what is conventionally a nearest-rank percentile: serving latency percentiles
// (p50/p95/p99 of requests, as load generators report them) and the p10/p90 spreads stored
// beside a median.
#ifndef DITUNE_CORE_STATS_H_
#define DITUNE_CORE_STATS_H_

#include <vector>

namespace ditune {

// Type-7 quantile of `values` (any order) at q in [0, 1]; 0 for no values.
double Quantile(std::vector<double> values, double q);
// Quantile(values, 0.5).
double Median(std::vector<double> values);
// The nearest-rank value at fraction p in [0, 1] (p = 0: the smallest); 0 for no values.
double NearestRank(std::vector<double> values, double p);

}  // namespace ditune

#endif  // DITUNE_CORE_STATS_H_
