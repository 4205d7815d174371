// `ditune run`'s second half, on rank 0 after the measured run: the simulator's prediction of
// the same run, the run and its measurement recorded in the store, and the report (a table,
// or one JSON document).
#include <algorithm>
#include <iostream>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runs/engine_loop.h"
#include "cli/cli_common.h"
#include "cli/run_common.h"
#include "planner/gpu_launch.h"
#include "calibration/predict.h"

namespace ditune::cli {
namespace {
constexpr const char* kCmd = "run";
}  // namespace

StatusOr<std::string> RunGpuId(const cxxopts::ParseResult& args, const Catalog& catalog, const std::string& backend,
                               const std::string& device_name) {
  if (args.count("gpu")) return GpuIdOf(args["gpu"].as<std::string>());
  if (backend != "cuda") return std::string("cpu");
  return MapGpuName(device_name, catalog);
}

StatusOr<Cluster> RunCluster(const cxxopts::ParseResult& args, const Catalog& catalog, const std::string& gpu_id,
                             const ParallelConfig& config) {
  const int n = config.world_size();
  ClusterSpec spec{gpu_id, n};
  if (args.count("gpus")) {
    DITUNE_ASSIGN_OR_RETURN(spec, ReadClusterSpec(args));
  }
  if (spec.gpus != n) {
    return Status::InvalidArgument(fmt::format("--gpus {} but '{}' needs {}", spec.gpus, Label(config), n));
  }
  return ResolveCluster(spec, catalog);
}

int ReportRun(const cxxopts::ParseResult& args, const Catalog& catalog, const std::vector<Fit>& fits, Store* store,
              const RunReport& report, const exec::EngineRunResult& r) {
  const ModelSpec& model = *report.model;
  const Workload& workload = report.workload;
  const ParallelConfig& config = report.config;
  const std::string& backend = report.backend;
  const int rank = report.rank, n = report.ranks;
  const bool emulate = report.emulate;
  exec::Comm* world = report.world;
  const std::string& trace_path = report.trace_path;
  const StatusOr<std::string>& gpu_id = report.gpu_id;
  const std::string gpu_id_value = gpu_id.ok() ? *gpu_id : "";
  const bool profile = args.count("profile") > 0 || args.count("trace") > 0;
  // The simulator's view of the same run: the whole plan on the CLUSTER flags' GPUs (default:
  // n of this device's GPU), DiT only, priced as ditune's engine runs it (the host's kernels
  // standing in for a GPU named by --gpu as the cuda engine there).
  std::string prediction = "no prediction: " + (gpu_id.ok() ? std::string() : gpu_id.status().message());
  double predicted_dit = 0, predicted_busy = 0;
  std::map<std::string, Seconds> modelled_kernels;  // with --profile
  if (gpu_id.ok()) {
    auto cluster = RunCluster(args, catalog, gpu_id_value, config);
    if (!cluster.ok()) return Fail(kCmd, cluster.status());
    auto p = calibration::PredictEngineRun(model, workload, config, *cluster, fits, backend, rank, profile);
    if (p.ok()) {
      predicted_dit = p->dit_s;
      predicted_busy = p->busy_s;
      modelled_kernels = std::move(p->kernels);
      // The rank's transfers are replaced by the model's time: what the simulated plan spends
      // beyond this rank's compute (communication it cannot hide, waiting on other ranks).
      const double rest = std::max(0.0, predicted_dit - predicted_busy);
      prediction = emulate ? fmt::format("modelled compute of rank {}: {:.4f} s; with the modelled communication and "
                                         "waiting ({:.4f} s) the rank's loop is {:.4f} s (plan DiT predicted {:.4f} s "
                                         "on {} x {})",
                                         rank, predicted_busy, rest, r.median_s + rest, predicted_dit, n, gpu_id_value)
                           : fmt::format("predicted {:.4f} s ({:+.1f}%)", predicted_dit,
                                         100 * (predicted_dit / r.median_s - 1));
    } else if (p.status().code() == Status::Code::kInvalidArgument) {
      prediction = "no prediction: " + p.status().message();
    } else {
      return Fail(kCmd, p.status());
    }
  }
  // Every whole run is recorded where it ran (its DiT time calibrates the engine's scale on
  // this device and backend); a profiled run's kernels join the kernel sweep's measurements
  // (emulated ranks' too: their kernels are real). Host kernels standing in for a GPU are not.
  calibration::RecordedRun recorded;
  if (gpu_id.ok() && (backend == "cuda" || gpu_id_value == "cpu")) {
    auto rec = calibration::RecordEngineRun(store, model, workload, config, backend, gpu_id_value,
                                            world != nullptr ? std::string(world->backend()) : "", predicted_dit, r,
                                            !emulate, rank);
    if (!rec.ok()) return Fail(kCmd, rec.status());
    recorded = *rec;
  }
  const std::string& run_id = recorded.run_id;
  const size_t kernel_measurements = recorded.kernel_measurements;

  if (args.count("json")) {
    nlohmann::json j{{"backend", backend},           {"device", r.device_name},    {"config", ToString(config)},
                     {"rank", rank},                 {"emulated", emulate},          {"measured_s", r.median_s},
                     {"p10_s", r.p10_s},            {"p90_s", r.p90_s},            {"step_s", r.step_median_s},
                     {"weight_bytes", r.weight_bytes}, {"peak_bytes", r.peak_bytes}, {"iters", r.iters}};
    if (world != nullptr) {
      j["ranks"] = n;
      j["comm"] = std::string(world->backend());
      j["rank_median_s"] = r.rank_median_s;
      j["spread"] = r.spread;
      j["rank0_comm_s"] = r.comm_median_s;
    }
    if (predicted_dit > 0) {
      j["predicted_s"] = predicted_dit;
      if (emulate) {
        j["modelled_busy_s"] = predicted_busy;
        j["with_modelled_comm_s"] = r.median_s + std::max(0.0, predicted_dit - predicted_busy);
      }
    }
    if (!run_id.empty()) j["run_id"] = run_id;
    if (!trace_path.empty()) j["trace"] = trace_path;
    if (kernel_measurements > 0) j["kernel_measurements"] = kernel_measurements;
    if (profile) {
      j["profile_loop_s"] = r.profile_loop_s;
      j["profile"] = nlohmann::json::array();
      for (const auto& row : ProfileRows(r.profile, modelled_kernels)) {
        nlohmann::json e{{"kernel", row.kernel}, {"calls", row.calls}, {"measured_s", row.measured_s},
                         {"flops", row.flops}, {"bytes", row.bytes}};
        if (row.modelled_s) e["modelled_s"] = *row.modelled_s;
        j["profile"].push_back(std::move(e));
      }
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const auto& w = r.work.steady;
  std::cout << fmt::format("{} {}x{}, {} steps, batch {} on {} ({} kernels): {}\n", model.id, workload.height,
                           workload.width, workload.steps, workload.batch, r.device_name, backend,
                           emulate ? fmt::format("rank {} of '{}' (its transfers left out)", rank, Label(config))
                           : world != nullptr ? fmt::format("'{}' on {} ranks over {}", Label(config), n, world->backend())
                                              : Label(config));
  std::cout << fmt::format("rank work per forward: {} image + {} text tokens, {} heads, tp {}, blocks {}-{}, {} "
                           "patch(es), {} sequence(s)\n",
                           w.img_tokens, w.txt_tokens, w.heads, w.tp, r.work.first_block,
                           r.work.first_block + r.work.blocks - 1, w.patches, w.batch);
  std::cout << fmt::format("DiT (device time{}, median of {}): {:.4f} s  [p10 {:.4f}, p90 {:.4f}], step {:.2f} ms; {}\n",
                           world != nullptr ? ", slowest rank" : "", r.iters, r.median_s, r.p10_s, r.p90_s,
                           1e3 * r.step_median_s, prediction);
  if (world != nullptr) {
    std::string per;
    for (size_t q = 0; q < r.rank_median_s.size(); ++q) per += fmt::format("{}{:.4f}", q ? ", " : "", r.rank_median_s[q]);
    std::cout << fmt::format("ranks' medians: {} s (spread {:.1f}%); rank 0 in transfers {:.4f} s per loop\n", per,
                             100 * r.spread, r.comm_median_s);
  }
  std::cout << fmt::format("memory: weights {:.2f} GB, peak {:.2f} GB\n", r.weight_bytes / 1e9, r.peak_bytes / 1e9);
  std::cout << "text encoding and VAE decode: not run by the engine (latent output)\n";
  if (profile) PrintProfile(r.profile, modelled_kernels, r.profile_loop_s, rank, std::cout);
  if (kernel_measurements > 0) {
    std::cout << fmt::format("recorded {} kernel measurements (one per kernel and shape; `ditune calibrate fit` "
                             "fits them)\n",
                             kernel_measurements);
  }
  if (!trace_path.empty()) std::cout << "kernel trace: " << trace_path << (world != nullptr ? " (and one per rank beside it)" : "") << "\n";
  if (!run_id.empty()) std::cout << "recorded as " << run_id << " in " << store->path() << "\n";
  return 0;
}

}  // namespace ditune::cli
