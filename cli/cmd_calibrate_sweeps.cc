// `ditune calibrate compute` (the engine's kernels on this device, timed and fitted) and
// `mpirun -np N ditune calibrate comm` (collectives over the launched ranks, nccl-tests' columns).
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/calibrate_common.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/parallel_config.h"
#include "core/config_rules.h"
#include "costmodels/calibration.h"
#include "ingest/ingest.h"
#include "store/store.h"
#include "planner/gpu_launch.h"
#include "calibration/measured_runs.h"
#include "calibration/predict.h"
#include "calibration/recalibrate.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/kernels.h"
#include "executor/microbench.h"

#include <unistd.h>
namespace ditune::cli {
namespace {

// Progress on a terminal only.
exec::Progress TerminalProgress(const char* what) {
  if (!isatty(2)) return {};
  return [what](int done, int total) {
    std::cerr << fmt::format("\r{} {}/{}", what, done, total) << (done == total ? "\n" : "") << std::flush;
  };
}

}  // namespace

int CalibrateCompute(int argc, char** argv) {
  cxxopts::Options options("ditune calibrate compute",
                           "Time this backend's GEMM, attention and elementwise kernels and fit the compute model");
  options.add_options()("reps", "timed repetitions per size", cxxopts::value<int>()->default_value("9"))
      ("backend", "the engine's kernels: cpu (this host's cores, fp32), cuda (the GPU's, fits for the catalog GPU "
                  "this device is) or ref (the reference kernels on the host)",
       cxxopts::value<std::string>()->default_value("cpu"))
      ("gpu", "catalog GPU id the cuda measurements are for (default: from the device's name)",
       cxxopts::value<std::string>())
      ("db", "calibration database", cxxopts::value<std::string>());
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate compute", args.status());
  if (help) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate compute", catalog.status());
  const std::string backend = (*args)["backend"].as<std::string>();
  if (backend != "cpu" && backend != "cuda" && backend != "ref") {
    return Fail("calibrate compute", Status::InvalidArgument(fmt::format("--backend '{}': valid: cpu, cuda, ref", backend)));
  }
  const int reps = (*args)["reps"].as<int>();
  if (reps < 1 || reps > 1000) {
    return Fail("calibrate compute", Status::InvalidArgument(fmt::format("--reps {}: give 1 to 1000", reps)));
  }
  auto store = OpenStoreFromArgs(*args);
  if (!store.ok()) return Fail("calibrate compute", store.status());
  StatusOr<std::vector<Measurement>> ms = Status::Internal("no sweep ran");
  {
    auto device = exec::CreateDevice(backend == "cuda" ? "cuda" : "cpu");
    if (!device.ok()) return Fail("calibrate compute", device.status());
    auto kernels = exec::CreateKernels(backend, device->get());
    if (!kernels.ok()) return Fail("calibrate compute", kernels.status());
    StatusOr<std::string> id = std::string("cpu");
    if (args->count("gpu")) {
      id = GpuIdOf((*args)["gpu"].as<std::string>());
      if (!id.ok()) return Fail("calibrate compute", id.status());
    } else if (backend == "cuda") {
      id = MapGpuName((*device)->props().name, **catalog);
    }
    if (!id.ok()) return Fail("calibrate compute", id.status().WithContext("give --gpu ID"));
    std::cerr << fmt::format("timing the {} kernels on {} as '{}'\n", backend, (*device)->props().name, *id);
    ms = exec::KernelSweep(kernels->get(), *id, reps, TerminalProgress("kernel sweep"));
  }
  if (!ms.ok()) return Fail("calibrate compute", ms.status());
  auto ids = (*store)->AddMeasurements(*ms);
  if (!ids.ok()) return Fail("calibrate compute", ids.status());
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : *ms) {
    const bool ew = m.op == "elementwise";
    const double rate = ew ? m.bytes.value() / m.median.value() / 1e9 : m.flops.value() / m.median.value() / 1e9;
    std::string rate_text = fmt::format("{:.2f} {}", rate, ew ? "GB/s" : "GFLOP/s");
    if (m.op == "launch") {
      rate_text = fmt::format("{:.2f} us per launch", 1e6 * m.median.value() / m.params.value("launches", 1.0));
    }
    rows.push_back({m.op, m.params.dump(), fmt::format("{:.1f}", m.median.value() * 1e6), rate_text});
  }
  std::cout << FormatTable({"op", "shape", "time us", "rate"}, rows);
  std::vector<std::string> skipped;
  auto fits = RecalibrateAll(store->get(), **catalog, &skipped);
  if (!fits.ok()) return Fail("calibrate compute", fits.status());
  std::cout << "\n";
  PrintFits(*fits);
  return 0;
}

int CalibrateComm(int argc, char** argv) {
  // The communication backend is chosen before the options are parsed: MPI initialises first.
  std::string comm_backend = exec::DefaultCommBackend();
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--comm") == 0) comm_backend = argv[i + 1];
  }
  auto world = exec::CreateComm(comm_backend, &argc, &argv);
  if (!world.ok()) return Fail("calibrate comm", world.status());
  std::unique_ptr<exec::Device> device;
  if ((*world)->device_memory()) {
    auto d = exec::CreateDevice("cuda");
    if (!d.ok()) return Fail("calibrate comm", d.status());
    device = std::move(*d);
  }
  const bool root = (*world)->rank() == 0;
  cxxopts::Options options("ditune calibrate comm",
                           "Time all-to-all, send/recv, all-gather and all-reduce over the launched ranks");
  options.add_options()("iters", "timed iterations per size", cxxopts::value<int>()->default_value("10"))
      ("link", "link id the ranks talk over", cxxopts::value<std::string>()->default_value("shm"))
      ("comm", "communication backend: mpi (host memory), nccl (GPU memory, one GPU per rank), local",
       cxxopts::value<std::string>())
      ("db", "calibration database", cxxopts::value<std::string>());
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return root ? Fail("calibrate comm", args.status()) : 2;
  if (help) return 0;
  // Every rank checks the same flags, so every rank refuses them together (no rank waits).
  auto refuse = [&](const Status& st) { return root ? Fail("calibrate comm", st) : st.ExitCode(); };
  const int iters = (*args)["iters"].as<int>();
  const std::string link_id = (*args)["link"].as<std::string>();
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return refuse(catalog.status());
  if (Status st = exec::CheckCommSweepFlags(**catalog, link_id, iters, (*world)->device_memory(),
                                            (*world)->backend());
      !st.ok()) {
    return refuse(st);
  }
  std::vector<Measurement> ms;
  auto rows = exec::CommSweep(world->get(), link_id, iters, &ms,
                              root ? TerminalProgress("comm sweep") : exec::Progress{}, device.get());
  if (!rows.ok()) return refuse(rows.status());
  if (!root) return 0;
  auto store = OpenStoreFromArgs(*args);
  if (!store.ok()) return Fail("calibrate comm", store.status());
  auto ids = (*store)->AddMeasurements(ms);
  if (!ids.ok()) return Fail("calibrate comm", ids.status());
  std::cout << fmt::format("# {} ranks over {} ({}), slowest rank, median of {} iterations\n", (*world)->size(),
                           (*args)["link"].as<std::string>(), (*world)->backend(), (*args)["iters"].as<int>());
  std::vector<std::vector<std::string>> table;
  for (const auto& r : *rows) {
    table.push_back({r.op, fmt::format("{:.0f}", r.bytes), fmt::format("{:.0f}", r.bytes / 4), "float",
                     fmt::format("{:.2f}", r.seconds * 1e6), fmt::format("{:.3f}", r.algbw_gbps),
                     fmt::format("{:.3f}", r.busbw_gbps)});
  }
  std::cout << FormatTable({"collective", "size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)"}, table);
  std::vector<std::string> skipped;
  auto fits = RecalibrateAll(store->get(), **catalog, &skipped);
  if (!fits.ok()) return Fail("calibrate comm", fits.status());
  std::cout << "\n";
  PrintFits(*fits);
  return 0;
}


}  // namespace ditune::cli
