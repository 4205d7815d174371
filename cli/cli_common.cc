#include "cli/cli_common.h"

#include "planner/plan.h"

#include "calibration/factory.h"

#include "core/config_rules.h"
#include "core/output_file.h"
#include "core/names.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ditune::cli {

void AddWorkloadOptions(cxxopts::Options& options) {
  options.add_options("workload")
      ("model", "model id (see `ditune models`)", cxxopts::value<std::string>())
      ("height", "image height in pixels (default: the model's)", cxxopts::value<int>())
      ("width", "image width in pixels (default: the model's)", cxxopts::value<int>())
      ("frames", "video frames (default: the model's; 1 for images)", cxxopts::value<int>())
      ("steps", "denoising steps (default: the model's)", cxxopts::value<int>())
      ("batch", "prompts per generation", cxxopts::value<int>()->default_value("1"))
      ("output-type", "latent (DiT only) or decoded (with VAE)",
       cxxopts::value<std::string>()->default_value("decoded"));
}

void AddClusterOptions(cxxopts::Options& options) {
  options.add_options("cluster")
      ("gpu", "GPU id (see `ditune hardware`)", cxxopts::value<std::string>())
      ("gpus", "number of GPUs", cxxopts::value<int>())
      ("gpus-per-node", "GPUs per node (default: as many as a node holds)", cxxopts::value<int>())
      ("nodes", "number of nodes (default: derived)", cxxopts::value<int>())
      ("intra", "intra-node link id (default: the GPU's usual one)", cxxopts::value<std::string>())
      ("inter", "inter-node link id (required for several nodes)", cxxopts::value<std::string>())
      ("topology", "your node's layout: `nvidia-smi topo -m` saved to a file, or the file `ditune doctor "
       "--write-topology` wrote; its sockets, PCIe switches and NVLinks replace the catalog's typical box",
       cxxopts::value<std::string>());
}

StatusOr<Workload> ReadWorkload(const cxxopts::ParseResult& args, const Catalog& catalog) {
  if (args.count("model") == 0) {
    std::vector<std::string> ids;
    for (const auto& m : catalog.models()) ids.push_back(m.id);
    return Status::InvalidArgument("--model is required; valid: " + fmt::format("{}", fmt::join(ids, ", ")));
  }
  Workload w;
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* m, FindModel(catalog, args["model"].as<std::string>()));
  w.model_id = m->id;
  w.height = args.count("height") ? args["height"].as<int>() : m->default_height;
  w.width = args.count("width") ? args["width"].as<int>() : m->default_width;
  w.frames = args.count("frames") ? args["frames"].as<int>()
                                  : (m->modality == Modality::kVideo ? m->default_frames : 1);
  w.steps = args.count("steps") ? args["steps"].as<int>() : m->default_steps;
  w.batch = args["batch"].as<int>();
  const std::string out = args["output-type"].as<std::string>();
  if (out == "latent") {
    w.output = OutputType::kLatent;
  } else if (out == "decoded") {
    w.output = OutputType::kDecoded;
  } else {
    return Status::InvalidArgument(
        fmt::format("--output-type '{}' is not one of: latent, decoded", out));
  }
  DITUNE_RETURN_IF_ERROR(ComputeTokenGeometry(*m, w).status());
  return w;
}

StatusOr<std::string> GpuIdOf(const std::string& typed) {
  if (typed.empty()) return Status::InvalidArgument("--gpu is empty: give an id (see `ditune hardware`)");
  DITUNE_ASSIGN_OR_RETURN(const Catalog* catalog, Catalog::Default());
  std::string note;
  DITUNE_ASSIGN_OR_RETURN(const GpuSpec* gpu, FindGpu(*catalog, typed, &note));
  if (!note.empty()) std::cerr << "ditune: " << note << "\n";
  return gpu->id;
}

StatusOr<ClusterSpec> ReadClusterSpec(const cxxopts::ParseResult& args) {
  ClusterSpec c;
  if (args.count("gpu") == 0) return Status::InvalidArgument("--gpu is required (see `ditune hardware`)");
  if (args.count("gpus") == 0) return Status::InvalidArgument("--gpus is required");
  DITUNE_ASSIGN_OR_RETURN(c.gpu_id, GpuIdOf(args["gpu"].as<std::string>()));
  c.gpus = args["gpus"].as<int>();
  if (c.gpus < 1 || c.gpus > kMaxClusterGpus) {
    return Status::InvalidArgument(fmt::format("--gpus {}: give 1 to {}", c.gpus, kMaxClusterGpus));
  }
  if (args.count("gpus-per-node")) {
    c.gpus_per_node = args["gpus-per-node"].as<int>();
    if (c.gpus_per_node < 1) return Status::InvalidArgument(fmt::format("--gpus-per-node {}: give >= 1", c.gpus_per_node));
  }
  if (args.count("nodes")) {
    c.nodes = args["nodes"].as<int>();
    if (c.nodes < 1) return Status::InvalidArgument(fmt::format("--nodes {}: give >= 1", c.nodes));
  }
  for (const char* flag : {"gpu", "intra", "inter"}) {
    if (args.count(flag) && args[flag].as<std::string>().empty()) {
      return Status::InvalidArgument(fmt::format("--{} is empty: give an id (see `ditune hardware`)", flag));
    }
  }
  if (args.count("intra")) c.intra_id = args["intra"].as<std::string>();
  if (args.count("inter")) c.inter_id = args["inter"].as<std::string>();
  if (args.count("topology")) {
    DITUNE_ASSIGN_OR_RETURN(MachineTopology t, ReadTopologyFile(args["topology"].as<std::string>()));
    c.topology = std::make_shared<const MachineTopology>(std::move(t));
  }
  return c;
}

void AddRuntimeOptions(cxxopts::Options& options, bool any_allowed) {
  options.add_options()(
      "runtime",
      any_allowed ? "who runs it, which sets its rules, its price and its launch line: xdit (default), wan-generate, "
                    "hunyuan-sample, sglang, vllm-omni, diffusers, trtllm-visualgen, open-sora, ditune (our engine), or any "
                    "(rank every runtime that runs the model; `ditune runtimes` lists them)"
                  : "who runs it, which sets its rules, its price and its launch line: xdit (default), wan-generate, "
                    "hunyuan-sample, sglang, vllm-omni, diffusers, trtllm-visualgen, open-sora, ditune (our engine); "
                    "`ditune runtimes` lists them",
      cxxopts::value<std::string>())("executor", "the older name of --runtime", cxxopts::value<std::string>());
}

StatusOr<std::string> ReadRuntime(const cxxopts::ParseResult& args, const Catalog& catalog, bool any_allowed) {
  std::string typed = "xdit";
  const char* flag = "--runtime";
  if (args.count("runtime") && args.count("executor") &&
      args["runtime"].as<std::string>() != args["executor"].as<std::string>()) {
    return Status::InvalidArgument(fmt::format("--runtime {} and --executor {} disagree: --executor is the older "
                                               "name of --runtime, give one",
                                               args["runtime"].as<std::string>(), args["executor"].as<std::string>()));
  }
  if (args.count("runtime")) {
    typed = args["runtime"].as<std::string>();
  } else if (args.count("executor")) {
    typed = args["executor"].as<std::string>();
    flag = "--executor";
  }
  DITUNE_ASSIGN_OR_RETURN(std::string id, ParseRuntimeChoice(catalog, typed, flag));
  if (id == kRuntimeAny && !any_allowed) {
    return Status::InvalidArgument(fmt::format(
        "{} any: this command prices one runtime's configuration; name the runtime (`ditune plan --runtime any` "
        "ranks them)",
        flag));
  }
  return id;
}

StatusOr<ConfigInputs> ReadConfigInputs(const cxxopts::ParseResult& args, std::string_view runtime, bool validate) {
  ConfigInputs in;
  DITUNE_ASSIGN_OR_RETURN(in.catalog, Catalog::Default());
  DITUNE_ASSIGN_OR_RETURN(in.workload, ReadWorkload(args, *in.catalog));
  DITUNE_ASSIGN_OR_RETURN(ClusterSpec spec, ReadClusterSpec(args));
  DITUNE_ASSIGN_OR_RETURN(in.cluster, ResolveCluster(spec, *in.catalog));
  if (args.count("config") == 0) return Status::InvalidArgument("--config is required (\"\" for one device)");
  DITUNE_ASSIGN_OR_RETURN(in.config, ParseParallelConfig(args["config"].as<std::string>()));
  DITUNE_ASSIGN_OR_RETURN(in.model, in.catalog->Model(in.workload.model_id));
  DITUNE_ASSIGN_OR_RETURN(in.tokens, ComputeTokenGeometry(*in.model, in.workload));
  if (!validate) return in;
  ValidationContext ctx{in.model, in.tokens, in.workload.steps, in.workload.batch, in.cluster.gpus()};
  if (!in.cluster.gpu->is_cpu) ctx.runtime = runtime;
  DITUNE_RETURN_IF_ERROR(ValidateConfig(ctx, in.config));
  return in;
}

StatusOr<cxxopts::ParseResult> Parse(cxxopts::Options& options, int argc, char** argv, bool* help) {
  options.add_options()("h,help", "print this help");
  *help = false;
  try {
    cxxopts::ParseResult result = options.parse(argc, argv);
    if (!result.unmatched().empty()) {
      return Status::InvalidArgument(fmt::format("unexpected argument '{}' (see --help)",
                                                 result.unmatched().front()));
    }
    // A flag given twice would silently take its last value.
    std::map<std::string, int> times;
    for (const auto& kv : result.arguments()) {
      // "files" collects positional arguments, "from" and "suite" repeated files, one entry per file.
      if (kv.key() != "files" && kv.key() != "from" && kv.key() != "suite" && ++times[kv.key()] == 2) {
        return Status::InvalidArgument(fmt::format("--{} is given more than once; give it once", kv.key()));
      }
    }
    // cxxopts reads integers in hexadecimal too ("--gpus 0x8" is 8): ditune's numbers are decimal.
    for (int i = 2; i < argc; ++i) {
      const std::string arg = argv[i];
      const size_t at = arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos ? arg.find('=') + 1 : 0;
      const bool flag_value = at > 0 || argv[i - 1][0] == '-';
      std::string v = arg.substr(at);
      if (!v.empty() && v[0] == '-') v.erase(0, 1);
      const bool hex_number = v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X') &&
                              v.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
      if (flag_value && hex_number) {
        return Status::InvalidArgument(
            fmt::format("'{}' after {}: give numbers in decimal", arg, at > 0 ? arg.substr(0, at - 1) : argv[i - 1]));
      }
    }
    if (result.count("help")) {
      std::cout << options.help() << "\n";
      *help = true;
    }
    return result;
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    // cxxopts names the value, not the flag: find the flag that took it.
    const std::string what = e.what();
    const size_t open = what.find(cxxopts::LQUOTE), close = what.rfind(cxxopts::RQUOTE);
    const std::string value = open != std::string::npos && close != std::string::npos && close > open
                                  ? what.substr(open + cxxopts::LQUOTE.size(), close - open - cxxopts::LQUOTE.size())
                                  : std::string();
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      std::string flag;
      if (arg == value && i > 1 && argv[i - 1][0] == '-') flag = argv[i - 1];
      if (value.empty() && arg.size() > 3 && arg.rfind("--", 0) == 0 && arg.back() == '=') {
        flag = arg.substr(0, arg.size() - 1);  // --gpus= with nothing after it
      }
      if (arg.size() > value.size() + 1 && arg.rfind("--", 0) == 0 && arg.compare(arg.size() - value.size() - 1,
                                                                                 std::string::npos, "=" + value) == 0) {
        flag = arg.substr(0, arg.size() - value.size() - 1);
      }
      if (!flag.empty()) {
        return Status::InvalidArgument(
            fmt::format("{} '{}': not a valid value (this flag takes a decimal number; see --help)", flag, value));
      }
    }
    return Status::InvalidArgument(what + " (see --help)");
  } catch (const cxxopts::exceptions::exception& e) {
    return Status::InvalidArgument(std::string(e.what()) + " (see --help)");
  }
}

int Fail(const std::string& command, const Status& status) {
  std::cerr << "ditune " << command << ": " << status.message() << "\n";
  return status.ExitCode();
}

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  // Columns as a terminal shows them: one per UTF-8 character (± is two bytes).
  auto shown = [](const std::string& cell) {
    size_t n = 0;
    for (unsigned char c : cell) n += (c & 0xC0) != 0x80;
    return n;
  };
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], shown(row[i]));
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      s += row[i];
      if (i + 1 < row.size()) s += std::string(width[i] - shown(row[i]) + 2, ' ');
    }
    return s + "\n";
  };
  std::string out = line(header);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out += std::string(total > 2 ? total - 2 : 0, '-') + "\n";
  for (const auto& r : rows) out += line(r);
  return out;
}

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path) {
  DITUNE_ASSIGN_OR_RETURN(const Catalog* catalog, Catalog::Default());
  return OpenCalibrationStore(*catalog, path);
}

StatusOr<std::unique_ptr<Store>> OpenPricingStore(const cxxopts::ParseResult& args) {
  DITUNE_ASSIGN_OR_RETURN(const Catalog* catalog, Catalog::Default());
  std::string note;
  DITUNE_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                          OpenStoreForPricing(*catalog, args.count("db") ? args["db"].as<std::string>() : "", &note));
  if (!note.empty()) std::cerr << "note: " << note << "\n";
  return store;
}

Status WriteOutputFile(const std::string& flag, const std::string& path, const std::string& text) {
  return WriteFileWhole(path, text, "--" + flag);
}

}  // namespace ditune::cli
