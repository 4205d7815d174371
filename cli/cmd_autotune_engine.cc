// `mpirun -np N ditune autotune [--backend cpu|cuda|ref] WORKLOAD [--gpu ID]`: the cluster the
// launched ranks are, the loop itself (calibration::AutotuneEngine: price every configuration
// as the engine runs it, run the best K across the ranks, record, refit, price again), and
// its table of errors before and after.
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "runs/engine_loop.h"
#include "cli/cli_common.h"
#include "store/store.h"
#include "executor/device.h"
#include "planner/gpu_launch.h"
#include "calibration/predict.h"

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
    auto id = GpuIdOf(args["gpu"].as<std::string>());
    if (!id.ok()) return fail(id.status());
    spec.gpu_id = *id;
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
  auto store = OpenStore(args.count("db") ? args["db"].as<std::string>() : Store::DefaultPath());
  if (!store.ok()) return fail(store.status());

  // The transport: NCCL between GPUs where asked (default for cuda where built), else the
  // launched MPI world.
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
  calibration::AutotuneOptions ao;
  ao.backend = backend;
  ao.candidates = candidates;
  ao.iters = iters;
  ao.world = world;
  if (isatty(2)) {
    ao.progress = [](int i, int k, const ParallelConfig& c) {
      std::cerr << fmt::format("\rrunning {}/{}: {}   ", i, k, Label(c)) << (i == k ? "\n" : "") << std::flush;
    };
  }
  auto result = calibration::AutotuneEngine(**catalog, store->get(), model, *workload, *cluster, ao);
  if (!result.ok()) {
    // Refusals every rank makes alike end the command; anything else (a failed transfer) must
    // not leave the peers waiting.
    const Status::Code code = result.status().code();
    if (code != Status::Code::kInvalidArgument && code != Status::Code::kNotSupported &&
        code != Status::Code::kInfeasible) {
      world->Abort(result.status().ToString());
    }
    return fail(result.status());
  }
  if (!root) return 0;
  const auto& rows = result->rows;
  std::vector<double> predicted, measured, after;
  for (const auto& r : rows) {
    if (!r.skipped.empty()) continue;
    predicted.push_back(r.before_s);
    measured.push_back(r.measured_s);
    after.push_back(r.after_s);
  }
  const size_t k = rows.size();
  std::cout << fmt::format("{} {}x{}, {} steps on {} x {} ({} kernels, {}): {} configurations priced, best {} run\n",
                           model.id, workload->height, workload->width, workload->steps, spec.gpus, spec.gpu_id,
                           backend, world->backend(), result->priced, k);
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    if (!r.skipped.empty()) {
      table.push_back({Label(r.config), "-", fmt::format("{:.4f}", r.before_s), "-", "-", "not run: " + r.skipped});
      continue;
    }
    table.push_back({Label(r.config), fmt::format("{:.4f}", r.measured_s), fmt::format("{:.4f}", r.before_s),
                     fmt::format("{:.1f}%", 100 * std::abs(r.before_s - r.measured_s) / r.measured_s),
                     fmt::format("{:.4f}", r.after_s),
                     fmt::format("{:.1f}%", 100 * std::abs(r.after_s - r.measured_s) / r.measured_s)});
  }
  std::cout << FormatTable({"config", "measured s", "predicted before", "APE before", "predicted after", "APE after"},
                           table);
  const double before_ape = 100 * MeanAbsolutePercentageError(predicted, measured);
  const double after_ape = 100 * MeanAbsolutePercentageError(after, measured);
  if (result->scale > 0) {
    std::cout << fmt::format("refit: engine scale {:.3f} ({}); mean APE {:.1f}% -> {:.1f}%\n", result->scale,
                             result->scale_key, before_ape, after_ape);
  } else {
    std::cout << fmt::format("refit: no {} from these runs ({}); mean APE {:.1f}% -> {:.1f}%\n", result->scale_key,
                             result->unfitted, before_ape, after_ape);
  }
  const calibration::AutotuneRow* fastest = nullptr;
  for (const auto& r : rows) {
    if (r.skipped.empty() && (fastest == nullptr || r.measured_s < fastest->measured_s)) fastest = &r;
  }
  std::cout << "fastest measured: " << Label(fastest->config) << "\n";
  return 0;
}

}  // namespace ditune::cli
