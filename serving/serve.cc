#include "serving/serve.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/stats.h"

namespace ditune::serving {
namespace {

std::string GpuRange(const Server& s) {
  return s.gpus == 1 ? fmt::format("GPU {}", s.first_gpu)
                     : fmt::format("GPUs {}-{}", s.first_gpu, s.first_gpu + s.gpus - 1);
}

// Simulates `stream` on the evaluation's servers and table and fills run and summary.
Status Simulate(const ServeQuery& q, const RequestStream& stream, double rate_rps, Evaluation& e) {
  DITUNE_ASSIGN_OR_RETURN(e.run, SimulateQueue(stream, e.servers, e.table, q.queue));
  SummaryInputs in;
  in.rate_rps = rate_rps;
  in.capacity_rps = CapacityRps(stream, e.servers, e.table, q.queue, e.gpus);
  in.gpus = e.gpus;
  in.slo = q.slo;
  in.percentile = q.percentile;
  e.summary = Summarize(stream, e.run, in);
  e.stream = stream;
  return Status::Ok();
}

// A replica type must serve something: one that serves none of the requests only takes GPUs.
Status CheckTypesServe(const RequestStream& stream, const Evaluation& e) {
  for (int t = 0; t < static_cast<int>(e.types.size()); ++t) {
    bool any = false;
    for (int s = 0; s < e.table.shapes() && !any; ++s) any = e.table.CanServe(s, t);
    if (!any) {
      return Status::InvalidArgument(fmt::format("a replica of {} can serve none of the requests: {}",
                                                 Label(e.types[t]),
                                                 e.table.Why(0, t) + (stream.shapes.size() > 1 ? " (and others)" : "")));
    }
  }
  return Status::Ok();
}

// The stream a query serves, at its own rate: InvalidArgument when no request arrives.
StatusOr<RequestStream> QueryStream(const ServeQuery& q) {
  DITUNE_ASSIGN_OR_RETURN(RequestStream s, StreamAt(q.source, q.source.rate_rps));
  if (s.requests.empty()) {
    return Status::InvalidArgument(fmt::format("no request arrives in {:g} s at {:g} per second: raise --rate or "
                                               "--duration",
                                               q.source.duration.value(), q.source.rate_rps));
  }
  return s;
}

// Mean service time over the stream's requests on type `t`; infinity when it cannot serve
// some of them.
double MeanService(const RequestStream& stream, const ServiceTable& table, int t) {
  double sum = 0;
  for (const Request& r : stream.requests) {
    if (!table.CanServe(r.shape, t)) return INFINITY;
    sum += table.Time(r.shape, t).value();
  }
  return stream.requests.empty() ? INFINITY : sum / stream.requests.size();
}

}  // namespace

StatusOr<RequestStream> StreamAt(const StreamSource& source, double rate_rps) {
  if (source.trace) {
    if (rate_rps == source.rate_rps || source.rate_rps <= 0) return *source.trace;
    RequestStream s = *source.trace;
    const Seconds first = s.requests.front().arrival;
    const double k = source.rate_rps / rate_rps;
    for (Request& r : s.requests) r.arrival = first + (r.arrival - first) * k;
    return s;
  }
  return PoissonRequests(source.mix, rate_rps, source.duration, source.seed);
}

StatusOr<Evaluation> ServeLayout(const ServeQuery& q, const Layout& layout) {
  if (q.queue.policy == Policy::kDynamic) {
    return Status::InvalidArgument("the dynamic policy has no fixed replicas; ServeDynamic serves a pool");
  }
  DITUNE_ASSIGN_OR_RETURN(auto placed, PlaceLayout(layout, q.pricing.cluster));
  DITUNE_ASSIGN_OR_RETURN(RequestStream stream, QueryStream(q));
  Evaluation e;
  e.layout = ToString(layout);
  e.gpus = layout.gpus();
  std::map<std::string, int> type_of;
  for (const auto& g : layout.groups) {
    if (type_of.emplace(ditune::ToString(g.config), static_cast<int>(e.types.size())).second) e.types.push_back(g.config);
  }
  DITUNE_ASSIGN_OR_RETURN(e.table, PriceServiceTimes(q.pricing, stream.shapes, e.types, q.queue.max_batch));
  DITUNE_RETURN_IF_ERROR(CheckTypesServe(stream, e));
  for (const auto& r : placed) {
    Server s{type_of.at(ditune::ToString(r.config)), r.first_gpu, r.gpus};
    e.server_labels.push_back(fmt::format("{} on {}", Label(r.config), GpuRange(s)));
    e.servers.push_back(s);
  }
  DITUNE_RETURN_IF_ERROR(Simulate(q, stream, q.source.rate_rps, e));
  return e;
}

namespace {

// A pool of `gpus` GPUs where each request takes a placement of one of `types` (priced in
// `table`), not yet simulated. Types larger than the pool have no placement.
StatusOr<Evaluation> DynamicPool(const Cluster& cluster, const std::vector<ParallelConfig>& types,
                                 const ServiceTable& table, int gpus) {
  Evaluation e;
  e.gpus = gpus;
  e.types = types;
  e.table = table;
  std::vector<int> type_gpus;
  std::string names;
  for (const auto& t : types) {
    type_gpus.push_back(t.world_size());
    if (t.world_size() <= gpus) names += (names.empty() ? "" : " | ") + Label(t);
  }
  e.layout = fmt::format("dynamic over {} GPUs: {}", gpus, names);
  e.servers = DynamicPlacements(gpus, std::min(gpus, cluster.gpus_per_node()), type_gpus);
  if (e.servers.empty()) {
    return Status::InvalidArgument(fmt::format("none of the configurations can be placed on {} GPUs in nodes of {}",
                                               gpus, cluster.gpus_per_node()));
  }
  for (const Server& s : e.servers) e.server_labels.push_back(fmt::format("{} on {}", Label(types[s.type]), GpuRange(s)));
  return e;
}

// The query as the dynamic policy runs it: a request's deadline is the SLO unless given.
ServeQuery AsDynamic(const ServeQuery& q) {
  ServeQuery d = q;
  d.queue.policy = Policy::kDynamic;
  if (!d.queue.deadline) d.queue.deadline = q.slo;
  return d;
}

bool IsDynamic(const Evaluation& e) { return e.layout.starts_with("dynamic"); }

}  // namespace

StatusOr<Evaluation> ServeDynamic(const ServeQuery& q, const std::vector<ParallelConfig>& types, int gpus) {
  const Cluster& cluster = q.pricing.cluster;
  if (gpus < 1 || gpus > cluster.gpus()) {
    return Status::InvalidArgument(fmt::format("a pool of {} GPUs on a cluster of {}", gpus, cluster.gpus()));
  }
  if (types.empty()) return Status::InvalidArgument("the dynamic policy needs at least one configuration");
  DITUNE_ASSIGN_OR_RETURN(RequestStream stream, QueryStream(q));
  DITUNE_ASSIGN_OR_RETURN(ServiceTable table, PriceServiceTimes(q.pricing, stream.shapes, types, q.queue.max_batch));
  DITUNE_ASSIGN_OR_RETURN(Evaluation e, DynamicPool(cluster, types, table, gpus));
  DITUNE_RETURN_IF_ERROR(CheckTypesServe(stream, e));
  DITUNE_RETURN_IF_ERROR(Simulate(AsDynamic(q), stream, q.source.rate_rps, e));
  return e;
}

StatusOr<Evaluation> AtRate(const ServeQuery& q, const Evaluation& base, double rate_rps) {
  DITUNE_ASSIGN_OR_RETURN(RequestStream stream, StreamAt(q.source, rate_rps));
  Evaluation e = base;
  DITUNE_RETURN_IF_ERROR(Simulate(IsDynamic(base) ? AsDynamic(q) : q, stream, rate_rps, e));
  return e;
}

StatusOr<double> MaxRateWithinSlo(const ServeQuery& q, const Evaluation& base) {
  if (!q.slo) return Status::InvalidArgument("the highest rate within an SLO needs --slo");
  double hi = base.summary.capacity_rps;
  if (!(hi > 0)) return 0.0;
  double lo = 0;
  // The lowest rate tried: below it a stream of the query's length holds too few requests
  // for a percentile.
  const double floor = hi / 100;
  DITUNE_ASSIGN_OR_RETURN(Evaluation e, AtRate(q, base, floor));
  if (!e.summary.meets_slo()) return 0.0;
  lo = floor;
  while (hi - lo > 0.01 * hi) {
    const double mid = (lo + hi) / 2;
    DITUNE_ASSIGN_OR_RETURN(Evaluation m, AtRate(q, base, mid));
    (m.summary.meets_slo() ? lo : hi) = mid;
  }
  return lo;
}

StatusOr<LoadCurve> SweepLoad(const ServeQuery& q, const Evaluation& base, int points) {
  LoadCurve curve;
  curve.layout = base.layout;
  curve.capacity_rps = base.summary.capacity_rps;
  if (!(curve.capacity_rps > 0) || points < 2) return curve;
  for (int i = 0; i < points; ++i) {
    const double rate = curve.capacity_rps * (0.10 + 0.85 * i / (points - 1));
    DITUNE_ASSIGN_OR_RETURN(Evaluation e, AtRate(q, base, rate));
    curve.points.push_back({rate, e.summary.stable, e.summary.p50, e.summary.p99, e.summary.at_percentile,
                            e.summary.utilisation});
  }
  return curve;
}

StatusOr<SearchAnswer> SearchLayouts(const ServeQuery& q) {
  if (!q.slo) return Status::InvalidArgument("a layout search needs --slo");
  const Cluster& cluster = q.pricing.cluster;
  const int n = cluster.gpus(), per_node = cluster.gpus_per_node();
  DITUNE_ASSIGN_OR_RETURN(RequestStream stream, QueryStream(q));
  SearchAnswer answer;
  // Replica sizes: the divisors of a node, then whole nodes doubling.
  std::vector<int> sizes;
  for (int d = 1; d <= per_node; ++d) {
    if (per_node % d == 0 && d <= n) sizes.push_back(d);
  }
  for (int d = 2 * per_node; d <= n; d *= 2) sizes.push_back(d);
  // The most frequent shape picks each size's candidate configurations.
  std::vector<int> count(stream.shapes.size(), 0);
  for (const Request& r : stream.requests) ++count[r.shape];
  const int dominant = static_cast<int>(std::max_element(count.begin(), count.end()) - count.begin());
  std::vector<std::string> size_notes;
  for (int d : sizes) {
    DITUNE_ASSIGN_OR_RETURN(Cluster replica, ResolveCluster(ReplicaClusterSpec(cluster, d), *q.pricing.catalog));
    PlanOptions opt = q.pricing.plan;
    opt.objective = Objective::kLatency;
    opt.top_k = 8;
    auto plan = MakePlan(*q.pricing.catalog, WorkloadOf(stream.shapes[dominant], q.pricing.base), replica,
                         *q.pricing.fits, opt);
    if (!plan.ok()) {
      if (plan.status().code() == Status::Code::kInfeasible) continue;
      return plan.status();
    }
    std::vector<ParallelConfig> configs;
    for (const auto& c : plan->ranked) configs.push_back(c.config);
    DITUNE_ASSIGN_OR_RETURN(ServiceTable t, PriceServiceTimes(q.pricing, stream.shapes, configs, q.queue.max_batch));
    int best = -1;
    double best_mean = INFINITY;
    for (int i = 0; i < static_cast<int>(configs.size()); ++i) {
      const double m = MeanService(stream, t, i);
      if (m < best_mean) {
        best = i;
        best_mean = m;
      }
    }
    if (best >= 0) answer.size_configs.push_back(configs[best]);
  }
  if (answer.size_configs.empty()) {
    answer.why_none = fmt::format("no replica of up to {} {} serves every request shape", n, cluster.gpu->id);
    return answer;
  }
  const std::vector<ParallelConfig>& types = answer.size_configs;
  DITUNE_ASSIGN_OR_RETURN(ServiceTable table, PriceServiceTimes(q.pricing, stream.shapes, types, q.queue.max_batch));
  // Without any queueing each request still takes its fastest service time.
  {
    std::vector<double> fastest;
    for (const Request& r : stream.requests) {
      double f = INFINITY;
      for (int t = 0; t < table.types(); ++t) {
        if (table.CanServe(r.shape, t)) f = std::min(f, table.Time(r.shape, t).value());
      }
      fastest.push_back(f);
    }
    const double floor = NearestRank(fastest, q.percentile / 100.0);
    if (floor > q.slo->value()) {
      answer.why_none = fmt::format(
          "no layout of {} can meet it: without any queueing, the p{:g} of the fastest service times is {:.3g} s "
          "(a larger GPU, fewer steps or a smaller size would)",
          cluster.gpu->id, q.percentile, floor);
      return answer;
    }
  }
  std::vector<Evaluation> at_count;  // stable layouts of the GPU count being searched
  auto consider = [&](Evaluation e) -> Status {
    ++answer.layouts;
    const double capacity =
        CapacityRps(stream, e.servers, e.table, IsDynamic(e) ? AsDynamic(q).queue : q.queue, e.gpus);
    if (q.source.rate_rps >= capacity) {
      ++answer.unstable;
      return Status::Ok();
    }
    DITUNE_RETURN_IF_ERROR(Simulate(IsDynamic(e) ? AsDynamic(q) : q, stream, q.source.rate_rps, e));
    const ServeSummary& s = e.summary;
    answer.considered.push_back(fmt::format("{} GPUs  {}  p{:g} {}  utilisation {:.0f}%{}", e.gpus, e.layout,
                                            q.percentile,
                                            s.stable ? fmt::format("{:.3g} s", s.at_percentile.value()) : "unstable",
                                            100 * s.utilisation, s.meets_slo() ? "  meets the SLO" : ""));
    if (s.stable) {
      Evaluation light = e;
      light.run.served.clear();
      light.stream.requests.clear();
      at_count.push_back(std::move(light));
    }
    if (s.meets_slo() && (!answer.best || s.at_percentile < answer.best->summary.at_percentile)) {
      answer.best = std::move(e);
    }
    return Status::Ok();
  };
  auto fixed = [&](std::vector<std::pair<int, int>> groups) -> Status {  // (type, count)
    Layout layout;
    for (auto [t, c] : groups) layout.groups.push_back({c, types[t]});
    auto placed = PlaceLayout(layout, cluster);
    if (!placed.ok()) return Status::Ok();
    Evaluation e;
    e.layout = ToString(layout);
    e.gpus = layout.gpus();
    e.types = types;
    e.table = table;
    for (const auto& r : *placed) {
      const int t = groups[r.group].first;
      e.servers.push_back({t, r.first_gpu, r.gpus});
      e.server_labels.push_back(fmt::format("{} on {}", Label(r.config), GpuRange(e.servers.back())));
    }
    return consider(std::move(e));
  };
  for (int g = 1; g <= n && !answer.best; ++g) {
    at_count.clear();
    if (q.queue.policy == Policy::kDynamic) {
      if (!(g <= per_node ? per_node % g == 0 : g % per_node == 0)) continue;
      auto e = DynamicPool(cluster, types, table, g);
      if (e.ok()) DITUNE_RETURN_IF_ERROR(consider(std::move(*e)));
      continue;
    }
    for (int t = 0; t < static_cast<int>(types.size()); ++t) {
      const int d = types[t].world_size();
      if (g % d == 0) DITUNE_RETURN_IF_ERROR(fixed({{t, g / d}}));
    }
    for (int t1 = 0; t1 < static_cast<int>(types.size()); ++t1) {
      for (int t2 = 0; t2 < static_cast<int>(types.size()); ++t2) {
        const int d1 = types[t1].world_size(), d2 = types[t2].world_size();
        if (d1 <= d2) continue;
        for (int a = 1; g - a * d1 >= d2; ++a) {
          if ((g - a * d1) % d2 == 0) DITUNE_RETURN_IF_ERROR(fixed({{t1, a}, {t2, (g - a * d1) / d2}}));
        }
      }
    }
  }
  if (!answer.best) {
    answer.why_none = fmt::format("no layout of up to {} {} meets it at {:.3g} requests/s ({} layouts, {} unable to "
                                  "hold the rate)",
                                  n, cluster.gpu->id, q.source.rate_rps, answer.layouts, answer.unstable);
    return answer;
  }
  std::stable_sort(at_count.begin(), at_count.end(), [](const Evaluation& a, const Evaluation& b) {
    return a.summary.at_percentile < b.summary.at_percentile;
  });
  if (at_count.size() > 4) at_count.resize(4);
  answer.finalists = std::move(at_count);
  DITUNE_ASSIGN_OR_RETURN(answer.best_max_rate_rps, MaxRateWithinSlo(q, *answer.best));
  return answer;
}

}  // namespace ditune::serving
