// `ditune run --backend cuda|ref`: the DiT engine — the whole model on one device; with
// --emulate-rank R exactly rank R's share of a multi-device plan; or, under mpirun, every
// rank of the plan exchanging for real (NCCL, or MPI staged through the host) — measured
// with device events, compared with the simulator's prediction, and recorded in the store
// (runs on the host's ref kernels under device "cpu", backend "ref").
#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibration/records.h"
#include "cli/cli_common.h"
#include "cli/run_common.h"
#include "core/validate.h"
#include "costmodels/store.h"
#include "executor/engine_run.h"
#include "planner/launch.h"
#include "planner/predict.h"
#include "simulator/simulate.h"

namespace ditune::cli {
namespace {

// The catalog GPU the run's device is: --gpu when given, else the device's own name mapped
// onto the catalog ("cpu" for the ref kernels on the host).
StatusOr<std::string> RunGpuId(const cxxopts::ParseResult& args, const Catalog& catalog, const std::string& backend,
                               const std::string& device_name) {
  if (args.count("gpu")) return args["gpu"].as<std::string>();
  if (backend == "ref") return std::string("cpu");
  return MapGpuName(device_name, catalog);
}

struct ProfileLine {
  std::string kernel;
  int64_t calls = 0;
  double measured_s = 0, flops = 0, bytes = 0;
  std::optional<double> modelled_s;  // where the model prices this kernel
};

// The measured kernels with the model's price of each beside them, and the kernels the
// model prices that did not run (measured 0), in decreasing measured time.
std::vector<ProfileLine> ProfileRows(const std::vector<exec::KernelProfileRow>& measured,
                                     const std::map<std::string, Seconds>& modelled) {
  std::vector<ProfileLine> rows;
  for (const auto& m : measured) {
    ProfileLine l{m.kernel, m.calls, m.seconds, m.flops, m.bytes, std::nullopt};
    if (auto it = modelled.find(m.kernel); it != modelled.end()) l.modelled_s = it->second.value();
    rows.push_back(std::move(l));
  }
  for (const auto& [kernel, t] : modelled) {
    const bool ran = std::any_of(measured.begin(), measured.end(), [&](const auto& m) { return m.kernel == kernel; });
    if (!ran && t.value() > 0) rows.push_back({kernel, 0, 0, 0, 0, t.value()});
  }
  return rows;
}

void PrintProfile(const std::vector<exec::KernelProfileRow>& measured, const std::map<std::string, Seconds>& modelled,
                  double loop_s, int rank, std::ostream& os) {
  os << fmt::format("kernel profile of rank {}: one more loop with every kernel timed on the device ({:.4f} s){}\n",
                    rank, loop_s, modelled.empty() ? "" : "; modelled: each kernel's fitted curve, no engine scale");
  os << fmt::format("{:<16} {:>7} {:>12} {:>7} {:>16} {:>12} {:>8}\n", "kernel", "calls", "measured_ms", "share",
                    "achieved", "modelled_ms", "error");
  double kernels = 0, priced = 0;
  for (const auto& m : measured) kernels += m.seconds;
  for (const auto& l : ProfileRows(measured, modelled)) {
    std::string achieved = "-";
    if (l.measured_s > 0 && l.flops > 0) {
      achieved = fmt::format("{:.3f} TFLOP/s", l.flops / l.measured_s / 1e12);
    } else if (l.measured_s > 0 && l.bytes > 0) {
      achieved = fmt::format("{:.2f} GB/s", l.bytes / l.measured_s / 1e9);
    }
    std::string model = "-", error = "-";
    if (l.modelled_s) {
      priced += *l.modelled_s;
      model = fmt::format("{:.3f}", 1e3 * *l.modelled_s);
      if (l.measured_s > 0) error = fmt::format("{:+.1f}%", 100 * (*l.modelled_s / l.measured_s - 1));
    }
    os << fmt::format("{:<16} {:>7} {:>12.3f} {:>6.1f}% {:>16} {:>12} {:>8}\n", l.kernel, l.calls, 1e3 * l.measured_s,
                      kernels > 0 ? 100 * l.measured_s / kernels : 0.0, achieved, model, error);
  }
  os << fmt::format("{:<16} {:>7} {:>12.3f} {:>7} {:>16} {:>12} {:>8}\n", "kernels", "", 1e3 * kernels, "", "",
                    modelled.empty() ? "-" : fmt::format("{:.3f}", 1e3 * priced),
                    modelled.empty() || kernels <= 0 ? "-" : fmt::format("{:+.1f}%", 100 * (priced / kernels - 1)));
  os << fmt::format("between kernels: {:.3f} ms of the loop (launch gaps, host work, waiting on transfers)\n",
                    1e3 * std::max(0.0, loop_s - kernels));
}

}  // namespace

int RunOnEngine(const cxxopts::ParseResult& args, const std::string& backend) {
  const std::string cmd = "run";
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail(cmd, catalog.status());
  auto workload = ReadWorkload(args, **catalog);
  if (!workload.ok()) return Fail(cmd, workload.status());
  const ModelSpec& model = **(*catalog)->Model(workload->model_id);
  if (args.count("auto")) {
    return Fail(cmd, Status::InvalidArgument(fmt::format(
                         "--auto plans for the launched CPU ranks; with --backend {} give --config SPEC or --plan FILE",
                         backend)));
  }
  if (args.count("config") + args.count("plan") != 1) {
    return Fail(cmd, Status::InvalidArgument("give exactly one of --config SPEC, --plan FILE"));
  }
  auto config = ReadRunConfig(args, *workload);
  if (!config.ok()) return Fail(cmd, config.status());
  const bool emulate = args.count("emulate-rank") > 0;
  const int rank = emulate ? args["emulate-rank"].as<int>() : 0;
  const int n = config->world_size();
  if (emulate && args.count("comm")) {
    return Fail(cmd, Status::InvalidArgument("--comm is for runs across ranks; --emulate-rank runs one rank alone"));
  }
  if (args.count("comm") && args["comm"].as<std::string>() != "mpi" && args["comm"].as<std::string>() != "nccl") {
    return Fail(cmd, Status::InvalidArgument(fmt::format("--comm '{}': valid: mpi, nccl", args["comm"].as<std::string>())));
  }
  // Every rank of the plan, one process each: the world they exchange over.
  std::unique_ptr<exec::Comm> world;
  if (!emulate && n > 1) {
    const auto built = exec::CommBackends();
    const bool nccl = std::find(built.begin(), built.end(), "nccl") != built.end();
    const std::string comm =
        args.count("comm") ? args["comm"].as<std::string>() : (backend == "cuda" && nccl ? "nccl" : "mpi");
    if (comm != "mpi" && comm != "nccl") {
      return Fail(cmd, Status::InvalidArgument(fmt::format("--comm '{}': valid: mpi, nccl", comm)));
    }
    if (comm == "nccl" && backend != "cuda") {
      return Fail(cmd, Status::InvalidArgument("--comm nccl moves GPU memory: it needs --backend cuda"));
    }
    if (exec::DefaultCommBackend() != "mpi") {
      return Fail(cmd, Status::InvalidArgument(fmt::format(
                           "'{}' needs {} ranks: launch `mpirun -np {} ditune run ...`, or measure one rank of it "
                           "with --emulate-rank R (0 to {})",
                           Label(*config), n, n, n - 1)));
    }
    auto w = exec::CreateComm(comm, nullptr, nullptr);
    if (!w.ok()) return Fail(cmd, w.status());
    world = std::move(*w);
  }
  const bool root = world == nullptr || world->rank() == 0;
  if (rank < 0 || rank >= n) {
    return Fail(cmd, Status::InvalidArgument(
                         fmt::format("--emulate-rank {}: '{}' has ranks 0 to {}", rank, Label(*config), n - 1)));
  }
  auto tokens = ComputeTokenGeometry(model, *workload);
  if (!tokens.ok()) return Fail(cmd, tokens.status());
  Status valid = ValidateConfig({&model, *tokens, workload->steps, workload->batch, n}, *config);
  if (!valid.ok()) return Fail(cmd, valid);
  auto store = OpenStore(args.count("db") ? args["db"].as<std::string>() : Store::DefaultPath());
  if (!store.ok()) return Fail(cmd, store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail(cmd, fits.status());

  exec::EngineRunOptions ro;
  ro.kernels = backend;
  ro.rank = rank;
  ro.iters = args["iters"].as<int>();
  ro.warmup = args["warmup"].as<int>();
  ro.engine.seed = args["seed"].as<uint64_t>();
  ro.world = world.get();
  ro.profile = args.count("profile") > 0 || args.count("trace") > 0;
  if (ro.iters < 1 || ro.iters > 10000 || ro.warmup < 0 || ro.warmup > 1000) {
    return Fail(cmd, Status::InvalidArgument("--iters must be 1 to 10000 and --warmup 0 to 1000"));
  }
  // Every rank writes its own timeline; a path that cannot take it fails before the run.
  std::string trace_path;
  if (args.count("trace")) {
    trace_path = exec::RankTracePath(args["trace"].as<std::string>(), world != nullptr ? world->rank() : rank,
                                     world != nullptr ? world->size() : 1);
    Status st = exec::WriteKernelTrace({}, world != nullptr ? world->rank() : rank, trace_path);
    if (world != nullptr && world->host() != nullptr) {
      // Every rank stops if one cannot write, rather than the others waiting for it.
      float refused = st.ok() ? 0.0f : 1.0f;
      Status agreed = world->host()->AllReduceSum(&refused, 1);
      if (!agreed.ok()) return Fail(cmd, agreed);
      if (st.ok() && refused > 0) {
        st = Status::InvalidArgument(fmt::format(
            "--trace: {:.0f} rank(s) cannot write their trace beside {} (that rank's message names it)", refused,
            args["trace"].as<std::string>()));
      }
    }
    if (!st.ok()) return Fail(cmd, st);
  }
  auto r = exec::MeasureEngineRun(model, *workload, *config, ro);
  if (!r.ok()) {
    // Every rank validates the same input before any transfer; a failure after that must not
    // leave the peers waiting in a collective.
    if (world != nullptr && world->size() > 1 && r.status().code() != Status::Code::kInvalidArgument &&
        r.status().code() != Status::Code::kNotSupported) {
      world->Abort(r.status().ToString());
    }
    return root ? Fail(cmd, r.status()) : r.status().ExitCode();
  }
  if (!trace_path.empty()) {
    Status st = exec::WriteKernelTrace(r->profile_events, world != nullptr ? world->rank() : rank, trace_path);
    if (!st.ok()) return root ? Fail(cmd, st) : st.ExitCode();
  }
  if (!root) return 0;

  // The simulator's view of the same run: the whole plan on the CLUSTER flags' GPUs (default:
  // n of this device's GPU), DiT only, priced as ditune's engine runs it.
  auto gpu_id = RunGpuId(args, **catalog, backend, r->device_name);
  std::string prediction = "no prediction: " + (gpu_id.ok() ? std::string() : gpu_id.status().message());
  // What prices the run: the ref kernels on the host their own sweep (without it the
  // catalog's CPU figures describe the cpu executor, not them); with --gpu naming a GPU, the
  // ref kernels stand in for the cuda engine there and are priced as it.
  const bool on_host = gpu_id.ok() && *gpu_id == "cpu";
  const std::string priced_as = backend == "ref" && !on_host ? "cuda" : backend;
  const bool calibrated = priced_as != "ref" || HasComputeFits(*fits, "cpu", "ref");
  if (gpu_id.ok() && !calibrated) {
    prediction = "no prediction: the ref kernels on this host are not calibrated (run `ditune calibrate compute "
                 "--backend ref` first)";
  }
  double predicted_dit = 0, predicted_busy = 0;
  std::map<std::string, Seconds> modelled_kernels;  // with --profile
  if (gpu_id.ok() && calibrated) {
    ClusterSpec spec{*gpu_id, n};
    if (args.count("gpus")) {
      auto s = ReadClusterSpec(args);
      if (!s.ok()) return Fail(cmd, s.status());
      spec = *s;
    }
    if (spec.gpus != n) {
      return Fail(cmd, Status::InvalidArgument(fmt::format("--gpus {} but '{}' needs {}", spec.gpus, Label(*config), n)));
    }
    auto cluster = ResolveCluster(spec, **catalog);
    if (!cluster.ok()) return Fail(cmd, cluster.status());
    auto sim = SimulateEngineRun(model, *workload, *config, *cluster, *fits, priced_as);
    if (!sim.ok()) return Fail(cmd, sim.status());
    if (ro.profile) {
      auto k = EngineKernelTimes(model, *workload, *config, *cluster, *fits, priced_as, rank);
      if (!k.ok()) return Fail(cmd, k.status());
      modelled_kernels = std::move(*k);
    }
    predicted_dit = sim->dit.value();
    for (const auto& rr : sim->ranks) {
      if (rr.rank == rank) predicted_busy = rr.busy.value();
    }
    // The rank's transfers are replaced by the model's time: what the simulated plan spends
    // beyond this rank's compute (communication it cannot hide, waiting on other ranks).
    const double modelled_rest = std::max(0.0, predicted_dit - predicted_busy);
    prediction = emulate ? fmt::format("modelled compute of rank {}: {:.4f} s; with the modelled communication and "
                                       "waiting ({:.4f} s) the rank's loop is {:.4f} s (plan DiT predicted {:.4f} s "
                                       "on {} x {})",
                                       rank, predicted_busy, modelled_rest, r->median_s + modelled_rest, predicted_dit,
                                       n, *gpu_id)
                         : fmt::format("predicted {:.4f} s ({:+.1f}%)", predicted_dit,
                                       100 * (predicted_dit / r->median_s - 1));
  }

  std::string run_id;
  // Every real run is recorded where it ran: its DiT time calibrates the engine's scale on
  // this device and backend (`calibrate fit`). Emulated ranks are not whole runs.
  if (!emulate && gpu_id.ok() && (backend == "cuda" || on_host)) {
    run_id = calibration::NewRunId(*gpu_id);
    const RunRecord rec = calibration::EngineRunRecord(model, *workload, *config, backend, *gpu_id,
                                          world != nullptr ? std::string(world->backend()) : "", predicted_dit, *r,
                                          run_id);
    nlohmann::json extra{{"backend", backend}, {"device_name", r->device_name}};
    if (world != nullptr) extra["comm"] = std::string(world->backend());
    const Measurement meas = calibration::DitMeasurement(model, *workload, *config, n, backend, *gpu_id, r->median_s, r->p10_s,
                                            r->p90_s, r->iters, run_id, extra);
    Status st = (*store)->RecordRuns({rec}, {meas}).status();
    if (!st.ok()) return Fail(cmd, st);
  }
  // A profiled run's kernels, at the shapes this run has, join the kernel sweep's measurements
  // (emulated ranks' too: their kernels are real); `calibrate fit` fits them together.
  size_t kernel_measurements = 0;
  if (ro.profile && gpu_id.ok() && (backend == "cuda" || on_host)) {
    const nlohmann::json params{{"model", model.id}, {"height", workload->height}, {"width", workload->width},
                                {"frames", workload->frames}, {"config", ToString(*config)}, {"rank", rank}};
    const auto kernels = exec::KernelMeasurements(r->profile_events, backend, *gpu_id, run_id, params);
    Status st = (*store)->AddMeasurements(kernels).status();
    if (!st.ok()) return Fail(cmd, st);
    kernel_measurements = kernels.size();
  }

  if (args.count("json")) {
    nlohmann::json j{{"backend", backend},           {"device", r->device_name},    {"config", ToString(*config)},
                     {"rank", rank},                 {"emulated", emulate},          {"measured_s", r->median_s},
                     {"p10_s", r->p10_s},            {"p90_s", r->p90_s},            {"step_s", r->step_median_s},
                     {"weight_bytes", r->weight_bytes}, {"peak_bytes", r->peak_bytes}, {"iters", r->iters}};
    if (world != nullptr) {
      j["ranks"] = n;
      j["comm"] = std::string(world->backend());
      j["rank_median_s"] = r->rank_median_s;
      j["spread"] = r->spread;
      j["rank0_comm_s"] = r->comm_median_s;
    }
    if (predicted_dit > 0) {
      j["predicted_s"] = predicted_dit;
      if (emulate) {
        j["modelled_busy_s"] = predicted_busy;
        j["with_modelled_comm_s"] = r->median_s + std::max(0.0, predicted_dit - predicted_busy);
      }
    }
    if (!run_id.empty()) j["run_id"] = run_id;
    if (!trace_path.empty()) j["trace"] = trace_path;
    if (kernel_measurements > 0) j["kernel_measurements"] = kernel_measurements;
    if (ro.profile) {
      j["profile_loop_s"] = r->profile_loop_s;
      j["profile"] = nlohmann::json::array();
      for (const auto& row : ProfileRows(r->profile, modelled_kernels)) {
        nlohmann::json e{{"kernel", row.kernel}, {"calls", row.calls}, {"measured_s", row.measured_s},
                         {"flops", row.flops}, {"bytes", row.bytes}};
        if (row.modelled_s) e["modelled_s"] = *row.modelled_s;
        j["profile"].push_back(std::move(e));
      }
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const auto& w = r->work.steady;
  std::cout << fmt::format("{} {}x{}, {} steps, batch {} on {} ({} kernels): {}\n", model.id, workload->height,
                           workload->width, workload->steps, workload->batch, r->device_name, backend,
                           emulate ? fmt::format("rank {} of '{}' (its transfers left out)", rank, Label(*config))
                           : world != nullptr ? fmt::format("'{}' on {} ranks over {}", Label(*config), n, world->backend())
                                              : Label(*config));
  std::cout << fmt::format("rank work per forward: {} image + {} text tokens, {} heads, tp {}, blocks {}-{}, {} "
                           "patch(es), {} sequence(s)\n",
                           w.img_tokens, w.txt_tokens, w.heads, w.tp, r->work.first_block,
                           r->work.first_block + r->work.blocks - 1, w.patches, w.batch);
  std::cout << fmt::format("DiT (device time{}, median of {}): {:.4f} s  [p10 {:.4f}, p90 {:.4f}], step {:.2f} ms; {}\n",
                           world != nullptr ? ", slowest rank" : "", r->iters, r->median_s, r->p10_s, r->p90_s,
                           1e3 * r->step_median_s, prediction);
  if (world != nullptr) {
    std::string per;
    for (size_t q = 0; q < r->rank_median_s.size(); ++q) per += fmt::format("{}{:.4f}", q ? ", " : "", r->rank_median_s[q]);
    std::cout << fmt::format("ranks' medians: {} s (spread {:.1f}%); rank 0 in transfers {:.4f} s per loop\n", per,
                             100 * r->spread, r->comm_median_s);
  }
  std::cout << fmt::format("memory: weights {:.2f} GB, peak {:.2f} GB\n", r->weight_bytes / 1e9, r->peak_bytes / 1e9);
  std::cout << "text encoding and VAE decode: not run by the engine (latent output)\n";
  if (ro.profile) PrintProfile(r->profile, modelled_kernels, r->profile_loop_s, rank, std::cout);
  if (kernel_measurements > 0) {
    std::cout << fmt::format("recorded {} kernel measurements (one per kernel and shape; `ditune calibrate fit` "
                             "fits them)\n",
                             kernel_measurements);
  }
  if (!trace_path.empty()) std::cout << "kernel trace: " << trace_path << (world != nullptr ? " (and one per rank beside it)" : "") << "\n";
  if (!run_id.empty()) std::cout << "recorded as " << run_id << " in " << (*store)->path() << "\n";
  return 0;
}

}  // namespace ditune::cli
