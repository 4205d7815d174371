// `ditune calibrate ingest FILE | fit | show`: measurements into the store, fits from them.
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/parallel_config.h"
#include "core/validate.h"
#include "costmodels/calibration.h"
#include "costmodels/ingest.h"
#include "costmodels/store.h"
#include "planner/launch.h"
#include "planner/measured_runs.h"
#include "planner/predict.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/kernels.h"
#include "executor/microbench.h"

#include <unistd.h>

namespace ditune::cli {
namespace {

constexpr const char* kUsage =
    "usage: ditune calibrate ingest FILE [options] | fit | show | compute | comm | learn --suite FILE   "
    "(ditune calibrate SUB --help)";

StatusOr<std::unique_ptr<Store>> OpenStoreFromArgs(const cxxopts::ParseResult& args) {
  const std::string path = args.count("db") ? args["db"].as<std::string>() : Store::DefaultPath();
  return OpenStore(path);
}

std::string SegmentsText(const Fit& f) {
  if (f.kind == kFitKindMechanisms && f.params.is_object()) {
    std::string s;
    for (const auto& [k, v] : f.params.items()) {
      if (!s.empty()) s += ", ";
      s += v.is_number() ? fmt::format("{}={:.4g}", k, v.get<double>()) : fmt::format("{} {}", k, v.dump());
    }
    return s;
  }
  if (f.kind == kFitKindKernelClass && f.params.is_object()) {
    std::string s;
    for (const char* cls : {"gemm", "attention", "elementwise"}) {
      if (!f.params.contains(cls) || !f.params[cls].is_number()) continue;
      s += fmt::format("{}{} {:.2f}x", s.empty() ? "" : ", ", cls, f.params[cls].get<double>());
    }
    const bool relative = f.params.contains("relative") && f.params["relative"].is_boolean() &&
                          f.params["relative"].get<bool>();
    return fmt::format("{} the modelled device time{} ({})", s, relative ? ", relative" : "",
                       f.params.contains("origin") && f.params["origin"].is_string()
                           ? f.params["origin"].get<std::string>()
                           : "?");
  }
  if (f.params.contains("compute_scale")) {
    return fmt::format("compute scale {:.3f} (measured / modelled)", f.params["compute_scale"].get<double>());
  }
  if (f.params.contains("runtime_overhead_gb")) {
    return fmt::format("runtime overhead {:.2f} GB (measured peak over the memory model)",
                       f.params["runtime_overhead_gb"].get<double>());
  }
  if (f.params.contains("scale")) {
    return fmt::format("scale {:.3f} (measured / modelled)", f.params["scale"].get<double>());
  }
  auto model = PiecewiseLatencyModel::FromJson(f.params);
  if (!model.ok()) return "?";
  const std::string x = f.params.value("x", "");
  std::string s;
  for (const auto& seg : model->segments()) {
    if (!s.empty()) s += " | ";
    s += fmt::format("from {:.3g}: {:.3g} us + {}", seg.x_lo, seg.latency_s * 1e6,
                     x == "flops"      ? fmt::format("{:.4g} TFLOP/s", seg.rate / 1e12)
                     : x == "launches" ? fmt::format("{:.3g} us per launch", 1e6 / seg.rate)
                                       : fmt::format("{:.4g} GB/s", seg.rate / 1e9));
  }
  return s;
}

void PrintFits(const std::vector<Fit>& fits) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : fits) {
    rows.push_back({f.kind, f.key, std::to_string(f.points), fmt::format("{:.2f}%", 100 * f.mape), SegmentsText(f)});
  }
  std::cout << FormatTable({"kind", "key", "points", "MAPE", "latency + size / rate, per size range"}, rows);
}

int Ingest(int argc, char** argv) {
  cxxopts::Options options("ditune calibrate ingest", "Read measurements into the calibration store");
  AddWorkloadOptions(options);
  options.add_options()
      ("file", "input file", cxxopts::value<std::string>())
      ("format", "auto | csv | nccl-tests | xdit-log | torch-trace", cxxopts::value<std::string>()->default_value("auto"))
      ("gpu", "GPU id the measurements ran on (nccl-tests, xDiT logs, profiler traces)", cxxopts::value<std::string>())
      ("link", "link id the collective crossed (nccl-tests)", cxxopts::value<std::string>())
      ("ranks", "ranks of an nccl-tests run (default: counted from its output), or GPUs of an xDiT "
       "run (default: the product of --config's degrees)", cxxopts::value<int>())
      ("collective", "all_to_all | all_gather | all_reduce | reduce_scatter | sendrecv (default: from the file's test lines or name)",
       cxxopts::value<std::string>())
      ("config", "configuration of an xDiT run or profiler trace", cxxopts::value<std::string>())
      ("run-id", "a label stored with every measurement", cxxopts::value<std::string>())
      ("fit", "refit the models afterwards")
      ("db", "calibration database", cxxopts::value<std::string>());
  options.parse_positional({"file"});
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate ingest", args.status());
  if (help) return 0;
  if (args->count("file") == 0) return Fail("calibrate ingest", Status::InvalidArgument("FILE is required"));
  const std::string file = (*args)["file"].as<std::string>();
  std::ifstream in(file, std::ios::binary);
  if (!in) return Fail("calibrate ingest", Status::NotFound(fmt::format("cannot open '{}'", file)));
  std::stringstream text;
  text << in.rdbuf();

  const std::string fmt_name = (*args)["format"].as<std::string>();
  IngestFormat format;
  if (fmt_name == "auto") format = IngestFormat::kAuto;
  else if (fmt_name == "csv") format = IngestFormat::kCsv;
  else if (fmt_name == "nccl-tests") format = IngestFormat::kNcclTests;
  else if (fmt_name == "xdit-log") format = IngestFormat::kXditLog;
  else if (fmt_name == "torch-trace") format = IngestFormat::kTorchTrace;
  else {
    return Fail("calibrate ingest", Status::InvalidArgument(fmt::format(
                                        "--format '{}' is not one of: auto, csv, nccl-tests, xdit-log, torch-trace", fmt_name)));
  }
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate ingest", catalog.status());
  IngestContext ctx;
  if (args->count("gpu")) {
    ctx.device = (*args)["gpu"].as<std::string>();
    if (auto g = (*catalog)->Gpu(ctx.device); !g.ok()) return Fail("calibrate ingest", g.status());
  }
  if (args->count("link")) {
    ctx.link = (*args)["link"].as<std::string>();
    if (auto l = (*catalog)->Link(ctx.link); !l.ok()) return Fail("calibrate ingest", l.status());
  }
  if (args->count("ranks")) ctx.ranks = (*args)["ranks"].as<int>();
  if (args->count("collective")) ctx.collective = (*args)["collective"].as<std::string>();
  if (args->count("run-id")) ctx.run_id = (*args)["run-id"].as<std::string>();
  if (args->count("model")) {
    auto w = ReadWorkload(*args, **catalog);
    if (!w.ok()) return Fail("calibrate ingest", w.status());
    ctx.run = {{"model", w->model_id}, {"height", w->height}, {"width", w->width}, {"frames", w->frames},
               {"steps", w->steps}, {"batch", w->batch}, {"output_type", OutputTypeName(w->output)},
               {"scope", w->output == OutputType::kLatent ? "dit" : "e2e"}};
  }
  if (args->count("config")) {
    auto c = ParseParallelConfig((*args)["config"].as<std::string>());
    if (!c.ok()) return Fail("calibrate ingest", c.status());
    ctx.run["config"] = ToString(*c);
    ctx.run["gpus"] = ctx.ranks > 0 ? ctx.ranks : c->world_size();
  } else if (ctx.ranks > 0) {
    ctx.run["gpus"] = ctx.ranks;
  }

  if (format == IngestFormat::kAuto) {
    auto detected = DetectIngestFormat(text.str(), file);
    if (!detected.ok()) return Fail("calibrate ingest", detected.status());
    format = *detected;
  }
  if (format == IngestFormat::kXditLog) {
    // An xDiT run's latency means something only with its workload and configuration.
    if (!args->count("model")) {
      return Fail("calibrate ingest", Status::InvalidArgument(
                                          "an xDiT log needs the run's workload: give --model (and --height, --width, "
                                          "--steps as run) and --config"));
    }
    if (args->count("config")) {
      const ModelSpec& model = **(*catalog)->Model(ctx.run["model"].get<std::string>());
      auto w = ReadWorkload(*args, **catalog);
      auto c = ParseParallelConfig((*args)["config"].as<std::string>());
      auto tokens = ComputeTokenGeometry(model, *w);
      if (!tokens.ok()) return Fail("calibrate ingest", tokens.status());
      if (ctx.ranks > 0 && ctx.ranks != c->world_size()) {
        return Fail("calibrate ingest", Status::InvalidArgument(fmt::format(
                                            "--ranks {} but --config '{}' runs on {} GPUs", ctx.ranks,
                                            (*args)["config"].as<std::string>(), c->world_size())));
      }
      Status valid = ValidateConfig({&model, *tokens, w->steps, w->batch, c->world_size()}, *c);
      if (!valid.ok()) return Fail("calibrate ingest", valid.WithContext("--config"));
    }
  }
  std::vector<std::string> warnings;
  ctx.warnings = &warnings;
  auto measurements = ParseIngest(text.str(), format, ctx, file);
  for (const auto& w : warnings) std::cerr << "ditune calibrate ingest: warning: " << w << "\n";
  if (!measurements.ok()) return Fail("calibrate ingest", measurements.status());
  // Nothing is stored from a file with an error: every row must also be one the fits and the
  // catalog can take, or it would fail every later fit.
  for (size_t i = 0; i < measurements->size(); ++i) {
    const Measurement& m = (*measurements)[i];
    Status st = CheckFittable(m);
    if (st.ok() && !(*catalog)->Gpu(m.device).ok()) {
      st = Status::InvalidArgument(fmt::format("device '{}' is not a catalog GPU id (see `ditune hardware`; 'cpu' "
                                               "for this machine's cores)",
                                               m.device));
    }
    if (st.ok() && !m.link.empty() && !(*catalog)->Link(m.link).ok()) {
      st = Status::InvalidArgument(fmt::format("link '{}' is not a catalog link id (see `ditune hardware`)", m.link));
    }
    if (!st.ok()) {
      return Fail("calibrate ingest",
                  st.WithContext(fmt::format("{}: measurement {} of {} (nothing was stored)", file, i + 1,
                                             measurements->size())));
    }
  }
  auto store = OpenStoreFromArgs(*args);
  if (!store.ok()) return Fail("calibrate ingest", store.status());
  auto ids = (*store)->AddMeasurements(*measurements);
  if (!ids.ok()) return Fail("calibrate ingest", ids.status());
  std::cout << fmt::format("ingested {} measurements from {} into {}\n", ids->size(), file, (*store)->path());
  if (args->count("fit")) {
    std::vector<std::string> skipped;
    auto fits = RecalibrateAll(store->get(), **catalog, &skipped);
    if (!fits.ok()) return Fail("calibrate ingest", fits.status());
    PrintFits(*fits);
    for (const auto& s : skipped) std::cerr << "not fitted: " << s << "\n";
  }
  return 0;
}

int FitCmd(int argc, char** argv) {
  cxxopts::Options options("ditune calibrate fit", "Refit every model from the stored measurements");
  options.add_options()("db", "calibration database", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate fit", args.status());
  if (help) return 0;
  auto store = OpenStoreFromArgs(*args);
  if (!store.ok()) return Fail("calibrate fit", store.status());
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate fit", catalog.status());
  std::vector<std::string> skipped;
  auto fits = RecalibrateAll(store->get(), **catalog, &skipped);
  if (!fits.ok()) return Fail("calibrate fit", fits.status());
  if (fits->empty()) {
    return Fail("calibrate fit", Status::InvalidArgument(fmt::format(
                                     "{} holds no op or collective measurements to fit; add some with "
                                     "`ditune calibrate ingest`",
                                     (*store)->path())));
  }
  if (args->count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : *fits) out.push_back({{"kind", f.kind}, {"key", f.key}, {"points", f.points}, {"mape", f.mape}, {"params", f.params}});
    std::cout << nlohmann::json{{"fits", out}, {"skipped", skipped}}.dump(2) << "\n";
    return 0;
  }
  PrintFits(*fits);
  for (const auto& s : skipped) std::cerr << "not fitted: " << s << "\n";
  return 0;
}

int Show(int argc, char** argv) {
  cxxopts::Options options("ditune calibrate show", "The active fits, their error and point counts");
  options.add_options()("db", "calibration database", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("calibrate show", args.status());
  if (help) return 0;
  auto store = OpenStoreFromArgs(*args);
  if (!store.ok()) return Fail("calibrate show", store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail("calibrate show", fits.status());
  auto measurements = (*store)->Measurements();
  if (!measurements.ok()) return Fail("calibrate show", measurements.status());
  auto version = (*store)->CalibrationVersion();
  if (!version.ok()) return Fail("calibrate show", version.status());
  if (args->count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : *fits) {
      out.push_back({{"id", f.id}, {"kind", f.kind}, {"key", f.key}, {"points", f.points}, {"mape", f.mape},
                     {"params", f.params}, {"measurement_ids", f.measurement_ids}, {"unix_time", f.unix_time}});
    }
    std::cout << nlohmann::json{{"db", (*store)->path()}, {"calibration_version", *version},
                                {"measurements", measurements->size()}, {"fits", out}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: {} measurements, {} active fits, calibration version {}\n", (*store)->path(),
                           measurements->size(), fits->size(), *version);
  if (!fits->empty()) PrintFits(*fits);
  return 0;
}

}  // namespace

// Progress on a terminal only.
exec::Progress TerminalProgress(const char* what) {
  if (!isatty(2)) return {};
  return [what](int done, int total) {
    std::cerr << fmt::format("\r{} {}/{}", what, done, total) << (done == total ? "\n" : "") << std::flush;
  };
}

int ComputeCmd(int argc, char** argv) {
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
      id = (*args)["gpu"].as<std::string>();
      auto gpu = (*catalog)->Gpu(*id);
      if (!gpu.ok()) return Fail("calibrate compute", gpu.status());
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

int CommCmd(int argc, char** argv) {
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
  std::vector<Measurement> ms;
  auto rows = exec::CommSweep(world->get(), (*args)["link"].as<std::string>(), (*args)["iters"].as<int>(), &ms,
                              root ? TerminalProgress("comm sweep") : exec::Progress{}, device.get());
  if (!rows.ok()) return root ? Fail("calibrate comm", rows.status()) : rows.status().ExitCode();
  if (!root) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("calibrate comm", catalog.status());
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

int RunCalibrate(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage << "\n";
    return 2;
  }
  const std::string sub = argv[1];
  if (sub == "ingest") return Ingest(argc - 1, argv + 1);
  if (sub == "fit") return FitCmd(argc - 1, argv + 1);
  if (sub == "show") return Show(argc - 1, argv + 1);
  if (sub == "compute") return ComputeCmd(argc - 1, argv + 1);
  if (sub == "comm") return CommCmd(argc - 1, argv + 1);
  if (sub == "learn") return RunCalibrateLearn(argc - 1, argv + 1);
  if (sub == "-h" || sub == "--help") {
    std::cout << kUsage << "\n";
    return 0;
  }
  std::cerr << "ditune calibrate: unknown subcommand '" << sub << "'\n" << kUsage << "\n";
  return 2;
}

}  // namespace ditune::cli
