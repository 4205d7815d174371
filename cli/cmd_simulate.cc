// `ditune simulate WORKLOAD CLUSTER --config SPEC [--runtime R] [--trace FILE.json] [--json]`.
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/config_rules.h"
#include "core/output_file.h"
#include "costmodels/calibration.h"
#include "store/store.h"
#include "planner/launch.h"
#include "planner/plan.h"
#include "simulator/simulate.h"

namespace ditune::cli {
namespace {

std::string Ms(Seconds s) { return fmt::format("{:.1f} ms", s.value() * 1e3); }
std::string Gb(Bytes b) { return fmt::format("{:.1f} GB", b.value() / 1e9); }

}  // namespace

int RunSimulate(int argc, char** argv) {
  cxxopts::Options options("ditune simulate", "Predict one generation: latency, where the time goes, memory per GPU");
  AddWorkloadOptions(options);
  AddClusterOptions(options);
  options.add_options()
      ("config", "configuration (ditune syntax or xDiT flags); empty = one device", cxxopts::value<std::string>())
      ("trace", "write a Chrome trace (open it in Perfetto)", cxxopts::value<std::string>())
      ("db", "calibration database (default: $DITUNE_DB or ~/.local/share/ditune/ditune.db)",
       cxxopts::value<std::string>())
      ("torch-compile", "torch.compile (as `plan --torch-compile`)")
      ("parallel-vae", "parallel VAE decode where the runtime's entry point has it (as `plan --parallel-vae`)")
      ("json", "one JSON document on stdout");
  AddRuntimeOptions(options, /*any_allowed=*/false);
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("simulate", args.status());
  if (help) return 0;
  // The runtime's own rules are checked where it is priced (SimulateAsPlanned).
  auto inputs = ReadConfigInputs(*args, {}, /*validate=*/false);
  if (!inputs.ok()) return Fail("simulate", inputs.status());
  PlanOptions plan_options;
  auto runtime = ReadRuntime(*args, *inputs->catalog, /*any_allowed=*/false);
  if (!runtime.ok()) return Fail("simulate", runtime.status());
  plan_options.runtime = *runtime;
  plan_options.launch.torch_compile = args->count("torch-compile") > 0;
  plan_options.launch.parallel_vae = args->count("parallel-vae") > 0;
  if ((plan_options.launch.torch_compile || plan_options.launch.parallel_vae) && *runtime == "ditune") {
    return Fail("simulate", Status::InvalidArgument(
                                "--torch-compile and --parallel-vae are the PyTorch runtimes' options: ditune's engine "
                                "runs neither (leave out --runtime ditune)"));
  }
  const ModelSpec& model = *inputs->model;
  const Workload* workload = &inputs->workload;
  const Cluster* cluster = &inputs->cluster;

  auto store = OpenPricingStore(*args);
  if (!store.ok()) return Fail("simulate", store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail("simulate", fits.status());

  const bool trace = args->count("trace") > 0;
  if (trace) {
    if (Status st = CheckWritable((*args)["trace"].as<std::string>(), "trace"); !st.ok()) return Fail("simulate", st);
  }
  // Priced as `plan` prices it, so the two agree to the digit.
  TaskScheduler engine;
  ParallelConfig priced;
  auto r = SimulateAsPlanned(*inputs->catalog, *workload, *cluster, *fits, plan_options, inputs->config, &priced,
                             trace ? &engine : nullptr, /*every_rank=*/true);
  if (!r.ok()) return Fail("simulate", r.status());
  const ParallelConfig* config = &priced;
  if (!(priced == inputs->config)) {
    std::cerr << fmt::format("ditune simulate: {} runs '{}' as '{}' (its patch count and warm-up for this size); "
                             "priced so\n",
                             *runtime, ToString(inputs->config), ToString(priced));
  }
  // How to launch it, where a runtime's entry point runs it (the rules passed: it was priced).
  std::optional<Launch> launch;
  if (auto rules = RuntimeRules(*inputs->catalog, model, *workload, *cluster, *runtime); rules.ok() && !rules->empty()) {
    auto l = MakeLaunch(model, *rules, *workload, *cluster, priced, plan_options.launch);
    if (l.ok()) launch = std::move(*l);
  }
  if (trace) {
    // The trace lays out the scheduler's tasks by rank: the configuration and the cluster.
    SimInput in{&model, *workload, &*cluster, priced, nullptr, nullptr};
    Status st = WriteChromeTrace(engine, in, (*args)["trace"].as<std::string>());
    if (!st.ok()) return Fail("simulate", st);
  }

  // The 80% interval of the figure, and where its compute figure comes from.
  auto intervals = ShippedIntervals(inputs->catalog->data_dir());
  if (!intervals.ok()) return Fail("simulate", intervals.status());
  std::optional<PredictionInterval> interval;
  if (*intervals) {
    interval = IntervalFor(**intervals, *runtime, ComputeProvenance(*fits, cluster->gpu->id, model.id),
                           r->total.value());
  }
  // The peak's 80% interval, and whether its top passes the capacity where the point fits: the
  // verdict then rests on the last GB (the allocator's fragmentation is not priced).
  const std::optional<MemoryInterval> mem = *intervals ? PeakMemoryInterval(**intervals, *r) : std::nullopt;
  const double capacity_gb = r->ranks.empty() ? 0 : r->ranks.front().memory.capacity.value() / 1e9;
  const bool tight = r->fits && mem && mem->hi_gb > capacity_gb;
  if (args->count("json")) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& rr : r->ranks) {
      ranks.push_back({{"rank", rr.rank}, {"stage", rr.stage}, {"busy_s", rr.busy.value()},
                       {"memory_gb", rr.memory.peak().value() / 1e9}, {"fits", rr.memory.fits()}});
    }
    nlohmann::json out = {
        {"model", model.id}, {"config", ToString(*config)}, {"runtime", *runtime}, {"executor", *runtime},
        {"gpus", cluster->gpus()},
        {"latency_s", r->total.value()}, {"text_encode_s", r->text_encode.value()}, {"dit_s", r->dit.value()},
        {"vae_decode_s", r->vae_decode.value()}, {"warmup_s", r->warmup.value()}, {"step_s", r->step.value()},
        {"per_step", {{"compute_s", r->steady.compute.value()}, {"exposed_comm_s", r->steady.exposed_comm.value()},
                      {"bubble_s", r->steady.bubble.value()}}},
        {"imbalance", r->imbalance}, {"peak_memory_gb", r->peak_memory.value() / 1e9}, {"fits", r->fits},
        {"memory_phases_gb", r->ranks.empty() ? nlohmann::json(nullptr) : MemoryPhasesJson(r->ranks.front().memory)},
        {"ranks", ranks}};
    out["launch"] = launch ? LaunchToJson(*launch) : nlohmann::json(nullptr);
    out["topology"] = TopologyJson(*cluster);
    out["predicted_lo_s"] = interval ? nlohmann::json(interval->lo_s) : nlohmann::json(nullptr);
    out["predicted_hi_s"] = interval ? nlohmann::json(interval->hi_s) : nlohmann::json(nullptr);
    out["memory_tight"] = tight;
    out["peak_memory_gb_lo"] = mem ? nlohmann::json(mem->lo_gb) : nlohmann::json(nullptr);
    out["peak_memory_gb_hi"] = mem ? nlohmann::json(mem->hi_gb) : nlohmann::json(nullptr);
    out["provenance"] = interval ? nlohmann::json{{"compute", ProvenanceName(interval->provenance)},
                                                  {"interval", interval->basis}}
                                 : nlohmann::json(nullptr);
    std::cout << out.dump(2) << "\n";
    return r->fits ? 0 : 3;
  }
  std::cout << fmt::format("{} {}x{}{}, {} steps on {} x {} ({}): {}\n", model.id, workload->height, workload->width,
                           model.modality == Modality::kVideo ? fmt::format("x{}", workload->frames) : "",
                           workload->steps, cluster->gpus(), cluster->spec.gpu_id, IntraLabel(*cluster),
                           Label(*config));
  for (const auto& note : cluster->topology_notes) std::cout << "your box: " << note << "\n";
  std::cout << fmt::format("latency {:.3f} s{} = text encoding {}{} + DiT {} + VAE decode {}{}\n", r->total.value(),
                           interval ? fmt::format(" ±{:.0f}%", 100 * interval->half_width()) : "",
                           Ms(r->text_encode), config->te == TextEncoderPlacement::kCpu ? " (on the CPU)" : "",
                           Ms(r->dit), Ms(r->vae_decode), config->vae == VaePlacement::kCpu ? " (on the CPU)" : "");
  if (interval) {
    std::cout << fmt::format("80% interval {:.3f} to {:.3f} s, from {}; compute figure: {}\n", interval->lo_s,
                             interval->hi_s, interval->basis, ProvenanceText(interval->provenance));
  }
  std::cout << fmt::format("DiT: {} per steady step (compute {}, exposed communication {}, pipeline bubble {})",
                           Ms(r->step), Ms(r->steady.compute), Ms(r->steady.exposed_comm), Ms(r->steady.bubble));
  if (r->warmup.value() > 0) std::cout << fmt::format("; warm-up steps {}", Ms(r->warmup));
  std::cout << fmt::format("\nimbalance across ranks {:.1f}%\n", 100 * r->imbalance);
  const MemoryBreakdown& m = r->ranks.front().memory;
  std::cout << fmt::format(
      "memory per GPU {} of {} ({}): weights {}, encoders {}, activations {}, K/V buffers {}, comm {}, "
      "VAE decode {}, runtime {}\n",
      Gb(r->peak_memory), Gb(m.capacity),
      !r->fits ? "DOES NOT FIT"
      : tight  ? fmt::format("fits, tight: the 80% interval reaches {:.1f} GB", mem->hi_gb)
               : std::string("fits"),
      Gb(m.weights), Gb(m.encoders),
      Gb(m.activations + m.attention), Gb(m.kv_buffers), Gb(m.comm_buffers), Gb(m.vae_decode), Gb(m.runtime));
  std::cout << fmt::format("memory by phase: {}\n", MemoryPhasesText(m));
  if (launch) {
    std::cout << LaunchText(*launch, model.runtime(launch->runtime)->runtime_name);
  }
  if (trace) std::cout << "trace: " << (*args)["trace"].as<std::string>() << "\n";
  return r->fits ? 0 : 3;
}

}  // namespace ditune::cli
