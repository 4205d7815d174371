// The serving simulation: requests arrive, wait in a queue, and are served one at a time (or
// a batch at a time) by replicas whose service times come from a ServiceTable. It runs on the
// simulator's EventQueue: arrivals and completions are events; at each instant every event is
// applied before requests are dispatched, so simultaneous events resolve the same way on
// every run.
#ifndef DITUNE_SERVING_QUEUE_SIM_H_
#define DITUNE_SERVING_QUEUE_SIM_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "serving/requests.h"

namespace ditune::serving {

// Seconds to serve a batch of `batch` requests of shape `shape` on a replica of type `type`
// (a replica type is a parallel configuration over some GPUs). An entry that was never set
// means the type cannot serve that shape (or that batch); the reason is kept for messages.
class ServiceTable {
 public:
  ServiceTable() = default;
  ServiceTable(int shapes, int types, int max_batch);

  // `t` > 0 and finite.
  void Set(int shape, int type, int batch, Seconds t);
  void Refuse(int shape, int type, std::string why);

  bool CanServe(int shape, int type) const { return MaxBatch(shape, type) >= 1; }
  // The largest k such that batches 1..k are all priced (0 when the type cannot serve it).
  int MaxBatch(int shape, int type) const;
  // Requires batch <= MaxBatch(shape, type).
  Seconds Time(int shape, int type, int batch = 1) const;
  // Why the type cannot serve the shape ("" when it can, "not priced" when nobody said).
  std::string Why(int shape, int type) const;

  int shapes() const { return shapes_; }
  int types() const { return types_; }
  int max_batch() const { return max_batch_; }

 private:
  size_t At(int shape, int type, int batch) const;
  int shapes_ = 0, types_ = 0, max_batch_ = 1;
  std::vector<double> seconds_;  // NaN: not priced
  std::vector<std::string> why_;
};

// Who takes a request.
//  - fcfs: one queue in arrival order; the head goes to a free replica that can serve it (the
//    one that serves it fastest; ties: the lowest index), else waits for the first to free.
//  - size-aware: each request is routed on arrival to the replica where it would finish
//    earliest given the work already routed there (its own service time on that replica
//    counts, so large requests go to large replicas); each replica serves its queue in order.
//  - dynamic: there are no fixed replicas; the servers are every placement of every replica
//    type on the GPUs, and the head of one queue takes the placement where it finishes
//    earliest (with a deadline: the fewest GPUs that still finish within it), waiting for its
//    GPUs when they are busy.
enum class Policy { kFcfs, kSizeAware, kDynamic };
std::string_view PolicyName(Policy p);
// "fcfs", "size-aware" or "dynamic"; InvalidArgument naming them otherwise.
StatusOr<Policy> ParsePolicy(std::string_view s);

// A replica (or, under the dynamic policy, a placement a request may take): its type in the
// ServiceTable and its GPUs [first_gpu, first_gpu + gpus).
struct Server {
  int type = 0;
  int first_gpu = 0;
  int gpus = 1;
};

struct QueueOptions {
  Policy policy = Policy::kFcfs;
  // Requests of one shape served together, at most (each type's own limit applies too).
  int max_batch = 1;
  // Dynamic policy: a request takes the fewest GPUs that finish it within this many seconds
  // of its arrival (when none can, the earliest finish).
  std::optional<Seconds> deadline;
};

struct Served {
  Seconds start, finish;
  int server = -1;
  int batch = 1;  // requests served together with it, itself included
};

struct QueueRun {
  std::vector<Served> served;  // by request id
  // GPU-seconds spent serving (a batch counts once).
  double busy_gpu_s = 0;
  // Requests that had arrived and not started when the last one arrived: a queue that grows
  // through the run (a layout that cannot hold the rate) leaves a large backlog.
  int backlog_at_last_arrival = 0;
};

// Simulates the stream. Servers must not share GPUs except under the dynamic policy.
// InvalidArgument when a request's shape can be served by no server (naming the shape and
// each type's reason) or the servers are inconsistent with the table.
StatusOr<QueueRun> SimulateQueue(const RequestStream& stream, const std::vector<Server>& servers,
                                 const ServiceTable& table, const QueueOptions& options);

// Every placement of replica types of `type_gpus[t]` GPUs on `gpus` GPUs in nodes of
// `gpus_per_node`: blocks aligned to their size inside a node, or whole aligned nodes.
std::vector<Server> DynamicPlacements(int gpus, int gpus_per_node, const std::vector<int>& type_gpus);

}  // namespace ditune::serving

#endif  // DITUNE_SERVING_QUEUE_SIM_H_
