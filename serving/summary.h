// What a serving simulation comes to: latency percentiles, queueing, utilisation, goodput,
// and whether the layout holds the rate at all.
#ifndef DITUNE_SERVING_SUMMARY_H_
#define DITUNE_SERVING_SUMMARY_H_

#include <optional>
#include <string>
#include <vector>

#include "core/units.h"
#include "serving/queue_sim.h"
#include "serving/requests.h"

namespace ditune::serving {


// Requests per second the servers complete at saturation.
//  - fcfs: every replica serves the mix as it arrives, so the capacity is the sum over
//    replicas of 1 / (mean service time of the requests it can serve);
//  - size-aware and dynamic: an upper bound, every request on the type that serves it with
//    the fewest GPU-seconds: GPUs / mean GPU-seconds per request.
// With batching, service times are per request at the largest batch.
double CapacityRps(const RequestStream& stream, const std::vector<Server>& servers, const ServiceTable& table,
                   const QueueOptions& options, int gpus);

struct SummaryInputs {
  double rate_rps = 0;      // offered: the Poisson rate, or the trace's mean rate
  double capacity_rps = 0;  // CapacityRps
  int gpus = 0;             // GPUs the layout takes
  std::optional<Seconds> slo;
  double percentile = 99;   // the one the SLO is on
};

struct ServeSummary {
  int requests = 0;
  double rate_rps = 0;
  double capacity_rps = 0;
  double offered_load = 0;  // rate / capacity
  // False when the offered load is 1 or more, or the queue was still growing at the end
  // (then the percentiles describe the length of the run, not the layout, and are not given).
  bool stable = true;
  std::string unstable_reason;
  Seconds p50, p95, p99, at_percentile;  // latency: finish - arrival
  double percentile = 99;
  Seconds mean_latency, mean_queue, max_queue, mean_service;
  double utilisation = 0;  // busy GPU-seconds / (GPUs x horizon)
  double goodput_rps = 0;  // requests finished within the SLO (all, without one) per second
  int within_slo = 0;
  Seconds horizon;         // first arrival to last finish
  std::optional<Seconds> slo;
  // Met: stable and the percentile within the SLO.
  bool meets_slo() const { return stable && slo && at_percentile <= *slo; }
};

ServeSummary Summarize(const RequestStream& stream, const QueueRun& run, const SummaryInputs& inputs);

}  // namespace ditune::serving

#endif  // DITUNE_SERVING_SUMMARY_H_
