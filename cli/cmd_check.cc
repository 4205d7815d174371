// `ditune check WORKLOAD CLUSTER --config SPEC`: validates a configuration and shows how
// it lays out: the rank of every coordinate, the groups of every dimension, each rank's share.
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/rank_layout.h"
#include "core/rank_share.h"
#include "core/config_rules.h"
#include "planner/gpu_launch.h"
#include "planner/plan.h"
#include "planner/launch.h"

namespace ditune::cli {
namespace {

constexpr Axis kShownAxes[] = {Axis::kTp, Axis::kUlysses, Axis::kRing, Axis::kSp,
                               Axis::kPipeFusion, Axis::kCfg, Axis::kDp, Axis::kDistriFusion};

std::string GroupsText(const std::vector<std::vector<int>>& groups) {
  std::string s;
  for (const auto& g : groups) s += fmt::format("{}[{}]", s.empty() ? "" : " ", fmt::join(g, ","));
  return s;
}

}  // namespace

int RunCheck(int argc, char** argv) {
  cxxopts::Options options("ditune check", "Check a parallel configuration and show its rank layout");
  AddWorkloadOptions(options);
  AddClusterOptions(options);
  options.add_options()
      ("config", "configuration (ditune syntax or xDiT flags in quotes); empty = one device",
       cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  AddRuntimeOptions(options, /*any_allowed=*/false);
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("check", args.status());
  if (help) return 0;
  auto unchecked = ReadConfigInputs(*args, {}, /*validate=*/false);
  if (!unchecked.ok()) return Fail("check", unchecked.status());
  auto runtime = ReadRuntime(*args, *unchecked->catalog, /*any_allowed=*/false);
  if (!runtime.ok()) return Fail("check", runtime.status());
  // The runtime's rules: its entry point's for the model, or ditune's engine's.
  auto rules = RuntimeRules(*unchecked->catalog, *unchecked->model, unchecked->workload, unchecked->cluster, *runtime);
  if (!rules.ok()) return Fail("check", rules.status());
  auto in = ReadConfigInputs(*args, *rules);
  if (!in.ok()) return Fail("check", in.status());
  const ModelSpec& model = *in->model;
  const TokenGeometry& tokens = in->tokens;
  const Workload* workload = &in->workload;
  const Cluster* cluster = &in->cluster;
  const ParallelConfig* config = &in->config;

  // What the runtime runs for this config (xDiT: patches adjusted, warm-up clamped) and how to
  // launch it.
  std::optional<Launch> launch;
  ParallelConfig runs = *config;
  if (!rules->empty()) {
    runs = XditRunsAs(tokens, workload->steps, *config);
    auto l = MakeLaunch(model, *rules, *workload, *cluster, runs);
    if (!l.ok()) return Fail("check", l.status());
    launch = std::move(*l);
  }
  config = &runs;
  auto layout = RankLayout::Create(*config, cluster->gpus_per_node());
  if (!layout.ok()) return Fail("check", layout.status());
  std::vector<RankShare> shares = ComputeRankShares(model, tokens, *workload, *config, *layout);

  if (args->count("json")) {
    nlohmann::json groups = nlohmann::json::object();
    for (Axis a : kShownAxes) {
      if (layout->degree(a) > 1) groups[std::string(AxisName(a))] = layout->Groups(a);
    }
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& s : shares) {
      nlohmann::json coords = nlohmann::json::object();
      for (Axis a : kShownAxes) coords[std::string(AxisName(a))] = s.coords[a];
      ranks.push_back({{"rank", s.rank}, {"node", s.node}, {"coords", coords}, {"tokens", s.tokens},
                       {"tokens_per_patch", s.tokens_per_patch}, {"heads", s.heads},
                       {"first_block", s.first_block}, {"blocks", s.blocks}, {"patches", s.patches},
                       {"prompts", s.prompts}, {"cfg_branch", s.cfg_branch}});
    }
    nlohmann::json out = {
        {"valid", true}, {"config", ToString(*config)}, {"order", RankOrderToString(config->order)},
        {"model", model.id}, {"image_tokens", tokens.image_tokens()}, {"text_tokens", tokens.text_tokens},
        {"gpus", cluster->gpus()}, {"nodes", cluster->nodes()}, {"groups", groups}, {"ranks", ranks}};
    out["runtime"] = *runtime;
    out["executor"] = *runtime;
    out["launch"] = launch ? LaunchToJson(*launch) : nlohmann::json(nullptr);
    const bool xdit = launch && *runtime == "xdit";
    out["xdit_flags"] = xdit ? nlohmann::json(launch->parallel_flags) : nlohmann::json(nullptr);
    out["xdit_command"] = xdit ? nlohmann::json(launch->command) : nlohmann::json(nullptr);
    if (runs != in->config) out["xdit_adjusted_from"] = ToString(in->config);
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  std::cout << fmt::format("{} {}x{}{}, {} steps, batch {}: {} image tokens ({} x {} x {} patches), {} text tokens\n",
                           model.id, workload->height, workload->width,
                           model.modality == Modality::kVideo ? fmt::format("x{}", workload->frames) : "",
                           workload->steps, workload->batch, tokens.image_tokens(), tokens.patch_frames,
                           tokens.patch_rows, tokens.patch_cols, tokens.text_tokens);
  std::cout << fmt::format("cluster: {} x {}, {} node(s) x {}, intra {}, inter {}\n", cluster->gpus(),
                           cluster->spec.gpu_id, cluster->nodes(), cluster->gpus_per_node(),
                           cluster->spec.intra_id, cluster->spec.inter_id);
  std::cout << fmt::format("config: {} — valid; rank order {} (fastest first)\n", Label(*config),
                           RankOrderToString(config->order));
  if (runs != in->config) {
    std::cout << fmt::format("{} runs '{}' as '{}' (xDiT's runtime_state.py: the patch height rounded to whole rows, "
                             "the count recomputed; the warm-up clamped to the steps)\n",
                             model.runtime(*rules)->runtime_name, Label(in->config), Label(runs));
  }
  if (launch) {
    std::cout << LaunchText(*launch, model.runtime(*rules)->runtime_name);
  } else {
    std::cout << "launch with ditune: "
              << ShellJoin(DituneRunCommand("ditune", *workload, *config, *cluster)) << "\n";
  }
  std::cout << "\n";
  std::cout << "groups:\n";
  for (Axis a : kShownAxes) {
    if (layout->degree(a) <= 1) continue;
    std::cout << fmt::format("  {:<12} ({:>2}) {}{}\n", AxisName(a), layout->degree(a),
                             GroupsText(layout->Groups(a)),
                             layout->GroupsWithinNodes(a) ? "" : "  (spans nodes)");
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : shares) {
    rows.push_back({std::to_string(s.rank), std::to_string(s.node), std::to_string(s.coords[Axis::kTp]),
                    std::to_string(s.coords[Axis::kUlysses]), std::to_string(s.coords[Axis::kRing]),
                    std::to_string(s.coords[Axis::kPipeFusion]), std::to_string(s.coords[Axis::kCfg]),
                    std::to_string(s.coords[Axis::kDp]), std::to_string(s.tokens),
                    config->pipefusion > 1 ? fmt::format("{} x {}", s.patches, s.tokens_per_patch) : "-",
                    std::to_string(s.heads),
                    fmt::format("{}-{} ({})", s.first_block, s.first_block + s.blocks - 1, s.blocks),
                    std::to_string(s.prompts),
                    s.cfg_branch < 0 ? "both" : (s.cfg_branch == 0 ? "cond" : "uncond")});
  }
  std::cout << "\nranks:\n"
            << FormatTable({"rank", "node", "tp", "ulysses", "ring", "stage", "cfg", "dp", "tokens",
                            "patches x tokens", "heads", "blocks", "prompts", "branch"},
                           rows);
  return 0;
}

}  // namespace ditune::cli
