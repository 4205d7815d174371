// Microbenchmarks that calibrate the cost models on this backend: GEMM, attention and
// elementwise sweeps (compute), and all-to-all, send/recv, all-gather and all-reduce from
// 1 KB to 64 MB over the launched ranks (communication), timed like nccl-tests.
#ifndef DITUNE_EXECUTOR_MICROBENCH_H_
#define DITUNE_EXECUTOR_MICROBENCH_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/catalog.h"
#include "costmodels/measurement.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/kernels.h"

namespace ditune::exec {

// Called with (done, total) as the sweep goes.
using Progress = std::function<void(int, int)>;

// Times `kernels`' GEMM, attention (per head dimension) and elementwise kernels, each call
// between two device events, median of `reps` after a warm-up. Sizes suit the device:
// DiT-scale where the stream is asynchronous (a GPU), small on the host (the ref and cpu
// kernels: the sizes the tiny test models run at).
// Measurements carry backend kernels->name() and device `device_id` (a catalog GPU id).
StatusOr<std::vector<Measurement>> KernelSweep(Kernels* kernels, const std::string& device_id, int reps,
                                               const Progress& progress = {});

struct CollectiveRow {
  std::string op;
  double bytes = 0;     // nccl-tests' size
  double seconds = 0;   // the slowest rank, median over iterations
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

// The flags of a communication sweep, checked alike on every rank before it starts: `iters`
// from 1 to kMaxCommSweepIters, `link` a catalog link, and a link that the ranks' memory
// measures — host-memory ranks (`device_memory` false) never an intra-node link between GPUs
// (their timings would price every later GPU plan), GPU ranks never host shared memory.
// InvalidArgument naming the flag and what is valid.
inline constexpr int kMaxCommSweepIters = 1000;
Status CheckCommSweepFlags(const Catalog& catalog, std::string_view link, int iters, bool device_memory,
                           std::string_view backend);

// Collective over `comm` (every rank calls it). Returns the table (on every rank) and the
// measurements for the store. `link` names the link the ranks talk over. A communicator
// whose buffers are device memory (NCCL) needs `device` to allocate them; the per-rank
// timings are gathered over comm->host().
StatusOr<std::vector<CollectiveRow>> CommSweep(Comm* comm, const std::string& link, int iters,
                                               std::vector<Measurement>* measurements, const Progress& progress = {},
                                               Device* device = nullptr);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_MICROBENCH_H_
