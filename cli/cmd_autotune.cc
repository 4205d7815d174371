// `mpirun -np N ditune autotune WORKLOAD [--candidates K] [--backend cpu|cuda|ref]`: predict
// every configuration for the launched ranks, run the best K for real, record them, refit,
// predict again, and show the error before and after (the CPU executor here; ditune's engine
// in cmd_autotune_engine.cc).
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibration/cpu_loop.h"
#include "calibration/records.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "costmodels/store.h"
#include "executor/run.h"
#include "planner/plan.h"
#include "planner/predict.h"

namespace ditune::cli {

using calibration::CpuCluster;
using calibration::PredictOnCpu;

int AutotuneOnEngine(const cxxopts::ParseResult& args, exec::Comm& mpi_world, const std::string& backend);

int RunAutotune(int argc, char** argv) {
  auto world = exec::CreateComm(exec::DefaultCommBackend(), &argc, &argv);
  if (!world.ok()) return Fail("autotune", world.status());
  exec::Comm& comm = **world;
  const bool root = comm.rank() == 0;
  auto fail = [&](const Status& st) { return root ? Fail("autotune", st) : st.ExitCode(); };
  cxxopts::Options options("ditune autotune", "Predict, run the best candidates for real, refit, predict again");
  AddWorkloadOptions(options);
  AddClusterOptions(options);
  options.add_options()
      ("candidates", "how many of the best-predicted configurations to run", cxxopts::value<int>()->default_value("3"))
      ("iters", "timed iterations per run", cxxopts::value<int>()->default_value("3"))
      ("backend", "cpu: the CPU executor on the launched ranks; cuda: ditune's engine on each rank's GPU; ref: the "
                  "engine's reference kernels on the host",
       cxxopts::value<std::string>()->default_value("cpu"))
      ("comm", "engine backends: nccl (GPU memory, one GPU per rank) or mpi (staged through the host; ranks may "
               "share a GPU); default nccl for cuda where built, else mpi",
       cxxopts::value<std::string>())
      ("db", "calibration database", cxxopts::value<std::string>());
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return fail(args.status());
  if (help) return 0;
  const std::string backend = (*args)["backend"].as<std::string>();
  if (backend != "cpu" && backend != "cuda" && backend != "ref") {
    return fail(Status::InvalidArgument(fmt::format("--backend '{}': valid: cpu, cuda, ref", backend)));
  }
  if (args->count("gpus") && (*args)["gpus"].as<int>() != comm.size()) {
    return fail(Status::InvalidArgument(fmt::format("--gpus {} but {} ranks were launched (mpirun -np {})",
                                                    (*args)["gpus"].as<int>(), comm.size(), (*args)["gpus"].as<int>())));
  }
  const int candidates = (*args)["candidates"].as<int>(), iters = (*args)["iters"].as<int>();
  if (candidates < 1 || candidates > 1000) {
    return fail(Status::InvalidArgument(fmt::format("--candidates {}: give 1 to 1000", candidates)));
  }
  if (iters < 1 || iters > 10000) return fail(Status::InvalidArgument(fmt::format("--iters {}: give 1 to 10000", iters)));
  if (args->count("comm")) {
    const std::string c = (*args)["comm"].as<std::string>();
    if (c != "mpi" && c != "nccl") return fail(Status::InvalidArgument(fmt::format("--comm '{}': valid: mpi, nccl", c)));
    if (backend == "cpu") {
      return fail(Status::InvalidArgument("--comm chooses the engine's transport (--backend cuda|ref); the CPU "
                                          "executor uses MPI"));
    }
    if (c == "nccl" && backend != "cuda") {
      return fail(Status::InvalidArgument("--comm nccl moves GPU memory: it needs --backend cuda"));
    }
  }
  if (backend != "cpu") return AutotuneOnEngine(*args, comm, backend);
  // The cluster is the launched ranks; CLUSTER flags may only say so.
  if (args->count("gpu") && (*args)["gpu"].as<std::string>() != "cpu") {
    return fail(Status::InvalidArgument(fmt::format(
        "--gpu {}: the CPU executor runs on the launched ranks (--gpu cpu); give --backend cuda for ditune's engine "
        "on the GPUs",
        (*args)["gpu"].as<std::string>())));
  }
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return fail(catalog.status());
  auto workload = ReadWorkload(*args, **catalog);
  if (!workload.ok()) return fail(workload.status());
  workload->output = OutputType::kLatent;
  const ModelSpec& model = **(*catalog)->Model(workload->model_id);
  auto store = OpenStore(args->count("db") ? (*args)["db"].as<std::string>() : Store::DefaultPath());
  if (!store.ok()) return fail(store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return fail(fits.status());
  auto cluster = CpuCluster(**catalog, comm.size());
  if (!cluster.ok()) return fail(cluster.status());

  // 1. Predict every valid configuration.
  PlanOptions po;
  po.top_k = 100000;
  auto plan = MakePlan(**catalog, *workload, *cluster, *fits, po);
  if (!plan.ok()) return fail(plan.status());
  std::vector<ParallelConfig> configs;
  for (const auto& c : plan->ranked) configs.push_back(c.config);
  const int k = std::min<int>(candidates, static_cast<int>(configs.size()));
  if (k < 1) return fail(Status::Infeasible("no configuration of this workload runs on the CPU executor"));
  configs.resize(k);

  // 2. Run them for real.
  struct Row {
    ParallelConfig config;
    double before = 0, measured = 0, after = 0;
  };
  std::vector<Row> rows;
  std::vector<Measurement> records;
  for (int i = 0; i < k; ++i) {
    if (root && isatty(2)) std::cerr << fmt::format("\rrunning {}/{}: {}   ", i + 1, k, Label(configs[i])) << std::flush;
    auto before = PredictOnCpu(**catalog, *workload, configs[i], comm.size(), *fits);
    if (!before.ok()) return fail(before.status());
    exec::RunOptions ro;
    ro.iters = iters;
    auto m = exec::MeasureRun(model, *workload, configs[i], &comm, ro);
    if (!m.ok()) return fail(m.status());
    rows.push_back({configs[i], *before, m->latency_median_s, 0});
    records.push_back(calibration::CpuRunMeasurement(model, *workload, configs[i], comm.size(), *m, "autotune",
                                                     {{"predicted_s", *before}}));
  }
  if (root && isatty(2)) std::cerr << "\n";
  // 3. Refit: the framework's compute scale for (cpu, model) from these runs.
  std::vector<double> predicted, measured;
  for (const auto& r : rows) {
    predicted.push_back(r.before);
    measured.push_back(r.measured);
  }
  auto refit = calibration::RefitCpuComputeScale(*fits, model.id, predicted, measured);
  if (!refit.ok()) return fail(refit.status());
  Fit fit = *refit;
  const std::vector<Fit> new_fits = calibration::WithFit(*fits, fit);
  // 4. Predict again.
  std::vector<double> after;
  for (auto& r : rows) {
    auto p = PredictOnCpu(**catalog, *workload, r.config, comm.size(), new_fits);
    if (!p.ok()) return fail(p.status());
    r.after = *p;
    after.push_back(*p);
  }
  if (!root) return 0;
  // The runs' measurements and the fit made from them land together (one transaction).
  fit.mape = MeanAbsolutePercentageError(after, measured);
  if (auto ids = (*store)->RecordRuns({}, records, {fit}); !ids.ok()) return fail(ids.status());

  std::cout << fmt::format("{} {}x{}, {} steps on {} CPU ranks: {} configurations predicted, best {} run\n", model.id,
                           workload->height, workload->width, workload->steps, comm.size(), plan->ranked.size(), k);
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    table.push_back({Label(r.config), fmt::format("{:.4f}", r.measured), fmt::format("{:.4f}", r.before),
                     fmt::format("{:.1f}%", 100 * std::abs(r.before - r.measured) / r.measured),
                     fmt::format("{:.4f}", r.after), fmt::format("{:.1f}%", 100 * std::abs(r.after - r.measured) / r.measured)});
  }
  std::cout << FormatTable({"config", "measured s", "predicted before", "APE before", "predicted after", "APE after"},
                           table);
  std::cout << fmt::format("refit: compute scale {:.3f} for (cpu, {}); mean APE {:.1f}% -> {:.1f}%\n",
                           fit.params["compute_scale"].get<double>(), model.id, 100 * MeanAbsolutePercentageError(predicted, measured),
                           100 * fit.mape);
  const auto fastest = std::min_element(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.measured < b.measured; });
  std::cout << "fastest measured: " << Label(fastest->config) << "\n";
  return 0;
}

}  // namespace ditune::cli
