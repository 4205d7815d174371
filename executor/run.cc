#include "executor/run.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "costmodels/dit_ops.h"
#include "costmodels/memory_model.h"
#include "executor/device.h"

namespace ditune::exec {
namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * (static_cast<double>(v.size()) - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// What this process may still allocate: the host's available memory, capped by the
// process's address-space limit (ulimit -v) less what it already maps. 0 when unknown.
double AvailableBytes() {
  auto device = CreateDevice("cpu");
  double avail = device.ok() ? static_cast<double>((*device)->props().memory_bytes) : 0.0;
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    double mapped = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      unsigned long pages = 0;
      if (std::fscanf(f, "%lu", &pages) == 1) mapped = static_cast<double>(pages) * static_cast<double>(sysconf(_SC_PAGESIZE));
      std::fclose(f);
    }
    const double room = std::max(1.0, static_cast<double>(limit.rlim_cur) - mapped);
    avail = avail > 0 ? std::min(avail, room) : room;
  }
  return avail;
}

}  // namespace

Status CheckHostMemory(const ModelSpec& model, const Workload& workload, const ParallelConfig& config,
                       int ranks_on_host) {
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, workload));
  // The memory model counts bf16; the CPU executor keeps fp32 (twice the bytes), and every
  // rank generates the full weights before slicing them.
  GpuSpec host;
  host.memory = Bytes(1e30);
  MemoryOptions opt;
  opt.encoders_resident = false;
  opt.runtime_overhead = Megabytes(100);
  const MemoryBreakdown m = RankMemory(model, tokens, workload, config, host, opt);
  const double full_weights = (model.published_params > 0 ? model.published_params : DitParams(model)) * 4.0;
  const double need = 2.0 * (m.peak() - m.weights).value() + full_weights;
  const double avail = AvailableBytes();
  if (avail > 0 && need * ranks_on_host > avail) {
    return Status::InvalidArgument(fmt::format(
        "{} with '{}' needs about {:.1f} GB per rank ({} ranks here: {:.1f} GB) but this host has {:.1f} GB "
        "available; refused before allocating — use a smaller model or resolution, or more hosts",
        model.id, Label(config), need / 1e9, ranks_on_host, need * ranks_on_host / 1e9, avail / 1e9));
  }
  return Status::Ok();
}

StatusOr<RunMeasurement> MeasureRun(const ModelSpec& model, const Workload& workload, const ParallelConfig& config,
                                    Comm* world, const RunOptions& opt) {
  // Every rank checks; if one refuses, all learn it (no rank is left waiting).
  Status mem = CheckHostMemory(model, workload, config, world->local_ranks());
  float refused = mem.ok() ? 0.0f : 1.0f;
  DITUNE_RETURN_IF_ERROR(world->AllReduceSum(&refused, 1));
  if (!mem.ok()) return mem;
  if (refused > 0) return Status::InvalidArgument("another rank refused the run: not enough memory on its host");
  DITUNE_ASSIGN_OR_RETURN(auto runner, ParallelRunner::Create(model, workload, config, world, opt.seed));
  DITUNE_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice("cpu"));
  for (int i = 0; i < opt.warmup; ++i) DITUNE_RETURN_IF_ERROR(runner->Generate().status());
  const int R = world->size();
  std::vector<std::vector<double>> per_rank(R);  // dit seconds per iteration, by rank
  std::vector<double> slowest;
  std::vector<double> mine_step, gemm, attn, elem, comm, compute;
  RunMeasurement out;
  for (int i = 0; i < opt.iters; ++i) {
    // Ranks aligned by a barrier, then timed on the device's stream (events), not the host.
    DITUNE_RETURN_IF_ERROR(world->Barrier());
    DITUNE_ASSIGN_OR_RETURN(auto start, device->stream()->Record());
    DITUNE_ASSIGN_OR_RETURN(GenerationResult g, runner->Generate());
    DITUNE_RETURN_IF_ERROR(device->stream()->Synchronize());
    DITUNE_ASSIGN_OR_RETURN(auto stop, device->stream()->Record());
    DITUNE_ASSIGN_OR_RETURN(double seconds, stop->SecondsSince(*start));
    std::vector<float> all(static_cast<size_t>(R));
    const float mine = static_cast<float>(seconds);
    DITUNE_RETURN_IF_ERROR(world->AllGather(&mine, all.data(), 1));
    double worst = 0;
    for (int r = 0; r < R; ++r) {
      per_rank[r].push_back(all[r]);
      worst = std::max(worst, static_cast<double>(all[r]));
    }
    slowest.push_back(worst);
    mine_step.push_back(Quantile(g.step_seconds, 0.5));
    gemm.push_back(g.timers.gemm);
    attn.push_back(g.timers.attention);
    elem.push_back(g.timers.elementwise);
    comm.push_back(g.timers.comm);
    compute.push_back(g.timers.gemm + g.timers.attention + g.timers.elementwise);
    if (i + 1 == opt.iters) out.latents = std::move(g.latents);
  }
  // Share every rank's medians.
  std::vector<float> mine = {static_cast<float>(Quantile(mine_step, 0.5)), static_cast<float>(Quantile(gemm, 0.5)),
                             static_cast<float>(Quantile(attn, 0.5)), static_cast<float>(Quantile(elem, 0.5)),
                             static_cast<float>(Quantile(comm, 0.5)), static_cast<float>(Quantile(compute, 0.5))};
  std::vector<float> all(mine.size() * static_cast<size_t>(R));
  DITUNE_RETURN_IF_ERROR(world->AllGather(mine.data(), all.data(), mine.size()));
  double max_compute = 0, sum_compute = 0, max_step = 0;
  for (int r = 0; r < R; ++r) {
    const float* m = all.data() + r * mine.size();
    RankTimes t{r, Quantile(per_rank[r], 0.5), m[0], m[1], m[2], m[3], m[4]};
    out.ranks.push_back(t);
    max_compute = std::max(max_compute, static_cast<double>(m[5]));
    sum_compute += m[5];
    max_step = std::max(max_step, static_cast<double>(m[0]));
  }
  out.latency_median_s = Quantile(slowest, 0.5);
  out.latency_p10_s = Quantile(slowest, 0.1);
  out.latency_p90_s = Quantile(slowest, 0.9);
  out.step_median_s = max_step;
  out.imbalance = sum_compute > 0 ? max_compute / (sum_compute / R) - 1.0 : 0.0;
  out.iters = opt.iters;
  return out;
}

}  // namespace ditune::exec
