// `ditune doctor [FILE...]`: the user's machine, what it should give and where it falls
// short. FILEs are recognised by their content: `nvidia-smi topo -m` (with `topo -p2p p`
// after it, optionally), `nvidia-smi -q` or `--query-gpu ... --format=csv`, nccl-tests
// outputs, a topology file `--write-topology` wrote, and `env` output (NCCL_* lines). With
// no nvidia-smi file it runs nvidia-smi itself where there is one. Exit 0 healthy, 4 when it
// found something that slows DiT plans, 2 for input it cannot read.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/text.h"
#include "core/topology.h"
#include "ingest/ingest.h"
#include "ingest/nvidia_smi.h"
#include "planner/doctor.h"
#include "planner/gpu_launch.h"

extern char** environ;

namespace ditune::cli {
namespace {

constexpr int kExitWarnings = 4;

StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(fmt::format("cannot read '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool LooksLikeTopology(std::string_view text) {
  const std::string_view t = Trim(text);
  if (t.starts_with("{")) return t.find("ditune-topology") != std::string_view::npos;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string first;
    w >> first;
    // The header may carry terminal colour codes before GPU0.
    if (first == "GPU0" || first.find("GPU0") != std::string::npos) return line.find("GPU1") != std::string::npos ||
                                                                           line.find("CPU") != std::string::npos;
  }
  return false;
}

// Sorts one file into the inputs by what it holds.
Status AddFile(const std::string& path, DoctorInputs* in) {
  DITUNE_ASSIGN_OR_RETURN(std::string text, ReadWhole(path));
  if (LooksLikeNvidiaSmi(text)) {
    DITUNE_ASSIGN_OR_RETURN(std::vector<GpuState> gpus, ParseNvidiaSmi(text, path));
    in->gpus.insert(in->gpus.end(), gpus.begin(), gpus.end());
    return Status::Ok();
  }
  if (LooksLikeTopology(text)) {
    if (in->topology) return Status::InvalidArgument(fmt::format("{}: a second topology; give one per machine", path));
    DITUNE_ASSIGN_OR_RETURN(MachineTopology t, ParseTopologyFile(text, path));
    in->topology = std::move(t);
    return Status::Ok();
  }
  auto format = DetectIngestFormat(text, path);
  if (format.ok() && *format == IngestFormat::kNcclTests) {
    in->nccl_tests.push_back({path, std::move(text)});
    return Status::Ok();
  }
  if (LooksLikeEnvironment(text)) {
    for (const auto& [k, v] : ParseNcclEnvironment(text)) in->env[k] = v;
    in->env_origin = path;
    return Status::Ok();
  }
  return Status::InvalidArgument(fmt::format(
      "{}: not a file the doctor reads; valid: `nvidia-smi topo -m` (optionally followed by `nvidia-smi topo -p2p p`), "
      "`nvidia-smi -q`, `nvidia-smi --query-gpu=... --format=csv`, nccl-tests output (all_reduce_perf, alltoall_perf, "
      "sendrecv_perf, all_gather_perf, ...), a topology file from --write-topology, or `env | grep NCCL_` output",
      path));
}

}  // namespace

int RunDoctor(int argc, char** argv) {
  cxxopts::Options options(
      "ditune doctor",
      "Read this machine (nvidia-smi, nccl-tests outputs, the NCCL_* environment), compare what it measures with "
      "what it should give, and name the cause of every shortfall with what it costs a DiT plan.\n"
      "  ditune doctor                              # on a GPU machine: runs nvidia-smi itself\n"
      "  ditune doctor topo.txt smi-q.txt all_reduce_perf.txt alltoall_perf.txt env.txt\n"
      "Exit status: 0 healthy, 4 something slows DiT plans, 2 input it cannot read.");
  options.add_options()
      ("files", "inputs, recognised by content", cxxopts::value<std::vector<std::string>>())
      ("gpu", "GPU id, where nvidia-smi's name is not in the catalog or no nvidia-smi output is given",
       cxxopts::value<std::string>())
      ("link", "the link the nccl-tests crossed (an inter-node id for tests across nodes); default: this box's",
       cxxopts::value<std::string>())
      ("collective", "what an nccl-tests output measured where neither its text nor its file name says "
       "(all_to_all, all_gather, all_reduce, sendrecv, reduce_scatter)", cxxopts::value<std::string>())
      ("model", "whose DiT plan the cost of a shortfall is told for", cxxopts::value<std::string>()->default_value("flux.1-dev"))
      ("no-detect", "do not run nvidia-smi, and do not read this shell's NCCL_* environment")
      ("write-topology", "write the topology found as a file --topology reads", cxxopts::value<std::string>())
      ("db", "calibration database whose constants price the box", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  options.parse_positional({"files"});
  options.positional_help("[FILE...]");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("doctor", args.status());
  if (help) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("doctor", catalog.status());

  DoctorInputs in;
  if (args->count("files")) {
    for (const auto& f : (*args)["files"].as<std::vector<std::string>>()) {
      if (Status s = AddFile(f, &in); !s.ok()) return Fail("doctor", s);
    }
  }
  if (args->count("gpu")) {
    auto id = GpuIdOf((*args)["gpu"].as<std::string>());
    if (!id.ok()) return Fail("doctor", id.status());
    in.gpu_id = *id;
  }
  if (args->count("link")) in.link_id = (*args)["link"].as<std::string>();
  if (args->count("collective")) in.collective = (*args)["collective"].as<std::string>();
  in.model_id = (*args)["model"].as<std::string>();
  const bool detect = args->count("no-detect") == 0;
  if (detect && in.env_origin.empty()) {
    // This shell's NCCL_* settings, as the job launched from it would see them.
    std::string lines;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) lines += std::string(*e) + "\n";
    in.env = ParseNcclEnvironment(lines);
    in.env_origin = "this shell's environment";
  }
  std::vector<std::string> detect_notes;
  if (detect && !in.topology && in.gpus.empty()) {
    const CommandRunner run = SystemCommandRunner();
    auto q = run("nvidia-smi -q");
    if (q.ok()) {
      auto gpus = ParseNvidiaSmi(*q, "nvidia-smi -q");
      if (gpus.ok()) in.gpus = *gpus;
      auto topo = run("nvidia-smi topo -m");
      auto p2p = run("nvidia-smi topo -p2p p");
      if (topo.ok()) {
        auto t = ParseTopoMatrix(*topo + "\n" + (p2p.ok() ? *p2p : std::string()), "nvidia-smi topo -m");
        if (t.ok()) in.topology = *t;
      }
    } else if (args->count("files") == 0) {
      detect_notes.push_back(
          "nvidia-smi is not here: give its outputs as files (nvidia-smi topo -m > topo.txt; nvidia-smi -q > "
          "smi.txt) with any nccl-tests outputs");
    }
  }
  if (args->count("write-topology")) {
    if (!in.topology) {
      return Fail("doctor", Status::InvalidArgument(
                                "--write-topology: no topology found (give `nvidia-smi topo -m` output, or run on the "
                                "machine)"));
    }
    if (Status s = WriteOutputFile("write-topology", (*args)["write-topology"].as<std::string>(),
                                   TopologyToJson(*in.topology).dump(2) + "\n");
        !s.ok()) {
      return Fail("doctor", s);
    }
  }
  auto store = OpenPricingStore(*args);
  if (!store.ok()) return Fail("doctor", store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail("doctor", fits.status());
  auto report = ditune::RunDoctor(**catalog, *fits, in);
  if (!report.ok()) return Fail("doctor", report.status());
  if (args->count("json")) {
    nlohmann::json j = DoctorJson(*report);
    j["notes"] = detect_notes;
    std::cout << j.dump(2) << "\n";
  } else {
    for (const auto& n : detect_notes) std::cout << "note: " << n << "\n";
    std::cout << DoctorText(*report);
  }
  return report->warnings() > 0 ? kExitWarnings : 0;
}

}  // namespace ditune::cli
