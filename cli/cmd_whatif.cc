// `ditune whatif WORKLOAD --gpu ID[,ID..] --gpus N[,N..] [--intra ..] [--inter ..]
//  [--sizes HxW,..] [--frames-list F,..] [--slo SECONDS] [--csv FILE] [--plot FILE.svg] [--json]`.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "store/store.h"
#include "planner/whatif.h"

namespace ditune::cli {
namespace {

// The items of a comma-separated flag value: InvalidArgument for an empty value or item.
StatusOr<std::vector<std::string>> SplitList(const std::string& flag, const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) {
      return Status::InvalidArgument(fmt::format("--{} '{}': an empty item; give comma-separated values", flag, s));
    }
    out.push_back(std::move(item));
    if (comma == std::string::npos) return out;
    pos = comma + 1;
  }
}

// A decimal integer in [lo, hi], or InvalidArgument naming the flag, the item and the range.
StatusOr<int> BoundedInt(const std::string& flag, const std::string& item, int lo, int hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(item, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != item.size() || v < lo || v > hi) {
    return Status::InvalidArgument(fmt::format("--{}: '{}' is not an integer from {} to {}", flag, item, lo, hi));
  }
  return static_cast<int>(v);
}

StatusOr<std::vector<int>> IntList(const std::string& flag, const std::string& s, int hi) {
  DITUNE_ASSIGN_OR_RETURN(auto items, SplitList(flag, s));
  std::vector<int> out;
  for (const auto& item : items) {
    DITUNE_ASSIGN_OR_RETURN(int v, BoundedInt(flag, item, 1, hi));
    out.push_back(v);
  }
  return out;
}

}  // namespace

int RunWhatIf(int argc, char** argv) {
  cxxopts::Options options("ditune whatif", "Sweep GPU types, counts, links and sizes; find what meets a latency");
  AddWorkloadOptions(options);
  AddRuntimeOptions(options, /*any_allowed=*/true);
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
  auto gpus = SplitList("gpu", (*args)["gpu"].as<std::string>());
  if (!gpus.ok()) return Fail("whatif", gpus.status());
  q.gpus.clear();
  for (const std::string& typed : *gpus) {
    auto id = GpuIdOf(typed);
    if (!id.ok()) return Fail("whatif", id.status());
    q.gpus.push_back(*id);
  }
  auto counts = IntList("gpus", (*args)["gpus"].as<std::string>(), kMaxClusterGpus);
  if (!counts.ok()) return Fail("whatif", counts.status());
  q.counts = *counts;
  for (const char* flag : {"intra", "inter"}) {
    if (!args->count(flag)) continue;
    auto ids = SplitList(flag, (*args)[flag].as<std::string>());
    if (!ids.ok()) return Fail("whatif", ids.status());
    (std::string(flag) == "intra" ? q.intras : q.inters) = *ids;
  }
  if (args->count("sizes")) {
    auto sizes = SplitList("sizes", (*args)["sizes"].as<std::string>());
    if (!sizes.ok()) return Fail("whatif", sizes.status());
    for (const auto& s : *sizes) {
      const size_t x = s.find('x');
      if (x == std::string::npos) {
        return Fail("whatif", Status::InvalidArgument(fmt::format("--sizes: '{}' is not HxW like 2048x2048", s)));
      }
      auto h = BoundedInt("sizes", s.substr(0, x), 1, kMaxSide);
      auto w = BoundedInt("sizes", s.substr(x + 1), 1, kMaxSide);
      if (!h.ok()) return Fail("whatif", h.status());
      if (!w.ok()) return Fail("whatif", w.status());
      q.sizes.emplace_back(*h, *w);
    }
  }
  if (args->count("frames-list")) {
    auto f = IntList("frames-list", (*args)["frames-list"].as<std::string>(), kMaxFrames);
    if (!f.ok()) return Fail("whatif", f.status());
    q.frames = *f;
  }
  if (args->count("slo") && !((*args)["slo"].as<double>() > 0)) {
    return Fail("whatif", Status::InvalidArgument(
                              fmt::format("--slo {}: give the latency target in seconds, > 0", (*args)["slo"].as<double>())));
  }
  auto objective = ParseObjective((*args)["objective"].as<std::string>());
  if (!objective.ok()) return Fail("whatif", objective.status());
  q.plan.objective = *objective;
  auto catalog_for_runtime = Catalog::Default();
  if (!catalog_for_runtime.ok()) return Fail("whatif", catalog_for_runtime.status());
  auto runtime = ReadRuntime(*args, **catalog_for_runtime, /*any_allowed=*/true);
  if (!runtime.ok()) return Fail("whatif", runtime.status());
  q.plan.runtime = *runtime;
  auto store = OpenPricingStore(*args);
  if (!store.ok()) return Fail("whatif", store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail("whatif", fits.status());
  auto rows = RunWhatIf(**catalog, q, *fits);
  if (!rows.ok()) return Fail("whatif", rows.status());

  if (args->count("csv")) {
    Status st = WriteOutputFile("csv", (*args)["csv"].as<std::string>(), WhatIfCsv(*rows));
    if (!st.ok()) return Fail("whatif", st);
  }
  if (args->count("plot")) {
    const std::string title = fmt::format("{} {}, {} steps: best configuration per GPU count", workload->model_id,
                                          workload->frames > 1 ? fmt::format("{}x{}x{}", workload->height, workload->width, workload->frames)
                                                               : fmt::format("{}x{}", workload->height, workload->width),
                                          workload->steps);
    Status st = WriteOutputFile("plot", (*args)["plot"].as<std::string>(), WhatIfSvg(*rows, title));
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
