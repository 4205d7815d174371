// `mpirun -np N ditune autotune [--backend cpu|cuda|ref] WORKLOAD [--gpu ID]`: the DiT engine's
// autotuning — every valid configuration for the launched ranks priced as the engine runs it,
// the best K run for real across the ranks (NCCL on GPUs where built, else MPI staged through
// the host), each run recorded, the fits rebuilt (the engine scale of this many ranks comes
// from these runs) and the runs predicted again.
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibration/records.h"
#include "cli/cli_common.h"
#include "cli/run_common.h"
#include "costmodels/store.h"
#include "executor/device.h"
#include "executor/engine_run.h"
#include "planner/launch.h"
#include "planner/predict.h"

namespace ditune::cli {

int AutotuneOnEngine(const cxxopts::ParseResult& args, exec::Comm& mpi_world, const std::string& backend) {
  const bool root = mpi_world.rank() == 0;
  auto fail = [&](const Status& st) { return root ? Fail("autotune", st) : st.ExitCode(); };
  const int candidates = args["candidates"].as<int>(), iters = args["iters"].as<int>();
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return fail(catalog.status());
  auto workload = ReadWorkload(args, **catalog);
  if (!workload.ok()) return fail(workload.status());
  workload->output = OutputType::kLatent;
  const ModelSpec& model = **(*catalog)->Model(workload->model_id);

  // The cluster: the launched ranks, on --gpu or the catalog GPU this rank's device is (the
  // host, "cpu", for the kernels that run there).
  ClusterSpec spec;
  spec.gpus = mpi_world.size();
  if (args.count("gpu")) {
    spec.gpu_id = args["gpu"].as<std::string>();
  } else if (backend != "cuda") {
    spec.gpu_id = "cpu";
  } else {
    auto device = exec::CreateDevice(backend);
    if (!device.ok()) return fail(device.status());
    auto id = MapGpuName((*device)->props().name, **catalog);
    if (!id.ok()) return fail(id.status());
    spec.gpu_id = *id;
  }
  if (args.count("gpus-per-node")) spec.gpus_per_node = args["gpus-per-node"].as<int>();
  if (args.count("nodes")) spec.nodes = args["nodes"].as<int>();
  if (args.count("intra")) spec.intra_id = args["intra"].as<std::string>();
  if (args.count("inter")) spec.inter_id = args["inter"].as<std::string>();
  auto cluster = ResolveCluster(spec, **catalog);
  if (!cluster.ok()) return fail(cluster.status());
  // As `run` prices them: the host's kernels on the host by their own sweep (the cpu kernels
  // by the catalog's CPU figures until swept), on a catalog GPU as the cuda engine there.
  const std::string priced_as = EnginePricedAs(backend, *cluster->gpu);

  auto store = OpenStore(args.count("db") ? args["db"].as<std::string>() : Store::DefaultPath());
  if (!store.ok()) return fail(store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return fail(fits.status());
  if (priced_as == "ref" && !HasComputeFits(*fits, "cpu", "ref")) {
    return fail(Status::InvalidArgument(
        "the ref kernels on this host are not calibrated: run `ditune calibrate compute --backend ref` first"));
  }

  // 1. Price every valid configuration as the engine runs it.
  auto ranked = RankEngineConfigs(**catalog, *workload, *cluster, *fits, priced_as);
  if (!ranked.ok()) return fail(ranked.status());
  if (ranked->empty()) return fail(Status::Infeasible("no valid configuration for the launched ranks"));

  // 2. Run the best K for real, across the ranks.
  std::unique_ptr<exec::Comm> nccl;
  exec::Comm* world = &mpi_world;
  const auto built = exec::CommBackends();
  const bool nccl_built = std::find(built.begin(), built.end(), "nccl") != built.end();
  const std::string transport =
      args.count("comm") ? args["comm"].as<std::string>() : (backend == "cuda" && nccl_built ? "nccl" : "mpi");
  if (transport == "nccl") {
    auto w = exec::CreateComm("nccl", nullptr, nullptr);
    if (!w.ok()) return fail(w.status());
    nccl = std::move(*w);
    world = nccl.get();
  }
  struct Row {
    ParallelConfig config;
    double before = 0, measured = 0, after = 0;
    std::string skipped;  // why it did not run
  };
  std::vector<Row> rows;
  std::vector<Measurement> records;
  std::vector<RunRecord> runs;
  const int k = std::min<int>(candidates, static_cast<int>(ranked->size()));
  for (int i = 0; i < k; ++i) {
    const ParallelConfig& c = (*ranked)[i].config;
    if (root && isatty(2)) std::cerr << fmt::format("\rrunning {}/{}: {}   ", i + 1, k, Label(c)) << std::flush;
    exec::EngineRunOptions ro;
    ro.kernels = backend;
    ro.world = world;
    ro.iters = iters;
    auto r = exec::MeasureEngineRun(model, *workload, c, ro);
    if (!r.ok()) {
      // Refusals every rank makes alike (too large for the device, not run across ranks).
      if (r.status().code() == Status::Code::kInvalidArgument || r.status().code() == Status::Code::kNotSupported) {
        rows.push_back({c, (*ranked)[i].dit_s, 0, 0, r.status().message()});
        continue;
      }
      world->Abort(r.status().ToString());
      return fail(r.status());
    }
    rows.push_back({c, (*ranked)[i].dit_s, r->median_s, 0, ""});
    const std::string run_id = calibration::NewRunId(spec.gpu_id);
    RunRecord rec = calibration::EngineRunRecord(model, *workload, c, backend, spec.gpu_id, std::string(world->backend()),
                                    (*ranked)[i].dit_s, *r, run_id);
    rec.plan["autotune"] = true;
    runs.push_back(std::move(rec));
    records.push_back(calibration::DitMeasurement(model, *workload, c, c.world_size(), backend, spec.gpu_id, r->median_s, r->p10_s,
                                     r->p90_s, r->iters, run_id,
                                     {{"backend", backend}, {"comm", std::string(world->backend())},
                                      {"autotune", true}, {"predicted_s", (*ranked)[i].dit_s}}));
  }
  if (root && isatty(2)) std::cerr << "\n";
  std::vector<double> predicted, measured;
  for (const auto& r : rows) {
    if (!r.skipped.empty()) continue;
    predicted.push_back(r.before);
    measured.push_back(r.measured);
  }
  if (measured.empty()) return fail(Status::Infeasible(fmt::format("none of the {} best configurations ran: {}", k,
                                                                   rows.front().skipped)));
  if (!root) return 0;
  // 3. Record the runs and refit (as `calibrate fit`: the engine scale of this many ranks on
  // this device and backend comes from them), 4. predict again.
  if (auto ids = (*store)->RecordRuns(runs, records); !ids.ok()) return fail(ids.status());
  std::vector<std::string> skipped;
  auto refitted = RecalibrateAll(store->get(), **catalog, &skipped);
  if (!refitted.ok()) return fail(refitted.status());
  auto active = (*store)->ActiveFits();
  if (!active.ok()) return fail(active.status());
  const std::string key = EngineFitKey(spec.gpu_id, FitBackend(*cluster->gpu, priced_as), spec.gpus);
  double scale = 0;
  for (const auto& f : *active) {
    if (f.kind == kFitKindE2e && f.key == key && f.params.contains("compute_scale")) {
      scale = f.params["compute_scale"].get<double>();
    }
  }
  std::vector<double> after;
  for (auto& r : rows) {
    if (!r.skipped.empty()) continue;
    auto sim = SimulateEngineRun(model, *workload, r.config, *cluster, *active, priced_as);
    if (!sim.ok()) return fail(sim.status());
    r.after = sim->dit.value();
    after.push_back(r.after);
  }

  std::cout << fmt::format("{} {}x{}, {} steps on {} x {} ({} kernels, {}): {} configurations priced, best {} run\n",
                           model.id, workload->height, workload->width, workload->steps, spec.gpus, spec.gpu_id,
                           backend, world->backend(), ranked->size(), k);
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    if (!r.skipped.empty()) {
      table.push_back({Label(r.config), "-", fmt::format("{:.4f}", r.before), "-", "-", "not run: " + r.skipped});
      continue;
    }
    table.push_back({Label(r.config), fmt::format("{:.4f}", r.measured), fmt::format("{:.4f}", r.before),
                     fmt::format("{:.1f}%", 100 * std::abs(r.before - r.measured) / r.measured),
                     fmt::format("{:.4f}", r.after),
                     fmt::format("{:.1f}%", 100 * std::abs(r.after - r.measured) / r.measured)});
  }
  std::cout << FormatTable({"config", "measured s", "predicted before", "APE before", "predicted after", "APE after"},
                           table);
  const double before_ape = 100 * MeanAbsolutePercentageError(predicted, measured);
  const double after_ape = 100 * MeanAbsolutePercentageError(after, measured);
  if (scale > 0) {
    std::cout << fmt::format("refit: engine scale {:.3f} ({}); mean APE {:.1f}% -> {:.1f}%\n", scale, key, before_ape,
                             after_ape);
  } else {
    // Multi-rank cuda runs over MPI (ranks perhaps sharing a GPU) calibrate no N-GPU plans.
    std::string why = "none fitted";
    for (const auto& line : skipped) {
      if (line.find("engine dit") != std::string::npos) why = line;
    }
    std::cout << fmt::format("refit: no {} from these runs ({}); mean APE {:.1f}% -> {:.1f}%\n", key, why,
                             before_ape, after_ape);
  }
  const Row* fastest = nullptr;
  for (const auto& r : rows) {
    if (r.skipped.empty() && (fastest == nullptr || r.measured < fastest->measured)) fastest = &r;
  }
  std::cout << "fastest measured: " << Label(fastest->config) << "\n";
  return 0;
}

}  // namespace ditune::cli
