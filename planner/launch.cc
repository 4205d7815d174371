#include "planner/launch.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include "core/config_rules.h"
#include "core/names.h"
#include "costmodels/memory_model.h"

namespace ditune {
namespace {

// Replaces every "{name}" in `text` by `value`.
std::string Substitute(std::string text, const std::string& name, const std::string& value) {
  const std::string key = "{" + name + "}";
  for (size_t pos = text.find(key); pos != std::string::npos; pos = text.find(key, pos + value.size())) {
    text.replace(pos, key.size(), value);
  }
  return text;
}

}  // namespace

Status RuntimeRunsWorkload(const ModelSpec& model, std::string_view runtime, const Workload& workload) {
  const RuntimeSupport* x = model.runtime(runtime);
  if (x == nullptr) return Status::InvalidArgument(RuntimeRunsNoEntryMessage(model, runtime));
  if (x->fixed_frames > 0 && workload.frames != x->fixed_frames) {
    return Status::InvalidArgument(fmt::format(
        "--frames {}: {}'s entry point for {} always generates {} frames ({}); plan --frames {}, or use "
        "another runtime (--runtime ditune)",
        workload.frames, x->runtime_name, model.id, x->fixed_frames, x->fixed_frames_source, x->fixed_frames));
  }
  return Status::Ok();
}

Status CheckRuntimeRuns(const ModelSpec& model, std::string_view runtime, const Workload& workload,
                        const ParallelConfig& config, int gpus) {
  DITUNE_RETURN_IF_ERROR(RuntimeRunsWorkload(model, runtime, workload));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, workload));
  ValidationContext ctx{&model, tokens, workload.steps, workload.batch, gpus};
  ctx.runtime = runtime;
  return ValidateConfig(ctx, config);
}

StatusOr<Launch> MakeLaunch(const ModelSpec& model, std::string_view runtime, const Workload& workload,
                            const Cluster& cluster, const ParallelConfig& config, const LaunchOptions& options) {
  DITUNE_RETURN_IF_ERROR(CheckRuntimeRuns(model, runtime, workload, config, cluster.gpus()));
  DITUNE_ASSIGN_OR_RETURN(const TokenGeometry tokens, ComputeTokenGeometry(model, workload));
  const RuntimeSupport& x = *model.runtime(runtime);  // CheckRuntimeRuns refuses a model without one
  Launch out;
  out.runtime = x.runtime;

  std::string cmd = x.command;
  cmd = Substitute(cmd, "gpus", std::to_string(cluster.gpus()));
  cmd = Substitute(cmd, "gpus_per_node", std::to_string(cluster.gpus_per_node()));
  cmd = Substitute(cmd, "nodes", std::to_string(cluster.nodes()));
  std::string devices;
  for (int i = 0; i < cluster.gpus_per_node(); ++i) devices += (i > 0 ? "," : "") + std::to_string(i);
  cmd = Substitute(cmd, "devices", devices);
  if (cluster.nodes() > 1 && cmd.rfind("torchrun ", 0) == 0) {
    // One torchrun per node; the rendezvous comes from the job's environment.
    cmd.insert(9, fmt::format("--nnodes={} --node_rank=$NODE_RANK --master_addr=$MASTER_ADDR "
                              "--master_port=$MASTER_PORT ",
                              cluster.nodes()));
  }

  // The words of one flag with its value (see RuntimeSupport::flags): the value after the
  // flag, in its "{}", or none for a switch.
  auto spelled = [&](const std::string& f, const std::string& value, bool takes_value) {
    std::vector<std::string> out_words;
    std::string text = f;
    const bool slot = text.find("{}") != std::string::npos;
    if (slot) text = Substitute(text, "", value);
    text = Substitute(text, "width", std::to_string(workload.width));
    text = Substitute(text, "height", std::to_string(workload.height));
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find(' ', start);
      if (end == std::string::npos) end = text.size();
      if (end > start) out_words.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    if (!slot && takes_value && !value.empty()) out_words.push_back(value);
    return out_words;
  };
  std::vector<std::string> words;
  auto flag = [&](std::string_view key, const std::string& value) {
    const std::string* f = x.flag(key);
    if (f == nullptr) return false;
    for (auto& w : spelled(*f, value, true)) words.push_back(std::move(w));
    return true;
  };
  if (!x.model_arg.empty()) flag("model", x.model_arg);
  if (!flag("size", "")) {
    flag("height", std::to_string(workload.height));
    flag("width", std::to_string(workload.width));
  }
  if (model.modality == Modality::kVideo && !flag("frames", std::to_string(workload.frames)) &&
      x.config_text.find("{frames}") == std::string::npos) {
    out.notes.push_back(fmt::format("the entry point takes no frame count: it generates its default of {} frames",
                                    model.default_frames));
  }
  flag("steps", std::to_string(workload.steps));
  if (workload.output == OutputType::kLatent && !flag("output_type", "latent")) {
    out.notes.push_back("the entry point has no latent-output flag: its run includes the VAE decode");
  }

  std::vector<std::string> par;
  // A degree the runtime fixes to the world (sp-is-world, fsdp-is-world) is a switch.
  const bool sp_fixed = x.constraint(kConstraintSpIsWorld) != nullptr;
  const bool fsdp_fixed = x.constraint(kConstraintFsdpIsWorld) != nullptr;
  // A degree without a flag is set in the config file, or implied by the world (sp-is-world).
  auto degree = [&](RuntimeMethod m, int d, bool takes_value = true) {
    if (d <= 1 || x.flag(RuntimeMethodKey(m)) == nullptr) return;
    for (auto& w : spelled(*x.flag(RuntimeMethodKey(m)), std::to_string(d), takes_value)) par.push_back(std::move(w));
  };
  degree(RuntimeMethod::kUlysses, config.ulysses);
  degree(RuntimeMethod::kRing, config.ring);
  // Wan's generate.py wants both SP degrees named whenever either is above 1.
  if (sp_fixed && config.sp() > 1) {
    if (config.ulysses == 1 && x.flag("ulysses") != nullptr) par.insert(par.end(), {*x.flag("ulysses"), "1"});
    if (config.ring == 1 && x.flag("ring") != nullptr) par.insert(par.end(), {*x.flag("ring"), "1"});
  }
  if (config.pipefusion > 1) {
    degree(RuntimeMethod::kPipeFusion, config.pipefusion);
    // Entry points without these flags run the defaults CheckRuntimeRuns insists on.
    if (const std::string* f = x.flag("patches")) par.insert(par.end(), {*f, std::to_string(config.patches)});
    if (const std::string* f = x.flag("warmup")) {
      par.insert(par.end(), {*f, std::to_string(std::min(config.warmup, workload.steps))});
    }
  }
  degree(RuntimeMethod::kCfg, config.cfg, false);
  degree(RuntimeMethod::kTp, config.tp);
  degree(RuntimeMethod::kDp, config.dp);
  degree(RuntimeMethod::kFullyShard, config.fsdp, !fsdp_fixed);
  auto option = [&](RuntimeMethod m, bool wanted) {
    if (!wanted) {
      if (auto off = x.off_flags.find(RuntimeMethodKey(m)); off != x.off_flags.end()) {
        for (auto& w : spelled(off->second, "", false)) par.push_back(std::move(w));
      }
      return;
    }
    if (!x.runs(m)) {
      out.notes.push_back(fmt::format("{} is not run for {} ({}): left out", RuntimeMethodPhrase(m), model.id,
                                      x.method(m).source));
      return;
    }
    if (x.flag(RuntimeMethodKey(m)) == nullptr) return;  // set in the config file
    for (auto& w : spelled(*x.flag(RuntimeMethodKey(m)), "", false)) par.push_back(std::move(w));
  };
  // A runtime that compiles by default is told to run eager by its off flag (vLLM-Omni's
  // --enforce-eager), and only then.
  const bool eager = options.eager || config.eager != 0;
  if (eager) {
    option(RuntimeMethod::kTorchCompile, false);
  } else if (options.torch_compile || config.compile != 0) {
    option(RuntimeMethod::kTorchCompile, true);
  }
  option(RuntimeMethod::kCpuOffload, config.offload != 0);
  // A runtime that always decodes over every rank on more than one GPU decodes so unasked.
  const bool parallel_vae = EffectiveVae(config, x.memory) == VaePlacement::kParallel ||
                            (options.parallel_vae && config.world_size() > 1);
  option(RuntimeMethod::kParallelVae, parallel_vae);
  option(RuntimeMethod::kVaeTiling, config.vae == VaePlacement::kTiled);
  option(RuntimeMethod::kVaeCpu, config.vae == VaePlacement::kCpu);
  option(RuntimeMethod::kTextEncoderParallel, config.te == TextEncoderPlacement::kParallel);
  option(RuntimeMethod::kTextEncoderFsdp, config.te == TextEncoderPlacement::kFsdp);
  option(RuntimeMethod::kTextEncoderCpu, config.te == TextEncoderPlacement::kCpu);
  option(RuntimeMethod::kControlNetParallel, config.controlnet == ControlNetPlacement::kParallel);

  if (!x.config_text.empty()) {
    const bool py = x.config_format == "python";
    auto boolean = [&](bool b) { return std::string(b ? (py ? "True" : "true") : (py ? "False" : "false")); };
    // Python APIs take None for a method not used (cache-dit's ParallelismConfig).
    auto degree_text = [&](int d) { return py && d <= 1 ? std::string("None") : std::to_string(d); };
    std::string text = x.config_text;
    const std::vector<std::pair<const char*, std::string>> values = {
        {"model", !x.model_arg.empty() ? x.model_arg : !RepositoryOf(model).empty() ? RepositoryOf(model) : model.name},
        {"height", std::to_string(workload.height)},
        {"width", std::to_string(workload.width)},
        {"frames", std::to_string(workload.frames)},
        {"steps", std::to_string(workload.steps)},
        {"gpus", std::to_string(cluster.gpus())},
        // The sequence does not split evenly over the sequence-parallel ranks (cache-dit's
        // Ulysses-Anything-Attention takes any length).
        {"uneven_sequence", boolean(config.sp() > 1 && tokens.image_tokens() % config.sp() != 0)},
        {"ulysses", degree_text(config.ulysses)},
        {"ring", degree_text(config.ring)},
        {"cfg", degree_text(config.cfg)},
        {"tp", degree_text(config.tp)},
        {"fsdp", degree_text(config.fsdp)},
        {"torch_compile", boolean((options.torch_compile || config.compile != 0) && !eager &&
                                  x.runs(RuntimeMethod::kTorchCompile))},
        {"cpu_offload", boolean(config.offload != 0)},
        {"text_encoder_parallel", boolean(config.te == TextEncoderPlacement::kParallel)},
        {"text_encoder_fsdp", boolean(config.te == TextEncoderPlacement::kFsdp)},
        {"text_encoder_cpu", boolean(config.te == TextEncoderPlacement::kCpu)},
        {"vae_tiling", boolean(config.vae == VaePlacement::kTiled)},
        {"vae_cpu", boolean(config.vae == VaePlacement::kCpu)},
        {"parallel_vae", boolean(parallel_vae && x.runs(RuntimeMethod::kParallelVae))},
        {"controlnet_parallel", boolean(config.controlnet == ControlNetPlacement::kParallel)},
    };
    for (const auto& [name, value] : values) text = Substitute(text, name, value);
    out.config_name = x.config_name;
    out.config_text = text;
    cmd = Substitute(cmd, "config_file", x.config_name);
  }
  for (const auto& w : par) out.parallel_flags += (out.parallel_flags.empty() ? "" : " ") + w;
  out.appended = words;
  out.appended.insert(out.appended.end(), par.begin(), par.end());
  out.command = cmd;
  for (const auto& w : words) out.command += " " + w;
  if (!out.parallel_flags.empty()) out.command += " " + out.parallel_flags;
  return out;
}

std::string LaunchText(const Launch& launch, std::string_view runtime_name) {
  std::string out = fmt::format("launch with {}: {}\n", runtime_name, launch.command);
  for (const auto& note : launch.notes) out += fmt::format("  note: {}\n", note);
  if (!launch.config_name.empty()) {
    out += fmt::format("  with {} beside it:\n", launch.config_name);
    size_t start = 0;
    while (start < launch.config_text.size()) {
      size_t end = launch.config_text.find('\n', start);
      if (end == std::string::npos) end = launch.config_text.size();
      out += fmt::format("    {}\n", launch.config_text.substr(start, end - start));
      start = end + 1;
    }
  }
  return out;
}

}  // namespace ditune
