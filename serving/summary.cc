#include "serving/summary.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/stats.h"

namespace ditune::serving {

double CapacityRps(const RequestStream& stream, const std::vector<Server>& servers, const ServiceTable& table,
                   const QueueOptions& options, int gpus) {
  // How often each shape occurs.
  std::vector<double> count(table.shapes(), 0);
  for (const Request& r : stream.requests) count[r.shape] += 1;
  auto per_request = [&](int shape, int type) {
    const int k = std::min(options.max_batch, table.MaxBatch(shape, type));
    return table.Time(shape, type, k).value() / k;
  };
  if (options.policy == Policy::kFcfs) {
    double capacity = 0;
    for (const Server& s : servers) {
      double seconds = 0, requests = 0;
      for (int shape = 0; shape < table.shapes(); ++shape) {
        if (count[shape] == 0 || !table.CanServe(shape, s.type)) continue;
        seconds += count[shape] * per_request(shape, s.type);
        requests += count[shape];
      }
      if (seconds > 0) capacity += requests / seconds;
    }
    return capacity;
  }
  double gpu_seconds = 0, requests = 0;
  for (int shape = 0; shape < table.shapes(); ++shape) {
    if (count[shape] == 0) continue;
    double best = INFINITY;
    for (const Server& s : servers) {
      if (table.CanServe(shape, s.type)) best = std::min(best, per_request(shape, s.type) * s.gpus);
    }
    if (std::isfinite(best)) {
      gpu_seconds += count[shape] * best;
      requests += count[shape];
    }
  }
  return gpu_seconds > 0 ? gpus * requests / gpu_seconds : 0;
}

ServeSummary Summarize(const RequestStream& stream, const QueueRun& run, const SummaryInputs& in) {
  ServeSummary s;
  s.requests = static_cast<int>(stream.requests.size());
  s.rate_rps = in.rate_rps;
  s.capacity_rps = in.capacity_rps;
  s.offered_load = in.capacity_rps > 0 ? in.rate_rps / in.capacity_rps : INFINITY;
  s.percentile = in.percentile;
  s.slo = in.slo;
  if (s.requests == 0) return s;
  std::vector<double> latency;
  latency.reserve(s.requests);
  double queue_sum = 0, service_sum = 0, max_queue = 0;
  Seconds last_finish(0);
  for (const Request& r : stream.requests) {
    const Served& x = run.served[r.id];
    const double l = (x.finish - r.arrival).value();
    latency.push_back(l);
    const double q = (x.start - r.arrival).value();
    queue_sum += q;
    max_queue = std::max(max_queue, q);
    service_sum += (x.finish - x.start).value();
    last_finish = std::max(last_finish, x.finish);
    if (!in.slo || l <= in.slo->value()) ++s.within_slo;
  }
  double latency_sum = 0;
  for (double l : latency) latency_sum += l;
  s.mean_latency = Seconds(latency_sum / s.requests);
  s.mean_queue = Seconds(queue_sum / s.requests);
  s.max_queue = Seconds(max_queue);
  s.mean_service = Seconds(service_sum / s.requests);
  s.horizon = last_finish - stream.requests.front().arrival;
  if (s.horizon.value() > 0) {
    s.utilisation = in.gpus > 0 ? run.busy_gpu_s / (in.gpus * s.horizon.value()) : 0;
    s.goodput_rps = s.within_slo / s.horizon.value();
  }
  s.p50 = Seconds(NearestRank(latency, 0.50));
  s.p95 = Seconds(NearestRank(latency, 0.95));
  s.p99 = Seconds(NearestRank(latency, 0.99));
  s.at_percentile = Seconds(NearestRank(latency, in.percentile / 100.0));
  // A stable queue's backlog stays within a few replicas' worth; one that cannot keep up
  // grows in proportion to the run.
  const int backlog_limit = std::max(50, s.requests / 20);
  if (s.offered_load >= 1) {
    s.stable = false;
    s.unstable_reason = fmt::format("the offered load is {:.2f} of the capacity ({:.3g} of {:.3g} requests/s)",
                                    s.offered_load, s.rate_rps, s.capacity_rps);
  } else if (run.backlog_at_last_arrival > backlog_limit) {
    s.stable = false;
    s.unstable_reason = fmt::format(
        "{} requests were still waiting when the last arrived (more than {}): the queue grows through the run",
        run.backlog_at_last_arrival, backlog_limit);
  }
  return s;
}

}  // namespace ditune::serving
