// `ditune calibrate ingest FILE`: measurements from a user's files (CSV, nccl-tests output,
// xDiT logs, PyTorch profiler traces) into the store, and the fits rebuilt.
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
#include "calibration/link_check.h"
#include "calibration/op_fits.h"
#include "calibration/predict.h"
#include "calibration/recalibrate.h"
#include "executor/comm.h"
#include "executor/device.h"
#include "executor/kernels.h"
#include "executor/microbench.h"

#include <unistd.h>
namespace ditune::cli {

int CalibrateIngest(int argc, char** argv) {
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
      ("accept-slow", "store collectives that fall far below their link's figure (the machine you plan for is that slow)")
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
    auto id = GpuIdOf((*args)["gpu"].as<std::string>());
    if (!id.ok()) return Fail("calibrate ingest", id.status());
    ctx.device = *id;
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
  if (args->count("run-id")) {
    // Every format takes --run-id; a CSV row's own run_id must agree with it.
    for (size_t i = 0; i < measurements->size(); ++i) {
      Measurement& m = (*measurements)[i];
      if (m.run_id.empty()) m.run_id = ctx.run_id;
      if (m.run_id != ctx.run_id) {
        return Fail("calibrate ingest",
                    Status::InvalidArgument(fmt::format(
                        "{}: measurement {} of {} has run_id '{}' but --run-id is '{}' (nothing was stored); leave "
                        "out --run-id or the column",
                        file, i + 1, measurements->size(), m.run_id, ctx.run_id)));
      }
    }
  }
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
    if (st.ok() && m.backend == "xdit") {
      // A configuration a log announces ("Running test for size 1000, ulysses_degree 3") gets
      // the checks --config gets: its degrees, its product and its workload's split.
      st = CheckXditRunConfig(m.params, **catalog);
    }
    if (st.ok() && m.params.is_object() && m.params.contains("peak_memory_gb") &&
        m.params["peak_memory_gb"].is_number()) {
      // A peak beyond the GPU's memory cannot have been measured on it: fitted, it would make
      // every later plan on that GPU "not fit".
      const double peak = m.params["peak_memory_gb"].get<double>();
      const GpuSpec& gpu = **(*catalog)->Gpu(m.device);
      if (!(peak > 0) || peak * 1e9 > gpu.memory.value()) {
        st = Status::InvalidArgument(fmt::format(
            "peak memory {} GB is not possible on {} ({:.0f} GB): valid: above 0 and at most the GPU's memory; check "
            "the log's GPU (--gpu) and its memory lines",
            peak, m.device, gpu.memory.value() / 1e9));
      }
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
  // Collectives far below what their link gives are a machine problem more often than a
  // figure to plan with: fitted, they would make every later plan on that link slower.
  const std::vector<LinkShortfall> shortfalls = FindLinkShortfalls(*measurements, **catalog);
  if (!shortfalls.empty()) {
    std::string listed;
    for (const auto& s : shortfalls) listed += "\n  " + LinkShortfallText(s);
    if (!args->count("accept-slow")) {
      return Fail("calibrate ingest",
                  Status::InvalidArgument(fmt::format(
                      "{}: the measured collectives fall far below what the link gives, so nothing was stored (fitted, "
                      "they would slow every later plan on the link); fix the machine and measure again, or give "
                      "--accept-slow if this is the machine you plan for:{}\n  for the whole diagnosis and what it costs "
                      "your plans: ditune doctor {} --gpu {} (with nvidia-smi topo -m and your NCCL_* settings beside it)",
                      file, listed, file, measurements->front().device)));
    }
    std::cerr << "ditune calibrate ingest: warning: storing collectives far below the link's figure (--accept-slow):"
              << listed << "\n";
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


}  // namespace ditune::cli
