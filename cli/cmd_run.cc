// `ditune run [--plan FILE | --config SPEC | --auto] WORKLOAD [--backend cpu|cuda|ref]`: ditune's
// DiT engine runs the plan on the chosen kernels — the whole model on one device; with
// --emulate-rank R exactly rank R's share of a multi-device plan; or, under mpirun, every rank
// of the plan exchanging for real (MPI in host memory, or NCCL between GPUs) — measured by the
// one timing protocol (executor/engine_run.h), then compared with the prediction and recorded
// (run_report.cc).
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/run_common.h"
#include "core/config_rules.h"
#include "costmodels/calibration.h"
#include "store/store.h"
#include "executor/comm_wait.h"
#include "executor/device.h"
#include "executor/engine_run.h"
#include "executor/rank_agreement.h"
#include "planner/gpu_launch.h"
#include "calibration/predict.h"

namespace ditune::cli {
namespace {

constexpr const char* kCmd = "run";

void AddRunOptions(cxxopts::Options& options) {
  AddWorkloadOptions(options);
  AddClusterOptions(options);
  options.add_options()
      ("config", "configuration to run", cxxopts::value<std::string>())
      ("plan", "a plan from `ditune plan --json`: run its best configuration", cxxopts::value<std::string>())
      ("auto", "price every configuration for the launched ranks as the engine runs it and run the best")
      ("emulate-rank", "run only rank R's share of the configuration in this one process, its transfers left out "
                       "and its communication charged from the model of the CLUSTER flags' links",
       cxxopts::value<int>())
      ("iters", "timed iterations", cxxopts::value<int>()->default_value("3"))
      ("warmup", "untimed iterations first", cxxopts::value<int>()->default_value("1"))
      ("seed", "weights and inputs seed", cxxopts::value<uint64_t>()->default_value("42"))
      ("profile", "after the timed iterations, one more with every kernel timed on the device; prints each "
                  "kernel's time against the model's price of it")
      ("trace", "write the profiled loop's kernels as a Chrome trace (open it in Perfetto; implies --profile; "
                "under mpirun each rank writes FILE's stem.rankR beside it)",
       cxxopts::value<std::string>())
      ("comm", "transport between the ranks (under mpirun): nccl (GPU memory, one GPU per rank) or mpi (host "
               "memory; GPU ranks staged through it and may share a GPU); default nccl for cuda where built, else "
               "mpi. A rank waits DITUNE_COMM_TIMEOUT_S seconds (default 600, 0: forever) on its peers before it "
               "ends the job",
       cxxopts::value<std::string>())
      ("db", "calibration database", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout")
      ("backend", "the engine's kernels: cpu (this host's cores, fp32, the kernels built for its instruction set), "
                  "cuda (this process's GPU, bf16) or ref (the reference kernels on the host: bf16, every access "
                  "checked, slow)",
       cxxopts::value<std::string>()->default_value("cpu"));
}

// The configuration to run: --config, --plan, or with --auto the best the engine's price
// finds for the `ranks` launched ranks on `gpu_id`.
StatusOr<ParallelConfig> ChooseConfig(const cxxopts::ParseResult& args, const Catalog& catalog,
                                      const Workload& workload, const std::vector<Fit>& fits,
                                      const std::string& backend, const std::string& gpu_id, int ranks) {
  if (!args.count("auto")) return ReadRunConfig(args, workload);
  ClusterSpec spec{gpu_id, ranks};
  DITUNE_ASSIGN_OR_RETURN(Cluster cluster, ResolveCluster(spec, catalog));
  const std::string priced_as = EnginePricedAs(backend, *cluster.gpu);
  if (priced_as == "ref" && !HasComputeFits(fits, "cpu", "ref")) {
    return Status::InvalidArgument(
        "--auto: the ref kernels on this host are not calibrated: run `ditune calibrate compute --backend ref` first");
  }
  DITUNE_ASSIGN_OR_RETURN(auto ranked, RankEngineConfigs(catalog, workload, cluster, fits, priced_as));
  if (ranked.empty()) {
    return Status::Infeasible(fmt::format("no configuration of {} fits {} launched rank(s) on {}", workload.model_id,
                                          ranks, gpu_id));
  }
  return ranked.front().config;
}

}  // namespace

int RunRun(int argc, char** argv) {
  cxxopts::Options options("ditune run", "Run a plan with ditune's DiT engine, measure it, compare it with the "
                                         "prediction and record both");
  AddRunOptions(options);
  bool help = false;
  auto parsed = Parse(options, argc, argv, &help);
  if (!parsed.ok()) return Fail(kCmd, parsed.status());
  if (help) return 0;
  const cxxopts::ParseResult& args = *parsed;
  // Checked here too, so that a bad value fails the same whether or not this run has peers.
  if (auto timeout = exec::CommTimeoutFromEnv(); !timeout.ok()) return Fail(kCmd, timeout.status());
  const std::string backend = args["backend"].as<std::string>();
  if (backend != "cpu" && backend != "cuda" && backend != "ref") {
    return Fail(kCmd, Status::InvalidArgument(fmt::format("--backend '{}': valid: cpu, cuda, ref", backend)));
  }
  if (args.count("config") + args.count("plan") + args.count("auto") != 1) {
    return Fail(kCmd, Status::InvalidArgument("give exactly one of --config SPEC, --plan FILE, --auto"));
  }
  const bool emulate = args.count("emulate-rank") > 0;
  if (emulate && args.count("auto")) {
    return Fail(kCmd, Status::InvalidArgument(
                          "--auto plans for the launched ranks; --emulate-rank runs one rank of --config or --plan"));
  }
  if (emulate && args.count("comm")) {
    return Fail(kCmd, Status::InvalidArgument("--comm is for runs across ranks; --emulate-rank runs one rank alone"));
  }
  if (args.count("comm")) {
    const std::string c = args["comm"].as<std::string>();
    if (c != "mpi" && c != "nccl") return Fail(kCmd, Status::InvalidArgument(fmt::format("--comm '{}': valid: mpi, nccl", c)));
    if (c == "nccl" && backend != "cuda") {
      return Fail(kCmd, Status::InvalidArgument("--comm nccl moves GPU memory: it needs --backend cuda"));
    }
  }
  const int iters = args["iters"].as<int>(), warmup = args["warmup"].as<int>();
  if (iters < 1 || iters > 10000 || warmup < 0 || warmup > 1000) {
    return Fail(kCmd, Status::InvalidArgument("--iters must be 1 to 10000 and --warmup 0 to 1000"));
  }

  // The ranks mpirun launched (every process of them runs this): the MPI world they share.
  std::unique_ptr<exec::Comm> launched;
  if (!emulate && exec::DefaultCommBackend() == "mpi") {
    auto w = exec::CreateComm("mpi", &argc, &argv);
    if (!w.ok()) return Fail(kCmd, w.status());
    launched = std::move(*w);
  }
  const bool root = launched == nullptr || launched->rank() == 0;
  auto fail = [&](const Status& st) { return root ? Fail(kCmd, st) : st.ExitCode(); };
  // Every rank prepares its run from its own flags and store; under mpirun the ranks then
  // agree on it before the first transfer (a rank's refusal, or any difference, ends the job
  // on every rank at once, named).
  const Catalog* catalog = nullptr;
  std::optional<Workload> workload;
  const ModelSpec* model_ptr = nullptr;
  std::unique_ptr<Store> store;
  std::vector<Fit> fits;
  std::optional<ParallelConfig> config;
  int n = 1;
  const int rank = emulate ? args["emulate-rank"].as<int>() : 0;
  const int ranks = launched != nullptr ? launched->size() : 1;
  Status prepared = [&]() -> Status {
    DITUNE_ASSIGN_OR_RETURN(catalog, Catalog::Default());
    DITUNE_ASSIGN_OR_RETURN(workload, ReadWorkload(args, *catalog));
    model_ptr = *catalog->Model(workload->model_id);
    // Every rank reads the store; only rank 0 writes it.
    DITUNE_ASSIGN_OR_RETURN(store, OpenStore(args.count("db") ? args["db"].as<std::string>() : Store::DefaultPath()));
    DITUNE_ASSIGN_OR_RETURN(fits, store->ActiveFits());
    std::string auto_gpu;  // --auto: the catalog GPU the launched ranks are
    if (args.count("auto")) {
      std::string device_name = "host";
      if (backend == "cuda" && !args.count("gpu")) {
        DITUNE_ASSIGN_OR_RETURN(auto device, exec::CreateDevice(backend));
        device_name = device->props().name;
      }
      DITUNE_ASSIGN_OR_RETURN(auto_gpu, RunGpuId(args, *catalog, backend, device_name));
    }
    DITUNE_ASSIGN_OR_RETURN(config, ChooseConfig(args, *catalog, *workload, fits, backend, auto_gpu, ranks));
    n = config->world_size();
    if (rank < 0 || rank >= n) {
      return Status::InvalidArgument(
          fmt::format("--emulate-rank {}: '{}' has ranks 0 to {}", rank, Label(*config), n - 1));
    }
    if (!emulate && n != ranks) {
      return Status::InvalidArgument(
          launched != nullptr
              ? fmt::format("'{}' needs {} ranks; {} were launched", Label(*config), n, ranks)
              : fmt::format("'{}' needs {} ranks: launch `mpirun -np {} ditune run ...`, or measure one rank of it "
                            "with --emulate-rank R (0 to {})",
                            Label(*config), n, n, n - 1));
    }
    DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*model_ptr, *workload));
    DITUNE_RETURN_IF_ERROR(ValidateConfig({model_ptr, tokens, workload->steps, workload->batch, n}, *config));
    if (args.count("gpu") || args.count("gpus")) {
      // The CLUSTER flags the prediction prices: a mistake in them stops the run before it starts.
      std::string gpu = "cpu";
      if (args.count("gpu")) {
        DITUNE_ASSIGN_OR_RETURN(gpu, GpuIdOf(args["gpu"].as<std::string>()));
      }
      DITUNE_RETURN_IF_ERROR(RunCluster(args, *catalog, gpu, *config).status());
    }
    return Status::Ok();
  }();
  if (launched != nullptr && ranks > 1) {
    exec::RankIntent intent;
    intent.refused = prepared;
    if (prepared.ok()) {
      const Workload& w = *workload;
      intent.fields = {{"--model", w.model_id},
                       {"--height", std::to_string(w.height)},
                       {"--width", std::to_string(w.width)},
                       {"--frames", std::to_string(w.frames)},
                       {"--steps", std::to_string(w.steps)},
                       {"--batch", std::to_string(w.batch)},
                       {"--output-type", std::string(OutputTypeName(w.output))},
                       {"configuration", ToString(*config)},
                       {"--backend", backend},
                       {"--comm", args.count("comm") ? args["comm"].as<std::string>() : "(default)"},
                       {"--iters", std::to_string(iters)},
                       {"--warmup", std::to_string(warmup)},
                       {"--seed", std::to_string(args["seed"].as<uint64_t>())},
                       {"--profile", args.count("profile") || args.count("trace") ? "on" : "off"}};
    }
    Status agreed = exec::AgreeAcrossRanks(launched.get(), intent);
    if (!agreed.ok()) return fail(agreed);
  } else if (!prepared.ok()) {
    return fail(prepared);
  }
  const ModelSpec& model = *model_ptr;

  // Every rank of the plan, one process each: the world they exchange over.
  std::unique_ptr<exec::Comm> nccl;
  exec::Comm* world = n > 1 ? launched.get() : nullptr;
  if (world != nullptr) {
    const auto built = exec::CommBackends();
    const bool nccl_built = std::find(built.begin(), built.end(), "nccl") != built.end();
    const std::string comm = args.count("comm") ? args["comm"].as<std::string>()
                                                : (backend == "cuda" && nccl_built ? "nccl" : "mpi");
    if (comm == "nccl") {
      auto w = exec::CreateComm("nccl", nullptr, nullptr);
      if (!w.ok()) return fail(w.status());
      nccl = std::move(*w);
      world = nccl.get();
    }
  }

  exec::EngineRunOptions ro;
  ro.kernels = backend;
  ro.rank = rank;
  ro.iters = iters;
  ro.warmup = warmup;
  ro.engine.seed = args["seed"].as<uint64_t>();
  ro.world = world;
  ro.profile = args.count("profile") > 0 || args.count("trace") > 0;
  // Every rank writes its own timeline; a path that cannot take it fails before the run.
  std::string trace_path;
  if (args.count("trace")) {
    const int me = world != nullptr ? world->rank() : rank;
    trace_path = exec::RankTracePath(args["trace"].as<std::string>(), me, world != nullptr ? world->size() : 1);
    Status st = exec::WriteKernelTrace({}, me, trace_path);
    if (world != nullptr && world->host() != nullptr) {
      // Every rank stops if one cannot write, rather than the others waiting for it.
      float refused = st.ok() ? 0.0f : 1.0f;
      Status agreed = world->host()->AllReduceSum(&refused, 1);
      if (!agreed.ok()) return fail(agreed);
      if (st.ok() && refused > 0) {
        st = Status::InvalidArgument(fmt::format(
            "--trace: {:.0f} rank(s) cannot write their trace beside {} (that rank's message names it)", refused,
            args["trace"].as<std::string>()));
      }
    }
    if (!st.ok()) return fail(st);
  }
  auto r = exec::MeasureEngineRun(model, *workload, *config, ro);
  if (!r.ok()) {
    // Every rank validates the same input before any transfer; a failure after that (a peer
    // that stalled past DITUNE_COMM_TIMEOUT_S, a failed transfer) must not leave the others
    // waiting in a collective.
    if (world != nullptr && r.status().code() != Status::Code::kInvalidArgument &&
        r.status().code() != Status::Code::kNotSupported) {
      world->Abort(r.status().ToString());
    }
    return fail(r.status());
  }
  if (!trace_path.empty()) {
    Status st = exec::WriteKernelTrace(r->profile_events, world != nullptr ? world->rank() : rank, trace_path);
    if (!st.ok()) return fail(st);
  }
  if (!root) return 0;
  const RunReport report{&model,   *workload, *config, backend, rank, emulate, n, world, trace_path,
                         RunGpuId(args, *catalog, backend, r->device_name)};
  return ReportRun(args, *catalog, fits, store.get(), report, *r);
}

}  // namespace ditune::cli
