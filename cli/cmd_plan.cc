// `ditune plan WORKLOAD CLUSTER [--objective ..] [--runtime R|any] [--top K] [--explain] [--xdit-flags]
// [--json]`.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "planner/auto_configure.h"
#include "planner/gpu_launch.h"

namespace ditune::cli {

void AddPlanOptions(cxxopts::Options& options) {
  options.add_options("plan")
      ("objective", "latency | throughput | gpu-seconds", cxxopts::value<std::string>()->default_value("latency"))
      ("top", "how many configurations to show", cxxopts::value<int>()->default_value("5"))
      ("warmup", "PipeFusion warm-up steps to consider, e.g. 0,1,2 (default 1, as xDiT)",
       cxxopts::value<std::string>()->default_value("1"))
      ("torch-compile", "torch.compile (xDiT's --use_torch_compile, ...): priced without the eager host overhead, "
                        "and printed in the launch line where the runtime's entry point compiles the model")
      ("parallel-vae", "parallel VAE decode (xDiT's --use_parallel_vae, ...) where the runtime's entry point has it")
      ("methods", "only these methods, comma-separated: ulysses, ring, pipefusion, cfg, tp, dp, distrifusion, fsdp, "
                  "offload, te (e.g. ulysses,ring,cfg: no stale-activation methods)",
       cxxopts::value<std::string>())
      ("no-cache", "search again even if a plan for this calibration is cached")
      ("db", "calibration database (default: $DITUNE_DB or ~/.local/share/ditune/ditune.db)",
       cxxopts::value<std::string>());
}

StatusOr<AutoConfigureOptions> ReadPlanOptions(const cxxopts::ParseResult& args, const Catalog& catalog,
                                               bool any_allowed) {
  AutoConfigureOptions o;
  DITUNE_ASSIGN_OR_RETURN(o.plan.objective, ParseObjective(args["objective"].as<std::string>()));
  o.plan.top_k = args["top"].as<int>();
  if (o.plan.top_k < 1) return Status::InvalidArgument("--top must be >= 1");
  o.plan.enumerate.warmups.clear();
  std::string w = args["warmup"].as<std::string>();
  size_t pos = 0;
  while (pos <= w.size()) {
    size_t comma = w.find(',', pos);
    std::string item = w.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int v = -1;
    try {
      size_t used = 0;
      v = std::stoi(item, &used);
      if (used != item.size()) v = -1;
    } catch (const std::exception&) {
      v = -1;
    }
    if (v < 0) return Status::InvalidArgument(fmt::format("--warmup '{}': expected integers >= 0 like 0,1,2", w));
    o.plan.enumerate.warmups.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  DITUNE_ASSIGN_OR_RETURN(o.plan.runtime, ReadRuntime(args, catalog, any_allowed));
  o.use_cache = args.count("no-cache") == 0;
  if (args.count("methods")) {
    DITUNE_ASSIGN_OR_RETURN(o.plan.methods, ParseMethods(args["methods"].as<std::string>()));
  }
  o.plan.launch.torch_compile = args.count("torch-compile") > 0;
  o.plan.launch.parallel_vae = args.count("parallel-vae") > 0;
  if ((o.plan.launch.torch_compile || o.plan.launch.parallel_vae) && o.plan.runtime == "ditune") {
    return Status::InvalidArgument(
        "--torch-compile and --parallel-vae are the PyTorch runtimes' options: ditune's engine runs neither (leave "
        "out --runtime ditune)");
  }
  if (args.count("db")) {
    o.db_path = args["db"].as<std::string>();
    if (o.db_path.empty()) return Status::InvalidArgument("--db is empty: give the calibration database's path");
  }
  return o;
}

int RunPlan(int argc, char** argv) {
  cxxopts::Options options("ditune plan", "Choose the best parallel configuration and explain it");
  AddWorkloadOptions(options);
  AddClusterOptions(options);
  AddPlanOptions(options);
  AddRuntimeOptions(options, /*any_allowed=*/true);
  options.add_options()
      ("explain", "why the winner wins and what holds the runner-ups back")
      ("xdit-flags", "print only the xDiT flags of the best configuration xDiT can run")
      ("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("plan", args.status());
  if (help) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("plan", catalog.status());
  auto workload = ReadWorkload(*args, **catalog);
  if (!workload.ok()) return Fail("plan", workload.status());
  auto spec = ReadClusterSpec(*args);
  if (!spec.ok()) return Fail("plan", spec.status());
  auto opt = ReadPlanOptions(*args, **catalog, /*any_allowed=*/true);
  if (!opt.ok()) return Fail("plan", opt.status());
  for (int warmup : opt->plan.enumerate.warmups) {
    if (warmup > workload->steps) {
      return Fail("plan", Status::InvalidArgument(fmt::format("--warmup {}: at most the workload's {} steps", warmup,
                                                              workload->steps)));
    }
  }
  if (args->count("xdit-flags")) {
    if (opt->plan.runtime != "xdit") {
      return Fail("plan", Status::InvalidArgument(fmt::format(
                              "--xdit-flags plans for xDiT: leave out --runtime {} (every plan prints its runtime's "
                              "launch line)",
                              opt->plan.runtime)));
    }
    opt->plan.enumerate = XditOnly(opt->plan.enumerate);
  }
  bool cached = false;
  opt->from_cache = &cached;
  std::string store_note;
  opt->store_note = &store_note;
  auto plan = AutoConfigure(*workload, *spec, *opt);
  if (!store_note.empty()) std::cerr << "note: " << store_note << "\n";
  if (!plan.ok()) return Fail("plan", plan.status());
  const Candidate& best = plan->ranked.front();

  if (args->count("xdit-flags")) {
    if (!best.launch) {
      return Fail("plan", Status::InvalidArgument("xDiT runs on GPUs: give a GPU (--gpu), not the cpu device"));
    }
    if (args->count("json")) {
      std::cout << nlohmann::json{{"config", ToString(best.config)}, {"xdit_flags", best.launch->parallel_flags},
                                  {"xdit_command", best.launch->command}, {"latency_s", best.result.total.value()}}
                       .dump(2)
                << "\n";
      return 0;
    }
    std::cout << best.launch->parallel_flags << "\n";
    return 0;
  }
  if (args->count("json")) {
    nlohmann::json j = PlanToJson(*plan);
    j["from_cache"] = cached;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const Workload& w = plan->workload;
  const Cluster& c = plan->cluster;
  std::cout << fmt::format("{} {}x{}{}, {} steps, batch {} on {} x {} ({} node(s), {}{}): {} valid configurations, "
                           "{} do not fit; objective {}{}\n",
                           w.model_id, w.height, w.width, w.frames > 1 ? fmt::format("x{}", w.frames) : "", w.steps,
                           w.batch, c.gpus(), c.spec.gpu_id, c.nodes(), IntraLabel(c),
                           c.nodes() > 1 ? ", " + c.spec.inter_id : "", plan->enumerated, plan->pruned_memory,
                           ObjectiveName(plan->objective), cached ? " (cached ranking)" : "");
  for (const auto& note : c.topology_notes) std::cout << "your box: " << note << "\n";
  std::vector<std::vector<std::string>> rows;
  int rank = 1;
  for (const auto& cand : plan->ranked) {
    const SimResult& r = cand.result;
    const double step = r.step.value();
    auto pct = [&](Seconds s) { return fmt::format("{:.0f}%", step > 0 ? 100 * s.value() / step : 0); };
    std::string speedup = "-", eff = "-";
    if (plan->single_gpu) {
      const double s = plan->single_gpu->result.total.value() / r.total.value();
      speedup = fmt::format("{:.2f}x", s);
      eff = fmt::format("{:.0f}%", 100 * s / c.gpus());
    }
    std::vector<std::string> row = {std::to_string(rank++), Label(cand.config)};
    if (plan->runtime == kRuntimeAny) row.push_back(cand.runtime);
    rows.push_back(row);
    const std::string latency = cand.interval ? fmt::format("{:.3f} ±{:.0f}%", r.total.value(),
                                                            100 * cand.interval->half_width())
                                              : fmt::format("{:.3f}", r.total.value());
    rows.back().insert(rows.back().end(), {latency, speedup, eff,
                    fmt::format("{:.2f}", cand.images_per_s), fmt::format("{:.1f}", r.peak_memory.value() / 1e9),
                    fmt::format("{:.1f}", 1e3 * step), pct(r.steady.compute), pct(r.steady.exposed_comm),
                    pct(r.steady.bubble), pct(r.steady.host_wait),
                    fmt::format("{:.2f}/{:.2f}", r.text_encode.value(), r.vae_decode.value())});
  }
  std::vector<std::string> header = {"#", "config"};
  if (plan->runtime == kRuntimeAny) header.push_back("runtime");
  header.insert(header.end(), {"latency s", "speedup", "eff", "img/s", "GB/GPU", "step ms", "compute", "comm",
                               "bubble", "host", "text/VAE s"});
  std::cout << FormatTable(header, rows);
  if (args->count("explain")) {
    std::cout << "\n";
    for (const auto& line : plan->explanation) std::cout << "- " << line << "\n";
  }
  if (!plan->reproduce.empty()) {
    std::cout << "\nto measure the winner's figure:\n";
    for (const auto& line : plan->reproduce) std::cout << "- " << line << "\n";
  }
  if (!best.launch) {
    std::cout << "\nlaunch with ditune: " << ShellJoin(DituneRunCommand("ditune", w, best.config, c)) << "\n";
    return 0;
  }
  const ModelSpec* model = *(*catalog)->Model(w.model_id);
  std::cout << "\n" << LaunchText(*best.launch, model->runtime(best.launch->runtime)->runtime_name);
  return 0;
}

}  // namespace ditune::cli
