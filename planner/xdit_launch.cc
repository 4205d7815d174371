#include "planner/xdit_launch.h"

#include <fmt/format.h>

#include "core/config_rules.h"

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

Status XditRunsWorkload(const ModelSpec& model, const Workload& workload) {
  if (!model.xdit) {
    return Status::InvalidArgument(fmt::format(
        "xDiT runs no entry point for {} (its model file has no xdit section); plan it for ditune's executor "
        "(--executor ditune)",
        model.id));
  }
  const XditSupport& x = *model.xdit;
  if (x.fixed_frames > 0 && workload.frames != x.fixed_frames) {
    return Status::InvalidArgument(fmt::format(
        "--frames {}: xDiT's entry point for {} always generates {} frames ({}); plan --frames {}, or use "
        "--executor ditune",
        workload.frames, model.id, x.fixed_frames, x.fixed_frames_source, x.fixed_frames));
  }
  return Status::Ok();
}

Status CheckXditRuns(const ModelSpec& model, const Workload& workload, const ParallelConfig& config, int gpus) {
  DITUNE_RETURN_IF_ERROR(XditRunsWorkload(model, workload));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, workload));
  ValidationContext ctx{&model, tokens, workload.steps, workload.batch, gpus};
  ctx.xdit = true;
  return ValidateConfig(ctx, config);
}

StatusOr<XditLaunch> MakeXditLaunch(const ModelSpec& model, const Workload& workload, const Cluster& cluster,
                                    const ParallelConfig& config, const XditRunOptions& options) {
  DITUNE_RETURN_IF_ERROR(CheckXditRuns(model, workload, config, cluster.gpus()));
  const XditSupport& x = *model.xdit;  // CheckXditRuns refuses a model without one
  XditLaunch out;

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

  std::vector<std::string> words;
  auto flag = [&](std::string_view key, const std::string& value) {
    const std::string* f = x.flag(key);
    if (f == nullptr) return false;
    words.push_back(*f);
    if (!value.empty()) words.push_back(value);
    return true;
  };
  if (!x.model_arg.empty()) flag("model", x.model_arg);
  flag("height", std::to_string(workload.height));
  flag("width", std::to_string(workload.width));
  if (model.modality == Modality::kVideo && !flag("frames", std::to_string(workload.frames))) {
    out.notes.push_back(fmt::format("the entry point takes no frame count: it generates its default of {} frames",
                                    model.default_frames));
  }
  flag("steps", std::to_string(workload.steps));
  if (workload.output == OutputType::kLatent && !flag("output_type", "latent")) {
    out.notes.push_back("the entry point has no latent-output flag: its run includes the VAE decode");
  }

  std::vector<std::string> par;
  auto degree = [&](XditMethod m, int d) {
    if (d <= 1) return;
    par.push_back(*x.flag(XditMethodKey(m)));
    par.push_back(std::to_string(d));
  };
  degree(XditMethod::kUlysses, config.ulysses);
  degree(XditMethod::kRing, config.ring);
  if (config.pipefusion > 1) {
    degree(XditMethod::kPipeFusion, config.pipefusion);
    // Entry points without these flags run the defaults CheckXditRuns insists on.
    if (const std::string* f = x.flag("patches")) par.insert(par.end(), {*f, std::to_string(config.patches)});
    if (const std::string* f = x.flag("warmup")) {
      par.insert(par.end(), {*f, std::to_string(std::min(config.warmup, workload.steps))});
    }
  }
  if (config.cfg == 2) par.push_back(*x.flag(XditMethodKey(XditMethod::kCfg)));
  degree(XditMethod::kTp, config.tp);
  degree(XditMethod::kDp, config.dp);
  degree(XditMethod::kFullyShard, config.fsdp);
  auto option = [&](XditMethod m, bool wanted) {
    if (!wanted) return;
    if (!x.runs(m)) {
      out.notes.push_back(fmt::format("{} is not run for {} ({}): left out", XditMethodPhrase(m), model.id,
                                      x.method(m).source));
      return;
    }
    par.push_back(*x.flag(XditMethodKey(m)));
  };
  option(XditMethod::kTorchCompile, options.torch_compile);
  option(XditMethod::kCpuOffload, config.offload != 0);
  option(XditMethod::kParallelVae, options.parallel_vae && config.world_size() > 1);

  for (const auto& w : par) out.parallel_flags += (out.parallel_flags.empty() ? "" : " ") + w;
  out.appended = words;
  out.appended.insert(out.appended.end(), par.begin(), par.end());
  out.command = cmd;
  for (const auto& w : words) out.command += " " + w;
  if (!out.parallel_flags.empty()) out.command += " " + out.parallel_flags;
  return out;
}

}  // namespace ditune
