// `ditune launch --auto WORKLOAD [CLUSTER] [--dry-run] [--runtime R|any] [-- COMMAND [ARGS...]]`:
// detect the GPUs, plan, and run the runtime's entry point for the model as planned, or
// COMMAND with the plan's parallel flags (in that entry point's names) appended.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "planner/auto_configure.h"
#include "planner/gpu_launch.h"

namespace ditune::cli {

void AddPlanOptions(cxxopts::Options& options);
StatusOr<AutoConfigureOptions> ReadPlanOptions(const cxxopts::ParseResult& args, const Catalog& catalog,
                                               bool any_allowed);

int RunLaunch(int argc, char** argv) {
  // Everything after "--" is the command to launch.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }
  }
  std::vector<std::string> command(argv + std::min(argc, split + 1), argv + argc);
  cxxopts::Options options("ditune launch", "Detect the GPUs, choose the configuration, start the job with it");
  AddWorkloadOptions(options);
  AddClusterOptions(options);
  AddPlanOptions(options);
  AddRuntimeOptions(options, /*any_allowed=*/true);
  options.add_options()
      ("auto", "choose the configuration automatically (required)")
      ("dry-run", "print the command instead of running it");
  bool help = false;
  auto args = Parse(options, split, argv, &help);
  if (!args.ok()) return Fail("launch", args.status());
  if (help) {
    std::cout << "usage: ditune launch --auto WORKLOAD [--gpu ID --gpus N ...] [--dry-run] -- COMMAND [ARGS...]\n";
    return 0;
  }
  if (!args->count("auto")) return Fail("launch", Status::InvalidArgument("--auto is required (the only mode so far)"));
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("launch", catalog.status());
  // --runtime (a plan option): a PyTorch runtime's parallel flags are appended to COMMAND, or
  // its entry point runs; ditune runs ditune's engine under mpirun.
  auto runtime = ReadRuntime(*args, **catalog, /*any_allowed=*/true);
  if (!runtime.ok()) return Fail("launch", runtime.status());
  if (*runtime == "ditune" && !command.empty()) {
    return Fail("launch", Status::InvalidArgument(fmt::format(
                              "--runtime ditune launches ditune's own engine under mpirun; it runs no COMMAND (got "
                              "'{}' after --): leave out the command, or launch it with --runtime xdit",
                              command.front())));
  }
  auto workload = ReadWorkload(*args, **catalog);
  if (!workload.ok()) return Fail("launch", workload.status());

  // The cluster: what the flags say, else what the machine has.
  ClusterSpec spec;
  if (args->count("gpu")) {
    auto id = GpuIdOf((*args)["gpu"].as<std::string>());
    if (!id.ok()) return Fail("launch", id.status());
    spec.gpu_id = *id;
  }
  if (args->count("gpus")) {
    spec.gpus = (*args)["gpus"].as<int>();
    if (spec.gpus < 1 || spec.gpus > kMaxClusterGpus) {
      return Fail("launch", Status::InvalidArgument(fmt::format(
                                "--gpus {}: give 1 to {}, or leave it out to use the GPUs this machine has", spec.gpus,
                                kMaxClusterGpus)));
    }
  }
  if (args->count("gpus-per-node")) spec.gpus_per_node = (*args)["gpus-per-node"].as<int>();
  if (args->count("nodes")) spec.nodes = (*args)["nodes"].as<int>();
  if (args->count("intra")) spec.intra_id = (*args)["intra"].as<std::string>();
  if (args->count("inter")) spec.inter_id = (*args)["inter"].as<std::string>();
  if (args->count("topology")) {
    auto t = ReadTopologyFile((*args)["topology"].as<std::string>());
    if (!t.ok()) return Fail("launch", t.status());
    spec.topology = std::make_shared<const MachineTopology>(std::move(*t));
  }
  if (spec.gpu_id.empty() || spec.gpus == 0) {
    auto detected = DetectGpus(**catalog, SystemCommandRunner());
    if (!detected.ok()) return Fail("launch", detected.status());
    if (detected->gpu_id.empty() && spec.gpu_id.empty()) {
      return Fail("launch", MapGpuName(detected->name, **catalog).status());
    }
    std::cerr << fmt::format("detected {} x {} ({:.0f} GB, {})\n", detected->count, detected->name,
                             detected->memory_gb, detected->nvlink ? "NVLink" : "PCIe");
    if (spec.gpu_id.empty()) spec.gpu_id = detected->gpu_id;
    if (spec.gpus == 0) spec.gpus = detected->count;
    if (spec.intra_id.empty()) spec.intra_id = detected->intra_id;
    // This machine's own layout (sockets, PCIe switches), as --topology would give it.
    if (spec.topology == nullptr && detected->topology != nullptr && spec.gpus <= detected->topology->gpus) {
      spec.topology = detected->topology;
    }
  }
  auto opt = ReadPlanOptions(*args, **catalog, /*any_allowed=*/true);
  if (!opt.ok()) return Fail("launch", opt.status());
  opt->plan.top_k = 1;
  auto plan = AutoConfigure(*workload, spec, *opt);
  if (!plan.ok()) return Fail("launch", plan.status());
  const Candidate& best = plan->ranked.front();
  std::cerr << fmt::format("ditune: {} on {} x {}: {} (predicted {:.3f} s)\n", workload->model_id,
                           plan->cluster.gpus(), plan->cluster.spec.gpu_id, Label(best.config),
                           best.result.total.value());
  for (const auto& note : best.launch ? best.launch->notes : std::vector<std::string>{}) {
    std::cerr << "ditune: note: " << note << "\n";
  }
  std::vector<std::string> words;
  if (!best.launch) {
    // ditune's engine, and the CPU device, which the PyTorch runtimes do not run on.
    words = DituneRunCommand("ditune", *workload, best.config, plan->cluster);
  } else if (command.empty()) {
    // The runtime's entry point for the model, as `plan` prints it (a shell line: it may read
    // environment variables such as $MOCHI_WEIGHTS).
    if (args->count("dry-run")) {
      std::cout << best.launch->command << "\n";
      if (!best.launch->config_name.empty()) {
        std::cout << "# " << best.launch->config_name << ":\n" << best.launch->config_text;
      }
      return 0;
    }
    if (!best.launch->config_name.empty()) {
      // The file the command reads, written beside it; never over a different one.
      const std::string& name = best.launch->config_name;
      std::ifstream existing(name);
      if (existing) {
        std::string have((std::istreambuf_iterator<char>(existing)), std::istreambuf_iterator<char>());
        if (have != best.launch->config_text) {
          return Fail("launch", Status::InvalidArgument(fmt::format(
                                    "{} exists here with other contents: the launch would overwrite it; move it away "
                                    "or run from another directory (--dry-run prints what it would write)",
                                    name)));
        }
      } else if (Status st = WriteOutputFile("config", name, best.launch->config_text); !st.ok()) {
        return Fail("launch", st);
      }
      std::cerr << "ditune: wrote " << name << "\n";
    }
    words = {"/bin/sh", "-c", best.launch->command};
  } else {
    auto x = WithParallelFlags(command, *best.launch);
    if (!x.ok()) return Fail("launch", x.status());
    words = *x;
  }
  if (args->count("dry-run")) {
    std::cout << ShellJoin(words) << "\n";
    return 0;
  }
  std::vector<char*> exec_args;
  for (auto& w : words) exec_args.push_back(w.data());
  exec_args.push_back(nullptr);
  std::cout.flush();
  execvp(exec_args[0], exec_args.data());
  return Fail("launch", Status::NotFound(fmt::format("cannot run '{}': {}", words[0], std::strerror(errno))));
}

}  // namespace ditune::cli
