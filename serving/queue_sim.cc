#include "serving/queue_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#include <fmt/format.h>

#include "core/enum_names.h"
#include "simulator/event_queue.h"

namespace ditune::serving {

ServiceTable::ServiceTable(int shapes, int types, int max_batch)
    : shapes_(shapes), types_(types), max_batch_(std::max(1, max_batch)),
      seconds_(static_cast<size_t>(shapes) * types * max_batch_, std::numeric_limits<double>::quiet_NaN()),
      why_(static_cast<size_t>(shapes) * types) {}

size_t ServiceTable::At(int shape, int type, int batch) const {
  return (static_cast<size_t>(shape) * types_ + type) * max_batch_ + (batch - 1);
}

void ServiceTable::Set(int shape, int type, int batch, Seconds t) { seconds_[At(shape, type, batch)] = t.value(); }

void ServiceTable::Refuse(int shape, int type, std::string why) {
  why_[static_cast<size_t>(shape) * types_ + type] = std::move(why);
}

int ServiceTable::MaxBatch(int shape, int type) const {
  int k = 0;
  while (k < max_batch_ && !std::isnan(seconds_[At(shape, type, k + 1)])) ++k;
  return k;
}

Seconds ServiceTable::Time(int shape, int type, int batch) const { return Seconds(seconds_[At(shape, type, batch)]); }

std::string ServiceTable::Why(int shape, int type) const {
  if (CanServe(shape, type)) return "";
  const std::string& w = why_[static_cast<size_t>(shape) * types_ + type];
  return w.empty() ? "not priced" : w;
}

constexpr EnumName<Policy> kPolicyNames[] = {
    {Policy::kFcfs, "fcfs"},
    {Policy::kSizeAware, "size-aware"},
    {Policy::kDynamic, "dynamic"},
};

std::string_view PolicyName(Policy p) { return NameIn(kPolicyNames, p); }

StatusOr<Policy> ParsePolicy(std::string_view s) { return ParseIn(kPolicyNames, s, "--policy"); }

std::vector<Server> DynamicPlacements(int gpus, int gpus_per_node, const std::vector<int>& type_gpus) {
  std::vector<Server> out;
  for (int t = 0; t < static_cast<int>(type_gpus.size()); ++t) {
    const int d = type_gpus[t];
    if (d < 1 || d > gpus) continue;
    if (d <= gpus_per_node) {
      for (int node = 0; (node + 1) * gpus_per_node <= gpus; ++node) {
        for (int k = 0; (k + 1) * d <= gpus_per_node; ++k) out.push_back({t, node * gpus_per_node + k * d, d});
      }
    } else if (d % gpus_per_node == 0) {
      for (int first = 0; first + d <= gpus; first += d) out.push_back({t, first, d});
    }
  }
  return out;
}

namespace {

// The simulation's state; one instance per SimulateQueue call.
class QueueSim {
 public:
  QueueSim(const RequestStream& stream, const std::vector<Server>& servers, const ServiceTable& table,
           const QueueOptions& options)
      : stream_(stream), servers_(servers), table_(table), opt_(options) {}

  Status Check() const;
  QueueRun Run();

 private:
  bool GpusFree(const Server& s, Seconds now) const {
    for (int g = s.first_gpu; g < s.first_gpu + s.gpus; ++g) {
      if (gpu_free_at_[g] > now) return false;
    }
    return true;
  }
  Seconds GpusFreeAt(const Server& s) const {
    Seconds t(0);
    for (int g = s.first_gpu; g < s.first_gpu + s.gpus; ++g) t = std::max(t, gpu_free_at_[g]);
    return t;
  }
  // Starts `head` and up to the batch limit more requests of its shape from `queue` on server
  // `s` at `now`, removing them from the queue.
  void Start(std::deque<int>& queue, int s, Seconds now);
  // Starts what can start at `now`.
  void Dispatch(Seconds now);
  // The server the head of the central queue takes at `now`, or -1 to wait.
  int ChooseFcfs(int request) const;
  int ChooseDynamic(int request, Seconds now) const;
  int RouteSizeAware(int request, Seconds now);

  const RequestStream& stream_;
  const std::vector<Server>& servers_;
  const ServiceTable& table_;
  const QueueOptions& opt_;
  EventQueue events_;
  std::deque<int> central_;                 // fcfs and dynamic
  std::vector<std::deque<int>> per_server_;  // size-aware
  std::vector<Seconds> committed_until_;     // size-aware: when each server's routed work ends
  std::vector<bool> busy_;
  std::vector<Seconds> gpu_free_at_;
  QueueRun run_;
};

Status QueueSim::Check() const {
  if (servers_.empty()) return Status::InvalidArgument("no replicas to serve with");
  int gpus = 0;
  for (const Server& s : servers_) {
    if (s.type < 0 || s.type >= table_.types() || s.gpus < 1 || s.first_gpu < 0) {
      return Status::InvalidArgument(fmt::format("a server names type {} of {} types", s.type, table_.types()));
    }
    gpus = std::max(gpus, s.first_gpu + s.gpus);
  }
  if (opt_.policy != Policy::kDynamic) {
    std::vector<int> owner(gpus, -1);
    for (int i = 0; i < static_cast<int>(servers_.size()); ++i) {
      for (int g = servers_[i].first_gpu; g < servers_[i].first_gpu + servers_[i].gpus; ++g) {
        if (owner[g] >= 0) {
          return Status::InvalidArgument(fmt::format("replicas {} and {} share GPU {}", owner[g], i, g));
        }
        owner[g] = i;
      }
    }
  }
  std::vector<bool> seen(table_.shapes(), false);
  for (const Request& r : stream_.requests) {
    if (r.shape < 0 || r.shape >= table_.shapes()) {
      return Status::InvalidArgument(fmt::format("request {} names shape {} of {}", r.id, r.shape, table_.shapes()));
    }
    if (seen[r.shape]) continue;
    seen[r.shape] = true;
    bool any = false;
    std::string why;
    for (const Server& s : servers_) {
      if (table_.CanServe(r.shape, s.type)) any = true;
      else if (why.find(table_.Why(r.shape, s.type)) == std::string::npos) why += "; " + table_.Why(r.shape, s.type);
    }
    if (!any) {
      return Status::InvalidArgument(fmt::format("no replica can serve {} (request {}){}",
                                                 ShapeLabel(stream_.shapes[r.shape]), r.id, why));
    }
  }
  return Status::Ok();
}

void QueueSim::Start(std::deque<int>& queue, int s, Seconds now) {
  const Server& server = servers_[s];
  const int shape = stream_.requests[queue.front()].shape;
  const int limit = std::min(opt_.max_batch, table_.MaxBatch(shape, server.type));
  std::vector<int> batch = {queue.front()};
  queue.pop_front();
  for (auto it = queue.begin(); it != queue.end() && static_cast<int>(batch.size()) < limit;) {
    if (stream_.requests[*it].shape == shape) {
      batch.push_back(*it);
      it = queue.erase(it);
    } else {
      ++it;
    }
  }
  const int k = static_cast<int>(batch.size());
  const Seconds service = table_.Time(shape, server.type, k);
  const Seconds finish = now + service;
  for (int id : batch) run_.served[id] = {now, finish, s, k};
  for (int g = server.first_gpu; g < server.first_gpu + server.gpus; ++g) gpu_free_at_[g] = finish;
  busy_[s] = true;
  run_.busy_gpu_s += service.value() * server.gpus;
  events_.Push(finish, -1 - s);
}

int QueueSim::ChooseFcfs(int request) const {
  const int shape = stream_.requests[request].shape;
  int best = -1;
  for (int s = 0; s < static_cast<int>(servers_.size()); ++s) {
    if (busy_[s] || !table_.CanServe(shape, servers_[s].type)) continue;
    if (best < 0 || table_.Time(shape, servers_[s].type) < table_.Time(shape, servers_[best].type)) best = s;
  }
  return best;
}

int QueueSim::ChooseDynamic(int request, Seconds now) const {
  const Request& r = stream_.requests[request];
  int best = -1;
  Seconds best_finish;
  bool best_meets = false;
  for (int s = 0; s < static_cast<int>(servers_.size()); ++s) {
    const Server& server = servers_[s];
    if (!table_.CanServe(r.shape, server.type)) continue;
    const Seconds finish = std::max(now, GpusFreeAt(server)) + table_.Time(r.shape, server.type);
    const bool meets = opt_.deadline && finish - r.arrival <= *opt_.deadline;
    bool better;
    if (best < 0) {
      better = true;
    } else if (meets != best_meets) {
      better = meets;
    } else if (meets) {  // both meet the deadline: the fewest GPUs, then the earliest finish
      better = server.gpus != servers_[best].gpus ? server.gpus < servers_[best].gpus : finish < best_finish;
    } else {  // neither: the earliest finish, then the fewest GPUs
      better = finish != best_finish ? finish < best_finish : server.gpus < servers_[best].gpus;
    }
    if (better) {
      best = s;
      best_finish = finish;
      best_meets = meets;
    }
  }
  return best >= 0 && GpusFree(servers_[best], now) ? best : -1;
}

int QueueSim::RouteSizeAware(int request, Seconds now) {
  const int shape = stream_.requests[request].shape;
  int best = -1;
  Seconds best_finish;
  for (int s = 0; s < static_cast<int>(servers_.size()); ++s) {
    if (!table_.CanServe(shape, servers_[s].type)) continue;
    const Seconds finish = std::max(now, committed_until_[s]) + table_.Time(shape, servers_[s].type);
    if (best < 0 || finish < best_finish) {
      best = s;
      best_finish = finish;
    }
  }
  committed_until_[best] = best_finish;
  return best;
}

void QueueSim::Dispatch(Seconds now) {
  if (opt_.policy == Policy::kSizeAware) {
    for (int s = 0; s < static_cast<int>(servers_.size()); ++s) {
      if (!busy_[s] && !per_server_[s].empty()) Start(per_server_[s], s, now);
    }
    return;
  }
  while (!central_.empty()) {
    const int head = central_.front();
    const int s = opt_.policy == Policy::kDynamic ? ChooseDynamic(head, now) : ChooseFcfs(head);
    if (s < 0) return;
    Start(central_, s, now);
  }
}

QueueRun QueueSim::Run() {
  const int n = static_cast<int>(stream_.requests.size());
  int gpus = 0;
  for (const Server& s : servers_) gpus = std::max(gpus, s.first_gpu + s.gpus);
  run_.served.assign(n, Served{});
  busy_.assign(servers_.size(), false);
  gpu_free_at_.assign(gpus, Seconds(0));
  per_server_.assign(servers_.size(), {});
  committed_until_.assign(servers_.size(), Seconds(0));
  // Arrivals are pushed one ahead, so the queue holds at most one arrival and a completion
  // per server.
  if (n > 0) events_.Push(stream_.requests[0].arrival, 0);
  const Seconds last_arrival = n > 0 ? stream_.requests[n - 1].arrival : Seconds(0);
  bool backlog_taken = false;
  while (!events_.empty()) {
    const Seconds now = events_.NextTime();
    while (!events_.empty() && events_.NextTime() == now) {
      const int what = events_.Pop().what;
      if (what >= 0) {
        if (what + 1 < n) events_.Push(stream_.requests[what + 1].arrival, what + 1);
        if (opt_.policy == Policy::kSizeAware) {
          const int s = RouteSizeAware(what, now);
          per_server_[s].push_back(what);
        } else {
          central_.push_back(what);
        }
      } else {
        const int s = -1 - what;
        busy_[s] = false;
      }
    }
    Dispatch(now);
    if (now == last_arrival && !backlog_taken) {
      size_t waiting = central_.size();
      for (const auto& q : per_server_) waiting += q.size();
      run_.backlog_at_last_arrival = static_cast<int>(waiting);
      backlog_taken = true;
    }
  }
  return std::move(run_);
}

}  // namespace

StatusOr<QueueRun> SimulateQueue(const RequestStream& stream, const std::vector<Server>& servers,
                                 const ServiceTable& table, const QueueOptions& options) {
  if (options.max_batch < 1) return Status::InvalidArgument("--max-batch must be 1 or more");
  QueueSim sim(stream, servers, table, options);
  DITUNE_RETURN_IF_ERROR(sim.Check());
  return sim.Run();
}

}  // namespace ditune::serving
