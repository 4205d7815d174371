// `ditune whatif WORKLOAD --gpu ID[,ID..] --gpus N[,N..] [--intra ..] [--inter ..]
//  [--sizes HxW,..] [--frames-list F,..] [--slo SECONDS] [--csv FILE] [--plot FILE.svg] [--json]`.
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "costmodels/store.h"
#include "planner/whatif.h"

namespace ditune::cli {
namespace {

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

StatusOr<std::vector<int>> IntList(const std::string& flag, const std::string& s) {
  std::vector<int> out;
  for (const auto& item : SplitList(s)) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1) {
      return Status::InvalidArgument(fmt::format("--{} '{}': '{}' is not an integer >= 1", flag, s, item));
    }
    out.push_back(v);
  }
  if (out.empty()) return Status::InvalidArgument(fmt::format("--{} needs at least one value", flag));
  return out;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) return Status::IOError(fmt::format("cannot write '{}'", path));
  out << text;
  if (!out) return Status::IOError(fmt::format("writing '{}' failed", path));
  return Status::Ok();
}

}  // namespace

int RunWhatIf(int argc, char** argv) {
  cxxopts::Options options("ditune whatif", "Sweep GPU types, counts, links and sizes; find what meets a latency");
  AddWorkloadOptions(options);
  options.add_options("what-if")
      ("gpu", "GPU ids, comma-separated", cxxopts::value<std::string>())
      ("gpus", "GPU counts, comma-separated (e.g. 1,2,4,8,16)", cxxopts::value<std::string>())
      ("intra", "intra-node links to compare (default: each GPU's usual one)", cxxopts::value<std::string>())
      ("inter", "inter-node links to compare (default: ib-ndr where a count spans nodes)",
       cxxopts::value<std::string>())
      ("sizes", "resolutions HxW to compare, comma-separated", cxxopts::value<std::string>())
      ("frames-list", "frame counts to compare, comma-separated", cxxopts::value<std::string>())
      ("objective", "latency | throughput | gpu-seconds", cxxopts::value<std::string>()->default_value("latency"))
      ("slo", "latency objective in seconds: the smallest cluster that meets it", cxxopts::value<double>())
      ("csv", "write every point as CSV", cxxopts::value<std::string>())
      ("plot", "draw latency and speedup against GPU count (SVG)", cxxopts::value<std::string>())
      ("db", "calibration database", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("whatif", args.status());
  if (help) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("whatif", catalog.status());
  auto workload = ReadWorkload(*args, **catalog);
  if (!workload.ok()) return Fail("whatif", workload.status());
  if (!args->count("gpu") || !args->count("gpus")) {
    return Fail("whatif", Status::InvalidArgument("--gpu and --gpus are required (lists allowed: --gpus 1,2,4,8)"));
  }
  WhatIfQuery q;
  q.workload = *workload;
  q.gpus = SplitList((*args)["gpu"].as<std::string>());
  auto counts = IntList("gpus", (*args)["gpus"].as<std::string>());
  if (!counts.ok()) return Fail("whatif", counts.status());
  q.counts = *counts;
  if (args->count("intra")) q.intras = SplitList((*args)["intra"].as<std::string>());
  if (args->count("inter")) q.inters = SplitList((*args)["inter"].as<std::string>());
  if (args->count("sizes")) {
    for (const auto& s : SplitList((*args)["sizes"].as<std::string>())) {
      int h = 0, w = 0;
      char x = 0, extra = 0;
      if (std::sscanf(s.c_str(), "%d%c%d%c", &h, &x, &w, &extra) != 3 || x != 'x' || h < 1 || w < 1) {
        return Fail("whatif", Status::InvalidArgument(fmt::format("--sizes: '{}' is not HxW like 2048x2048", s)));
      }
      q.sizes.emplace_back(h, w);
    }
  }
  if (args->count("frames-list")) {
    auto f = IntList("frames-list", (*args)["frames-list"].as<std::string>());
    if (!f.ok()) return Fail("whatif", f.status());
    q.frames = *f;
  }
  auto objective = ParseObjective((*args)["objective"].as<std::string>());
  if (!objective.ok()) return Fail("whatif", objective.status());
  q.plan.objective = *objective;
  auto store = Store::Open(args->count("db") ? (*args)["db"].as<std::string>() : Store::DefaultPath());
  if (!store.ok()) return Fail("whatif", store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail("whatif", fits.status());
  auto rows = RunWhatIf(**catalog, q, *fits);
  if (!rows.ok()) return Fail("whatif", rows.status());

  if (args->count("csv")) {
    Status st = WriteFile((*args)["csv"].as<std::string>(), WhatIfCsv(*rows));
    if (!st.ok()) return Fail("whatif", st);
  }
  if (args->count("plot")) {
    const std::string title = fmt::format("{} {}, {} steps: best configuration per GPU count", workload->model_id,
                                          workload->frames > 1 ? fmt::format("{}x{}x{}", workload->height, workload->width, workload->frames)
                                                               : fmt::format("{}x{}", workload->height, workload->width),
                                          workload->steps);
    Status st = WriteFile((*args)["plot"].as<std::string>(), WhatIfSvg(*rows, title));
    if (!st.ok()) return Fail("whatif", st);
  }
  std::optional<SloAnswer> slo;
  if (args->count("slo")) slo = MeetSlo(*rows, (*args)["slo"].as<double>());

  if (args->count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : *rows) {
      out.push_back({{"gpu", r.gpu}, {"intra", r.intra}, {"inter", r.inter}, {"gpus", r.gpus}, {"nodes", r.nodes},
                     {"height", r.height}, {"width", r.width}, {"frames", r.frames}, {"feasible", r.feasible},
                     {"config", r.config}, {"latency_s", r.latency_s}, {"speedup", r.speedup},
                     {"gpu_seconds", r.gpu_seconds}, {"note", r.note}});
    }
    nlohmann::json j = {{"rows", out}};
    if (slo) {
      nlohmann::json s = nlohmann::json::array();
      for (const auto& r : slo->smallest) s.push_back({{"gpu", r.gpu}, {"gpus", r.gpus}, {"config", r.config}, {"latency_s", r.latency_s}});
      j["slo"] = {{"seconds", (*args)["slo"].as<double>()}, {"smallest", s},
                  {"cheapest", slo->cheapest ? nlohmann::json({{"gpu", slo->cheapest->gpu}, {"gpus", slo->cheapest->gpus},
                                                               {"config", slo->cheapest->config},
                                                               {"gpu_seconds", slo->cheapest->gpu_seconds}})
                                             : nlohmann::json(nullptr)}};
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::vector<std::vector<std::string>> table;
    for (const auto& r : *rows) {
      table.push_back({r.gpu, r.inter == "none" ? r.intra : r.intra + "/" + r.inter,
                       r.frames > 1 ? fmt::format("{}x{}x{}", r.height, r.width, r.frames) : fmt::format("{}x{}", r.height, r.width),
                       std::to_string(r.gpus), r.feasible ? r.config : "does not fit",
                       r.feasible ? fmt::format("{:.3f}", r.latency_s) : "-",
                       r.speedup > 0 ? fmt::format("{:.2f}x", r.speedup) : "-",
                       r.feasible ? fmt::format("{:.1f}", r.gpu_seconds) : "-", r.note});
    }
    std::cout << FormatTable({"gpu", "links", "size", "gpus", "best config", "latency s", "speedup", "GPU-s/img", "note"},
                             table);
    if (slo) {
      std::cout << fmt::format("\nlatency objective {:.3g} s:\n", (*args)["slo"].as<double>());
      for (const auto& r : slo->smallest) {
        std::cout << fmt::format("  {} ({}): {} GPUs with {} -> {:.3f} s\n", r.gpu, r.intra, r.gpus, r.config, r.latency_s);
      }
      if (slo->cheapest) {
        std::cout << fmt::format("  fewest GPU-seconds: {} x {} with {} ({:.1f} GPU-s per image)\n", slo->cheapest->gpus,
                                 slo->cheapest->gpu, slo->cheapest->config, slo->cheapest->gpu_seconds);
      }
    }
  }
  if (slo && slo->smallest.empty()) {
    return Fail("whatif", Status::Infeasible(fmt::format(
                              "no swept cluster meets {:.3g} s; the fastest point takes {:.3f} s — try more GPUs or "
                              "a faster GPU",
                              (*args)["slo"].as<double>(), [&] {
                                double best = 1e300;
                                for (const auto& r : *rows) if (r.feasible) best = std::min(best, r.latency_s);
                                return best;
                              }())));
  }
  return 0;
}

}  // namespace ditune::cli
