// Capacity planning for serving: a request stream on a layout of replicas (or a pool of GPUs
// split per request), simulated request by request; the fewest GPUs and the layout that keep
// a latency percentile within an SLO at a rate; the highest rate a layout sustains.
#ifndef DITUNE_SERVING_SERVE_H_
#define DITUNE_SERVING_SERVE_H_

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "serving/layout.h"
#include "serving/queue_sim.h"
#include "serving/requests.h"
#include "serving/service.h"
#include "serving/summary.h"

namespace ditune::serving {

// Where the requests come from, so that the same stream can be made at another rate:
// Poisson arrivals of a mix (regenerated with the same seed), or a trace (its arrival times
// scaled).
struct StreamSource {
  std::vector<MixItem> mix;
  Seconds duration;
  uint64_t seed = 1;
  std::optional<RequestStream> trace;
  double rate_rps = 0;  // the Poisson rate; for a trace, its mean rate
};

// The stream at `rate_rps` (the source's own rate gives the source's stream).
StatusOr<RequestStream> StreamAt(const StreamSource& source, double rate_rps);

struct ServeQuery {
  PricingContext pricing;
  StreamSource source;
  QueueOptions queue;
  std::optional<Seconds> slo;
  double percentile = 99;
};

// One layout (or dynamic pool) served with the query's stream.
struct Evaluation {
  std::string layout;                     // ToString(Layout), or "dynamic over N GPUs: ..."
  int gpus = 0;
  std::vector<ParallelConfig> types;      // the replica configurations
  std::vector<Server> servers;
  std::vector<std::string> server_labels;  // per server: "ulysses=2 on GPUs 0-1"
  ServiceTable table;
  RequestStream stream;  // what was served
  QueueRun run;
  ServeSummary summary;
};

// Serves the stream on `layout` placed on the query's cluster.
StatusOr<Evaluation> ServeLayout(const ServeQuery& query, const Layout& layout);
// Serves it on a pool of `gpus` GPUs where each request takes one of `types` (dynamic policy).
StatusOr<Evaluation> ServeDynamic(const ServeQuery& query, const std::vector<ParallelConfig>& types, int gpus);

// The same servers and table at another rate: the stream remade by StreamAt.
StatusOr<Evaluation> AtRate(const ServeQuery& query, const Evaluation& base, double rate_rps);

// The highest rate (requests/s, within 1%) at which `base`'s servers keep the SLO's
// percentile within it, searched by bisection with the query's stream remade at each rate;
// 0 when even a trickle misses it. Requires query.slo.
StatusOr<double> MaxRateWithinSlo(const ServeQuery& query, const Evaluation& base);

// Latency and utilisation of one layout against offered load.
struct LoadPoint {
  double rate_rps = 0;
  bool stable = true;
  Seconds p50, p99, at_percentile;
  double utilisation = 0;
};
struct LoadCurve {
  std::string layout;
  double capacity_rps = 0;
  std::vector<LoadPoint> points;
};
// `base`'s servers at `points` rates from 10% to 95% of its capacity.
StatusOr<LoadCurve> SweepLoad(const ServeQuery& query, const Evaluation& base, int points = 10);

struct SearchAnswer {
  std::optional<Evaluation> best;   // the fewest GPUs that meet the SLO; among those, the lowest percentile
  std::optional<double> best_max_rate_rps;  // the highest rate `best` sustains within the SLO
  // The stable layouts simulated at the answer's GPU count, lowest percentile first (at most
  // four, `best` among them), without their per-request results: candidates to compare.
  std::vector<Evaluation> finalists;
  std::vector<ParallelConfig> size_configs;  // the configuration chosen for each replica size
  std::vector<std::string> considered;       // one line per layout simulated, in order
  int layouts = 0;                           // layouts looked at
  int unstable = 0;                          // of those, ruled out as unable to hold the rate
  std::string why_none;                      // when nothing meets it
};

// Searches layouts of up to the cluster's GPUs: for each replica size (the divisors of a
// node, then whole nodes doubling), the configuration with the lowest mean service time over
// the stream; layouts of one size, and of two sizes, by total GPUs ascending (the dynamic
// policy: pools of each size). Stops at the first GPU count where a layout meets the SLO.
StatusOr<SearchAnswer> SearchLayouts(const ServeQuery& query);

}  // namespace ditune::serving

#endif  // DITUNE_SERVING_SERVE_H_
