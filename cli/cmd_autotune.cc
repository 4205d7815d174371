// `mpirun -np N ditune autotune WORKLOAD [--candidates K] [--backend cpu|cuda|ref]`: the
// options and their checks; the loop (price every configuration for the launched ranks as
// ditune's engine runs it, run the best K, record, refit, price again) is in
// cmd_autotune_engine.cc.
#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "executor/comm.h"

namespace ditune::cli {

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
      ("backend", "the engine's kernels on each rank: cpu (this host's cores, fp32), cuda (the rank's GPU) or ref "
                  "(the reference kernels on the host: bf16, slow)",
       cxxopts::value<std::string>()->default_value("cpu"))
      ("comm", "transport between the ranks: nccl (GPU memory, one GPU per rank) or mpi (host memory; GPU ranks "
               "staged through it and may share a GPU); default nccl for cuda where built, else mpi",
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
    if (c == "nccl" && backend != "cuda") {
      return fail(Status::InvalidArgument("--comm nccl moves GPU memory: it needs --backend cuda"));
    }
  }
  return AutotuneOnEngine(*args, comm, backend);
}

}  // namespace ditune::cli
