// `ditune run [--plan FILE | --config SPEC | --auto] WORKLOAD [--iters N] [--warmup N]`:
// runs the plan on the CPU executor (one process, or every rank of `mpirun -np N`), measures
// it, compares it with the prediction and records both in the store. `--backend cuda|ref`
// runs the DiT engine on one device instead (cmd_run_engine.cc).
#include <unistd.h>

#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibration/cpu_loop.h"
#include "calibration/records.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/run_common.h"
#include "costmodels/store.h"
#include "executor/emulated_comm.h"
#include "executor/run.h"
#include "planner/plan.h"
#include "planner/predict.h"

namespace ditune::cli {

using calibration::CpuCluster;
using calibration::PredictOnCpu;

StatusOr<ParallelConfig> ReadRunConfig(const cxxopts::ParseResult& args, const Workload& workload) {
  if (args.count("config")) return ParseParallelConfig(args["config"].as<std::string>());
  if (!args.count("plan")) return Status::InvalidArgument("give --config SPEC or --plan FILE");
  std::ifstream in(args["plan"].as<std::string>());
  if (!in) return Status::NotFound(fmt::format("cannot open plan '{}'", args["plan"].as<std::string>()));
  std::stringstream ss;
  ss << in.rdbuf();
  return PlanConfigFromJson(ss.str(), "--plan " + args["plan"].as<std::string>(), workload);
}

int RunRun(int argc, char** argv) {
  cxxopts::Options options("ditune run", "Run a plan on the CPU executor, or on one device with the DiT engine, and "
                                         "measure it");
  AddWorkloadOptions(options);
  AddClusterOptions(options);
  options.add_options()
      ("config", "configuration to run", cxxopts::value<std::string>())
      ("plan", "a plan from `ditune plan --json`: run its best configuration", cxxopts::value<std::string>())
      ("auto", "plan for the launched ranks and run the best configuration the executor implements")
      ("emulate-rank", "run only rank R's share of the configuration in this one process, its communication "
                       "charged from the model of the CLUSTER flags' links", cxxopts::value<int>())
      ("iters", "timed iterations", cxxopts::value<int>()->default_value("3"))
      ("warmup", "untimed iterations first", cxxopts::value<int>()->default_value("1"))
      ("seed", "weights and inputs seed", cxxopts::value<uint64_t>()->default_value("42"))
      ("profile", "engine (--backend cuda|ref): after the timed iterations, one more with every kernel timed on the "
                  "device; prints each kernel's time against the model's price of it")
      ("trace", "engine: write the profiled loop's kernels as a Chrome trace (open it in Perfetto; implies "
                "--profile; under mpirun each rank writes FILE's stem.rankR beside it)",
       cxxopts::value<std::string>())
      ("comm", "engine backends across ranks (under mpirun): nccl (GPU memory, one GPU per rank) or mpi (staged "
               "through the host; ranks may share a GPU); default nccl for cuda where built, else mpi. Under "
               "mpirun a rank waits DITUNE_COMM_TIMEOUT_S seconds (default 600, 0: forever) on its peers before it "
               "ends the job",
       cxxopts::value<std::string>())
      ("db", "calibration database", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout")
      ("backend", "cpu: the CPU executor (Eigen, any number of MPI ranks); cuda: the DiT engine on this process's GPU; "
                  "ref: the engine's reference kernels on the host (bf16, slow; for checking)",
       cxxopts::value<std::string>()->default_value("cpu"));
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("run", args.status());
  if (help) return 0;
  // Checked here too, so that a bad value fails the same whether or not this run has peers.
  if (auto timeout = exec::CommTimeoutFromEnv(); !timeout.ok()) return Fail("run", timeout.status());
  const std::string backend = (*args)["backend"].as<std::string>();
  if (backend != "cpu") {
    if (backend != "cuda" && backend != "ref") {
      return Fail("run", Status::InvalidArgument(fmt::format("--backend '{}': valid: cpu, cuda, ref", backend)));
    }
    return RunOnEngine(*args, backend);
  }
  if (args->count("profile") || args->count("trace")) {
    return Fail("run", Status::InvalidArgument(fmt::format(
                           "--{} times the engine's kernels: it needs --backend cuda or ref",
                           args->count("profile") ? "profile" : "trace")));
  }
  if (args->count("comm")) {
    return Fail("run", Status::InvalidArgument(
                           "--comm chooses the engine's transport (--backend cuda|ref); the CPU executor uses MPI "
                           "under mpirun"));
  }
  const bool emulate = args->count("emulate-rank") > 0;
  double charged = 0;  // modelled communication seconds of an emulated rank
  std::unique_ptr<exec::Comm> world_owner;
  if (!emulate) {
    auto world = exec::CreateComm(exec::DefaultCommBackend(), &argc, &argv);
    if (!world.ok()) return Fail("run", world.status());
    world_owner = std::move(*world);
  } else {
    // The world is sized by the configuration; it is built once that is known (below).
    world_owner = exec::NewEmulatedWorld(0, 1, {}, &charged);
  }
  exec::Comm* comm_ptr = world_owner.get();
  const bool root = comm_ptr->rank() == 0;
  auto fail = [&](const Status& st) {
    if (root) return Fail("run", st);
    return st.ExitCode();
  };
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return fail(catalog.status());
  auto workload = ReadWorkload(*args, **catalog);
  if (!workload.ok()) return fail(workload.status());
  const ModelSpec& model = **(*catalog)->Model(workload->model_id);
  const int given = static_cast<int>(args->count("config") + args->count("plan") + args->count("auto"));
  if (given != 1) return fail(Status::InvalidArgument("give exactly one of --config SPEC, --plan FILE, --auto"));
  if (!emulate) {
    for (const char* flag : {"gpu", "gpus", "gpus-per-node", "nodes", "intra", "inter"}) {
      if (args->count(flag)) {
        return fail(Status::InvalidArgument(fmt::format(
            "--{}: the CPU executor runs on the launched ranks; the CLUSTER flags describe the GPUs and links whose "
            "communication --emulate-rank models",
            flag)));
      }
    }
  }
  exec::Comm& comm = *comm_ptr;
  // Every rank reads the store; only rank 0 writes it.
  auto store = OpenStore(args->count("db") ? (*args)["db"].as<std::string>() : Store::DefaultPath());
  if (!store.ok()) return fail(store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return fail(fits.status());

  ParallelConfig config;
  if (args->count("config") || args->count("plan")) {
    auto c = ReadRunConfig(*args, *workload);
    if (!c.ok()) return fail(c.status());
    config = *c;
  } else {
    auto cluster = CpuCluster(**catalog, comm.size());
    if (!cluster.ok()) return fail(cluster.status());
    PlanOptions po;
    po.top_k = 1000;
    auto plan = MakePlan(**catalog, *workload, *cluster, *fits, po);
    if (!plan.ok()) return fail(plan.status());
    if (plan->ranked.empty()) return fail(Status::Infeasible("no configuration of this workload fits the CPU ranks"));
    config = plan->ranked.front().config;
  }
  std::optional<Cluster> emulated_cluster;
  std::unique_ptr<CommModel> emulated_comm_model;
  if (emulate) {
    const int r = (*args)["emulate-rank"].as<int>();
    const int n = config.world_size();
    if (r < 0 || r >= n) {
      return fail(Status::InvalidArgument(fmt::format("--emulate-rank {}: '{}' has ranks 0 to {}", r, Label(config), n - 1)));
    }
    ClusterSpec spec{"cpu", n};
    spec.intra_id = "shm";
    if (args->count("gpu")) {
      auto read = ReadClusterSpec(*args);
      if (!read.ok()) return fail(read.status());
      spec = *read;
    }
    if (spec.gpus != n) {
      return fail(Status::InvalidArgument(fmt::format("--gpus {} but '{}' needs {}", spec.gpus, Label(config), n)));
    }
    auto cl = ResolveCluster(spec, **catalog);
    if (!cl.ok()) return fail(cl.status());
    emulated_cluster = *cl;
    auto models = ModelsFor(*emulated_cluster, model.id, *fits);
    if (!models.ok()) return fail(models.status());
    emulated_comm_model = std::move(models->comm);
    CommModel* cm = emulated_comm_model.get();
    exec::CommCost cost = [cm](const std::string& op, double bytes, int size) {
      std::vector<int> g(static_cast<size_t>(size));
      for (int i = 0; i < size; ++i) g[static_cast<size_t>(i)] = i;
      auto c = ParseCollective(op);
      return c.ok() ? cm->Time(*c, Bytes(bytes), g).value() : 0.0;
    };
    world_owner = exec::NewEmulatedWorld(r, n, cost, &charged);
    comm_ptr = world_owner.get();
  }
  exec::Comm& run_comm = *comm_ptr;
  auto tokens = ComputeTokenGeometry(model, *workload);
  Status valid = ValidateConfig({&model, *tokens, workload->steps, workload->batch, run_comm.size()}, config);
  if (!valid.ok()) return fail(valid);
  auto predicted = PredictOnCpu(**catalog, *workload, config, run_comm.size(), *fits);
  if (!predicted.ok()) return fail(predicted.status());

  exec::RunOptions ro;
  ro.iters = (*args)["iters"].as<int>();
  ro.warmup = (*args)["warmup"].as<int>();
  ro.seed = (*args)["seed"].as<uint64_t>();
  if (ro.iters < 1 || ro.iters > 10000 || ro.warmup < 0 || ro.warmup > 1000) {
    return fail(Status::InvalidArgument("--iters must be 1 to 10000 and --warmup 0 to 1000"));
  }
  auto m = exec::MeasureRun(model, *workload, config, &run_comm, ro);
  if (!m.ok()) {
    // Every rank validated the same input above; a failure in the run itself (a peer that
    // stalled past DITUNE_COMM_TIMEOUT_S, a failed transfer) must not leave the others waiting.
    const Status::Code code = m.status().code();
    if (comm.size() > 1 && code != Status::Code::kInvalidArgument && code != Status::Code::kNotSupported) {
      comm.Abort(m.status().ToString());
    }
    return fail(m.status());
  }
  if (!root) return 0;
  if (emulate) {
    // One rank's real compute plus its modelled communication; nothing is recorded.
    const double comm_s = charged / (ro.warmup + ro.iters);
    const auto& me = m->ranks.front();
    std::cout << fmt::format(
        "{} {}x{}, {} steps: rank {} of '{}' emulated on one process: compute {:.4f} s (measured: gemm {:.4f}, "
        "attention {:.4f}) + communication {:.4f} s (modelled over {}) = {:.4f} s\n",
        model.id, workload->height, workload->width, workload->steps, (*args)["emulate-rank"].as<int>(),
        Label(config), m->latency_median_s, me.gemm_s, me.attention_s, comm_s, emulated_cluster->spec.intra_id,
        m->latency_median_s + comm_s);
    return 0;
  }

  const std::string run_id = calibration::NewRunId(std::to_string(comm.size()));
  const RunRecord rec =
      calibration::CpuRunRecord(model, *workload, config, comm.size(), std::string(comm.backend()), *predicted, *m,
                                run_id);
  const Measurement meas = calibration::CpuRunMeasurement(model, *workload, config, comm.size(), *m, run_id,
                                                          {{"backend", "cpu"}, {"comm", comm.backend()}});
  Status st = (*store)->RecordRuns({rec}, {meas}).status();
  if (!st.ok()) return fail(st);

  if (args->count("json")) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : m->ranks) {
      ranks.push_back({{"rank", r.rank}, {"dit_s", r.dit_median_s}, {"step_s", r.step_median_s}, {"gemm_s", r.gemm_s},
                       {"attention_s", r.attention_s}, {"comm_s", r.comm_s}});
    }
    std::cout << nlohmann::json{{"run_id", run_id}, {"config", ToString(config)}, {"ranks", comm.size()},
                                {"measured_s", m->latency_median_s}, {"p10_s", m->latency_p10_s},
                                {"p90_s", m->latency_p90_s}, {"predicted_s", *predicted}, {"imbalance", m->imbalance},
                                {"per_rank", ranks}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("{} {}x{}, {} steps, batch {} on {} CPU rank(s) ({}): {}\n", model.id, workload->height,
                           workload->width, workload->steps, workload->batch, comm.size(), comm.backend(), Label(config));
  std::cout << fmt::format("DiT (slowest rank, median of {}): {:.4f} s  [p10 {:.4f}, p90 {:.4f}]; predicted {:.4f} s "
                           "({:+.1f}%); imbalance {:.1f}%\n",
                           m->iters, m->latency_median_s, m->latency_p10_s, m->latency_p90_s, *predicted,
                           100 * (*predicted / m->latency_median_s - 1), 100 * m->imbalance);
  std::cout << "text encoding and VAE decode: not run by the CPU executor (latent output)\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : m->ranks) {
    rows.push_back({std::to_string(r.rank), fmt::format("{:.4f}", r.dit_median_s), fmt::format("{:.2f}", 1e3 * r.step_median_s),
                    fmt::format("{:.4f}", r.gemm_s), fmt::format("{:.4f}", r.attention_s), fmt::format("{:.4f}", r.comm_s)});
  }
  std::cout << FormatTable({"rank", "DiT s", "step ms", "gemm s", "attention s", "comm s"}, rows);
  std::cout << "recorded as " << run_id << " in " << (*store)->path() << "\n";
  return 0;
}

}  // namespace ditune::cli
