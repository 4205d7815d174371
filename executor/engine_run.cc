#include "executor/engine_run.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/stats.h"

namespace ditune::exec {

StatusOr<EngineRunResult> MeasureEngineRun(const ModelSpec& model, const Workload& workload,
                                           const ParallelConfig& config, const EngineRunOptions& options) {
  if (options.iters < 1 || options.warmup < 0) return Status::InvalidArgument("iters must be >= 1 and warmup >= 0");
  Comm* world = options.world != nullptr && config.world_size() > 1 ? options.world : nullptr;
  if (world != nullptr && world->size() != config.world_size()) {
    return Status::InvalidArgument(fmt::format("'{}' needs {} ranks; {} were launched", Label(config),
                                               config.world_size(), world->size()));
  }
  const int rank = world != nullptr ? world->rank() : options.rank;
  DITUNE_ASSIGN_OR_RETURN(EngineWork work, EngineWorkFor(model, workload, config, rank));
  const std::string device_backend = options.kernels == "cuda" ? "cuda" : "cpu";
  DITUNE_ASSIGN_OR_RETURN(auto device, CreateDevice(device_backend));
  DITUNE_ASSIGN_OR_RETURN(auto kernels, CreateKernels(options.kernels, device.get()));
  // Headroom for what the engine does not count: on a GPU the GEMM library's workspace and
  // plans, the stream-ordered allocator's pool, the runtime; in host memory the allocator's.
  const int64_t headroom = device->props().host_memory ? int64_t{64} << 20 : int64_t{1} << 30;
  const int64_t need = EngineBytes(model, workload, work, options.engine, kernels->element_bytes()) + headroom;
  Status fits = Status::Ok();
  if (need > device->props().memory_bytes) {
    fits = Status::InvalidArgument(fmt::format(
        "{} at {}x{} (rank {} of '{}') needs about {:.1f} GB on the device; {} has {:.1f} GB", model.id,
        workload.height, workload.width, rank, Label(config), need / 1e9, device->props().name,
        device->props().memory_bytes / 1e9));
  }
  Comm* host = world != nullptr ? world->host() : nullptr;
  if (host != nullptr) {
    // The ranks' shares differ (PipeFusion stages): every rank refuses if one must, rather
    // than the others waiting for it in the collectives that follow.
    float refused = fits.ok() ? 0.0f : 1.0f;
    DITUNE_RETURN_IF_ERROR(host->AllReduceSum(&refused, 1));
    if (fits.ok() && refused > 0) {
      fits = Status::InvalidArgument(fmt::format(
          "{} at {}x{}: {:.0f} rank(s) of '{}' do not fit their device (rank 0's message, or that rank's, names the "
          "sizes)",
          model.id, workload.height, workload.width, refused, Label(config)));
    }
  }
  DITUNE_RETURN_IF_ERROR(fits);
  std::unique_ptr<ProfilingKernels> profiler;
  if (options.profile) profiler = std::make_unique<ProfilingKernels>(kernels.get());
  Kernels* run_kernels = profiler != nullptr ? profiler.get() : kernels.get();
  DITUNE_ASSIGN_OR_RETURN(auto engine,
                          DitEngine::Create(model, workload, work, run_kernels, options.engine, world));
  EngineRunResult r;
  r.device_name = device->props().name;
  r.work = work;
  r.weight_bytes = engine->weight_bytes();
  for (int i = 0; i < options.warmup; ++i) DITUNE_RETURN_IF_ERROR(engine->Generate().status());
  std::vector<double> loops, steps, comms;
  for (int i = 0; i < options.iters; ++i) {
    if (host != nullptr) DITUNE_RETURN_IF_ERROR(host->Barrier());  // every rank starts together
    DITUNE_ASSIGN_OR_RETURN(EngineResult g, engine->Generate());
    loops.push_back(g.dit_seconds);
    comms.push_back(g.comm_seconds);
    steps.insert(steps.end(), g.step_seconds.begin(), g.step_seconds.end());
    if (i + 1 == options.iters) r.latents = std::move(g.latents);
    r.peak_bytes = std::max(r.peak_bytes, g.peak_bytes);
  }
  if (host != nullptr) {
    // Every rank's loops; an iteration lasts as long as its slowest rank.
    const int n = host->size(), iters = options.iters;
    std::vector<float> mine(loops.begin(), loops.end()), all(static_cast<size_t>(n * iters));
    DITUNE_RETURN_IF_ERROR(host->AllGather(mine.data(), all.data(), mine.size()));
    double fastest = 0, slowest = 0;
    for (int q = 0; q < n; ++q) {
      const double own = Median(std::vector<double>(all.begin() + q * iters, all.begin() + (q + 1) * iters));
      r.rank_median_s.push_back(own);
      fastest = q == 0 ? own : std::min(fastest, own);
      slowest = std::max(slowest, own);
    }
    r.spread = fastest > 0 ? slowest / fastest - 1 : 0;
    for (int i = 0; i < iters; ++i) {
      for (int q = 0; q < n; ++q) loops[i] = std::max(loops[i], static_cast<double>(all[q * iters + i]));
    }
    r.comm_median_s = Median(comms);
  }
  if (profiler != nullptr) {
    if (host != nullptr) DITUNE_RETURN_IF_ERROR(host->Barrier());
    profiler->Start();
    DITUNE_ASSIGN_OR_RETURN(EngineResult g, engine->Generate());
    DITUNE_ASSIGN_OR_RETURN(KernelProfile profile, profiler->Stop());
    r.profile = std::move(profile.rows);
    r.profile_events = std::move(profile.events);
    r.profile_loop_s = g.dit_seconds;
  }
  r.median_s = Median(loops);
  r.p10_s = NearestRank(loops, 0.1);
  r.p90_s = NearestRank(loops, 0.9);
  r.step_median_s = Median(steps);
  r.iters = options.iters;
  return r;
}

}  // namespace ditune::exec
