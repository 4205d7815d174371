#include "cli/cli_common.h"

#include "core/validate.h"

#include <algorithm>
#include <iostream>

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
      ("inter", "inter-node link id (required for several nodes)", cxxopts::value<std::string>());
}

StatusOr<Workload> ReadWorkload(const cxxopts::ParseResult& args, const Catalog& catalog) {
  if (args.count("model") == 0) {
    std::vector<std::string> ids;
    for (const auto& m : catalog.models()) ids.push_back(m.id);
    return Status::InvalidArgument("--model is required; valid: " + fmt::format("{}", fmt::join(ids, ", ")));
  }
  Workload w;
  w.model_id = args["model"].as<std::string>();
  DITUNE_ASSIGN_OR_RETURN(const ModelSpec* m, catalog.Model(w.model_id));
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

StatusOr<ClusterSpec> ReadClusterSpec(const cxxopts::ParseResult& args) {
  ClusterSpec c;
  if (args.count("gpu") == 0) return Status::InvalidArgument("--gpu is required (see `ditune hardware`)");
  if (args.count("gpus") == 0) return Status::InvalidArgument("--gpus is required");
  c.gpu_id = args["gpu"].as<std::string>();
  c.gpus = args["gpus"].as<int>();
  if (args.count("gpus-per-node")) c.gpus_per_node = args["gpus-per-node"].as<int>();
  if (args.count("nodes")) c.nodes = args["nodes"].as<int>();
  if (args.count("intra")) c.intra_id = args["intra"].as<std::string>();
  if (args.count("inter")) c.inter_id = args["inter"].as<std::string>();
  return c;
}

StatusOr<ConfigInputs> ReadConfigInputs(const cxxopts::ParseResult& args) {
  ConfigInputs in;
  DITUNE_ASSIGN_OR_RETURN(in.catalog, Catalog::Default());
  DITUNE_ASSIGN_OR_RETURN(in.workload, ReadWorkload(args, *in.catalog));
  DITUNE_ASSIGN_OR_RETURN(ClusterSpec spec, ReadClusterSpec(args));
  DITUNE_ASSIGN_OR_RETURN(in.cluster, ResolveCluster(spec, *in.catalog));
  if (args.count("config") == 0) return Status::InvalidArgument("--config is required (\"\" for one device)");
  DITUNE_ASSIGN_OR_RETURN(in.config, ParseParallelConfig(args["config"].as<std::string>()));
  DITUNE_ASSIGN_OR_RETURN(in.model, in.catalog->Model(in.workload.model_id));
  DITUNE_ASSIGN_OR_RETURN(in.tokens, ComputeTokenGeometry(*in.model, in.workload));
  DITUNE_RETURN_IF_ERROR(
      ValidateConfig({in.model, in.tokens, in.workload.steps, in.workload.batch, in.cluster.gpus()}, in.config));
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
    if (result.count("help")) {
      std::cout << options.help() << "\n";
      *help = true;
    }
    return result;
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
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      s += row[i];
      if (i + 1 < row.size()) s += std::string(width[i] - row[i].size() + 2, ' ');
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

}  // namespace ditune::cli
