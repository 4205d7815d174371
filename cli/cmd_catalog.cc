// `ditune models` and `ditune hardware`: the shipped catalogs as tables or JSON.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "core/workload.h"
#include "costmodels/dit_ops.h"

#include "cli/cli_common.h"
#include "cli/commands.h"

namespace ditune::cli {
namespace {

std::string BlocksText(const ModelSpec& m) {
  if (m.blocks.size() > 4) {
    // Interleaved families (Latte): the count per family.
    std::string s;
    for (BlockFamily f : kAllBlockFamilies) {
      if (m.num_blocks(f) > 0) s += fmt::format("{}{} {}", s.empty() ? "" : " + ", m.num_blocks(f), BlockFamilyName(f));
    }
    return s + ", interleaved";
  }
  std::string s;
  for (const auto& g : m.blocks) {
    s += fmt::format("{}{} {}", s.empty() ? "" : " + ", g.count, BlockFamilyName(g.family));
  }
  return s;
}

// The methods xDiT runs for the model, short: "ulysses ring pipefusion cfg".
std::string XditText(const ModelSpec& m) {
  const RuntimeSupport* x = m.runtime("xdit");
  if (x == nullptr) return "-";
  std::string s;
  for (RuntimeMethod r : {RuntimeMethod::kUlysses, RuntimeMethod::kRing, RuntimeMethod::kPipeFusion, RuntimeMethod::kCfg,
                       RuntimeMethod::kTp, RuntimeMethod::kDp}) {
    if (x->runs(r)) s += fmt::format("{}{}", s.empty() ? "" : " ", RuntimeMethodKey(r));
  }
  return s;
}

// The runtimes other than xDiT that run the model: "sglang wan-generate".
std::string OtherRuntimesText(const ModelSpec& m) {
  std::string s;
  for (const auto& [id, support] : m.runtimes) {
    if (id != "xdit") s += fmt::format("{}{}", s.empty() ? "" : " ", id);
  }
  return s.empty() ? "-" : s;
}

nlohmann::json SupportJson(const RuntimeSupport* support) {
  if (support == nullptr) return nullptr;
  const RuntimeSupport& x = *support;
  nlohmann::json methods = nlohmann::json::object();
  for (int i = 0; i < kNumRuntimeMethods; ++i) {
    const auto key = std::string(RuntimeMethodKey(static_cast<RuntimeMethod>(i)));
    methods[key] = {{"runs", x.methods[i].runs}, {"source", x.methods[i].source}};
  }
  nlohmann::json constraints = nlohmann::json::array();
  for (const auto& c : x.constraints) constraints.push_back({{"rule", c.rule}, {"source", c.source}});
  return {{"command", x.command}, {"command_source", x.command_source}, {"model_arg", x.model_arg},
          {"flags", x.flags}, {"flags_source", x.flags_source}, {"methods", methods},
          {"sequence_split", {{"unit", SequenceSplitUnitName(x.split)}, {"source", x.split_source}}},
          {"constraints", constraints}};
}

std::string Compact(double v) { return fmt::format("{:.3g}", v); }

}  // namespace

int RunModels(int argc, char** argv) {
  cxxopts::Options options("ditune models", "The DiT models ditune knows");
  options.add_options()("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("models", args.status());
  if (help) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("models", catalog.status());

  if (args->count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : (*catalog)->models()) {
      nlohmann::json blocks = nlohmann::json::array();
      for (const auto& g : m.blocks) blocks.push_back({{"family", BlockFamilyName(g.family)}, {"count", g.count}});
      // The token counts at the default size (what a profile of the model's ops times).
      const Workload at_default{m.id, m.default_height, m.default_width, m.default_frames, m.default_steps, 1,
                                OutputType::kDecoded};
      nlohmann::json tokens = nullptr;
      if (auto t = ComputeTokenGeometry(m, at_default); t.ok()) {
        tokens = {{"image", t->image_tokens()}, {"text", t->text_tokens}};
      }
      out.push_back({{"id", m.id}, {"name", m.name}, {"modality", m.modality == Modality::kVideo ? "video" : "image"},
                     {"blocks", blocks}, {"hidden", m.hidden}, {"heads", m.heads}, {"head_dim", m.head_dim},
                     {"mlp_hidden", m.mlp_hidden}, {"mlp_gated", m.mlp_gated}, {"text_tokens", m.text_tokens},
                     {"default_tokens", tokens},
                     {"patch", {{"spatial", m.patch_spatial}, {"temporal", m.patch_temporal}}},
                     {"latent_channels", m.latent_channels},
                     {"vae", {{"spatial", m.vae_spatial}, {"temporal", m.vae_temporal}}},
                     {"uses_cfg", m.uses_cfg}, {"guidance_branches", m.GuidanceBranches()}, {"attention", m.attention == AttentionKind::kLinear ? "linear" : "softmax"},
                     {"published_params", m.published_params}, {"default_steps", m.default_steps},
                     {"default_resolution", {{"height", m.default_height}, {"width", m.default_width}, {"frames", m.default_frames}}},
                     {"source", m.source}, {"notes", m.notes}, {"xdit", SupportJson(m.runtime("xdit"))}});
      nlohmann::json runtimes = nlohmann::json::object();
      for (const auto& [id, support] : m.runtimes) runtimes[id] = SupportJson(&support);
      out.back()["runtimes"] = runtimes;
      if (!m.eager_host_ops.source.empty()) {
        nlohmann::json host = {{"source", m.eager_host_ops.source}};
        for (BlockFamily f : kAllBlockFamilies) {
          if (m.eager_host_ops.Of(f) > 0) host[std::string(BlockFamilyName(f))] = m.eager_host_ops.Of(f);
        }
        out.back()["eager_host_ops"] = host;
      }
      if (m.shared_modulation) out.back()["shared_modulation"] = true;
      // What the decode is priced with: the decoder's size and work, and the maps its peak
      // holds (the model file's, or VaeDecodeMemory's default: diffusers' 2-D Decoder).
      {
        const VaeDecodeMemory& d = m.vae_decode_memory;
        nlohmann::json memory = {{"full_res_channels", d.full_res_channels},
                                 {"live_maps", d.live_maps},
                                 {"frames_at_once", d.frames_at_once},
                                 {"tile_pixels", d.tile_pixels},
                                 {"tile_overlap", d.tile_overlap},
                                 {"tile_frames", d.tile_frames},
                                 {"source", d.source.empty() ? "default: diffusers' 2-D Decoder (core/model_spec.h)" : d.source}};
        if (d.cache_frames > 0) memory["cache_frames"] = d.cache_frames;
        nlohmann::json& vae = out.back()["vae"];
        vae["decoder_params"] = m.vae_decoder_params;
        vae["encoder_params"] = m.vae_encoder_params;
        vae["decoder_flops_per_pixel"] = m.vae_decoder_flops_per_pixel;
        vae["decode_memory"] = memory;
      }
      if (!m.step_host_ops.source.empty()) {
        out.back()["step_host_ops"] = {{"outside", m.step_host_ops.outside},
                                       {"scheduler", m.step_host_ops.scheduler},
                                       {"source", m.step_host_ops.source}};
      }
      if (m.control.blocks > 0) {
        out.back()["control"] = {{"family", BlockFamilyName(m.control.family)}, {"blocks", m.control.blocks},
                                 {"hints", m.control.hints},           {"gathers", m.control.gathers},
                                 {"params", m.control.params},         {"source", m.control.source}};
      }
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : (*catalog)->models()) {
    rows.push_back({m.id, BlocksText(m), fmt::format("{} = {}x{}", m.hidden, m.heads, m.head_dim),
                    std::to_string(m.mlp_hidden), std::to_string(m.text_tokens),
                    m.uses_cfg ? (m.GuidanceBranches() == 2 ? "yes" : fmt::format("yes ({} branches)", m.GuidanceBranches())) : "no",
                    m.published_params > 0 ? Compact(m.published_params / 1e9) : Compact(DitParams(m) / 1e9) + " (shapes)",
                    fmt::format("{}x{}{}", m.default_height, m.default_width,
                                m.modality == Modality::kVideo ? fmt::format("x{}", m.default_frames) : ""),
                    std::to_string(m.default_steps), XditText(m), OtherRuntimesText(m)});
  }
  std::cout << FormatTable({"id", "blocks", "hidden = heads x dim", "mlp", "text", "cfg",
                            "params (B)", "default size", "steps", "xDiT runs", "other runtimes"},
                           rows);
  std::cout << "\nsources and xDiT's entry points with theirs: ditune models --json\n";
  return 0;
}

namespace {

// A GPU or link file to fill in: the shipped file of `like` with its identity and sources
// replaced by what the user must write; its figures stay, so that it loads as it is printed.
StatusOr<std::string> HardwareTemplate(const Catalog& c, const std::string& kind, const std::string& like_in) {
  if (kind != "gpu" && kind != "link") {
    return Status::InvalidArgument(fmt::format("--template '{}': give gpu or link", kind));
  }
  const std::string like = !like_in.empty() ? like_in : kind == "gpu" ? "l40s-48gb" : "pcie4";
  if (kind == "gpu") {
    DITUNE_RETURN_IF_ERROR(c.Gpu(like).status());
  } else {
    DITUNE_RETURN_IF_ERROR(c.Link(like).status());
  }
  std::string path = c.UserFileOf(kind, like);
  if (path.empty()) {
    path = (c.data_dir() / "hardware" / (kind == "gpu" ? "gpus" : "links") / (like + ".json")).string();
  }
  DITUNE_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  const std::string id = kind == "gpu" ? "my-gpu" : "my-link";
  j["id"] = id;
  j["name"] = fmt::format("FILL IN: the {}'s name (these figures are {}'s: replace each)", kind, like);
  j["source"] = "FILL IN: where each figure comes from (datasheet, nvidia-smi output, nccl-tests run)";
  j["notes"] = fmt::format("Save as DIR/hardware/{}/{}.json (the file name is the id) and pass --catalog DIR.",
                           kind == "gpu" ? "gpus" : "links", id);
  if (kind == "gpu") {
    j["device_names"] = nlohmann::json::array({"FILL IN: the name nvidia-smi prints"});
    j.erase("memory_total_mib");
    j.erase("memory_total_source");
  }
  return j.dump(2) + "\n";
}

}  // namespace

int RunHardware(int argc, char** argv) {
  cxxopts::Options options("ditune hardware",
                           "The GPUs and links ditune knows. A GPU or link of your own goes in a user catalog: "
                           "`ditune hardware --template gpu > DIR/hardware/gpus/my-gpu.json`, fill it in, then "
                           "--catalog DIR (or DITUNE_CATALOG=DIR) on any command");
  options.add_options()("json", "one JSON document on stdout")(
      "template", "print a file to fill in: gpu or link", cxxopts::value<std::string>())(
      "like", "the shipped entry whose figures the template starts from (default: l40s-48gb / pcie4)",
      cxxopts::value<std::string>());
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("hardware", args.status());
  if (help) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("hardware", catalog.status());
  const Catalog& c = **catalog;
  if (args->count("template")) {
    auto text = HardwareTemplate(c, (*args)["template"].as<std::string>(),
                                 args->count("like") ? (*args)["like"].as<std::string>() : "");
    if (!text.ok()) return Fail("hardware", text.status());
    std::cout << *text;
    return 0;
  }
  if (args->count("like")) return Fail("hardware", Status::InvalidArgument("--like goes with --template gpu|link"));

  if (args->count("json")) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : c.gpus()) {
      gpus.push_back({{"id", g.id}, {"name", g.name}, {"kind", g.is_cpu ? "cpu" : "gpu"},
                      {"bf16_tflops", g.bf16_peak.value() / 1e12},
                      {"fp16_fp32acc_tflops", g.fp16_fp32acc_peak.value() / 1e12},
                      {"fp32_tflops", g.fp32_peak.value() / 1e12},
                      {"memory_bandwidth_gbps", g.memory_bandwidth.value() / 1e9},
                      {"host_link_gbps", g.host_link.value() / 1e9},
                      {"memory_gb", g.memory.value() / 1e9}, {"default_intra", g.default_intra},
                      {"source", g.source}, {"notes", g.notes}, {"user_file", c.UserFileOf("gpu", g.id)}});
    }
    nlohmann::json links = nlohmann::json::array();
    for (const auto& l : c.links()) {
      links.push_back({{"id", l.id}, {"name", l.name}, {"scope", l.scope == LinkScope::kInter ? "inter" : "intra"},
                       {"topology", LinkTopologyName(l.topology)}, {"line_gbps", l.line.value() / 1e9},
                       {"busbw_gbps", l.busbw.value() / 1e9}, {"p2p_gbps", l.p2p.value() / 1e9},
                       {"latency_us", l.latency.value() * 1e6}, {"cross_socket_gbps", l.cross_socket.value() / 1e9},
                       {"gpus_per_switch", l.gpus_per_switch}, {"source", l.source}, {"notes", l.notes},
                       {"user_file", c.UserFileOf("link", l.id)}});
    }
    std::cout << nlohmann::json{{"gpus", gpus}, {"links", links}, {"user_catalog", c.user_entries()}}.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : c.gpus()) {
    rows.push_back({g.id, Compact(g.bf16_peak.value() / 1e12), Compact(g.fp16_fp32acc_peak.value() / 1e12),
                    Compact(g.fp32_peak.value() / 1e12), Compact(g.memory_bandwidth.value() / 1e9),
                    Compact(g.memory.value() / 1e9), g.is_cpu ? "-" : Compact(g.host_link.value() / 1e9),
                    g.default_intra});
  }
  std::cout << "GPUs\n"
            << FormatTable(
                   {"id", "bf16 TF/s", "fp16/fp32acc TF/s", "fp32 TF/s", "mem GB/s", "mem GB", "host GB/s", "intra"},
                   rows);
  rows.clear();
  for (const auto& l : c.links()) {
    rows.push_back({l.id, l.scope == LinkScope::kInter ? "inter" : "intra", std::string(LinkTopologyName(l.topology)),
                    Compact(l.line.value() / 1e9), Compact(l.busbw.value() / 1e9), Compact(l.p2p.value() / 1e9),
                    l.cross_socket.value() > 0 ? Compact(l.cross_socket.value() / 1e9) : "-",
                    l.gpus_per_switch > 0 ? std::to_string(l.gpus_per_switch) : "-", Compact(l.latency.value() * 1e6)});
  }
  std::cout << "\nLinks (GB/s per direction)\n"
            << FormatTable({"id", "scope", "topology", "line", "busbw", "p2p", "cross-socket", "GPUs/switch", "latency us"},
                           rows);
  if (!c.user_entries().empty()) {
    std::cout << "\nfrom your catalog (--catalog / DITUNE_CATALOG):\n";
    for (const auto& e : c.user_entries()) std::cout << "  " << e << "\n";
  }
  std::cout << "\nthe source of every figure, and notes: ditune hardware --json; your own GPU or link: ditune hardware "
               "--help\n";
  return 0;
}

}  // namespace ditune::cli

namespace ditune::cli {

int RunRuntimes(int argc, char** argv) {
  cxxopts::Options options("ditune runtimes", "The runtimes ditune prices and launches, and the models each runs");
  options.add_options()("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("runtimes", args.status());
  if (help) return 0;
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("runtimes", catalog.status());
  const Catalog& c = **catalog;
  auto models_of = [&](const RuntimeSpec& r) {
    std::vector<std::string> ids;
    for (const auto& m : c.models()) {
      if (r.engine ? ExecutorRunsModel(m).ok() : m.runtime(r.id) != nullptr) ids.push_back(m.id);
    }
    return ids;
  };
  if (args->count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : c.runtimes()) {
      out.push_back({{"id", r.id}, {"name", r.name}, {"summary", r.summary}, {"source", r.source},
                     {"engine", r.engine}, {"compiled_by_default", r.compiled_by_default},
                     {"compiled_source", r.compiled_source}, {"models", models_of(r)}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : c.runtimes()) {
    const std::vector<std::string> ids = models_of(r);
    rows.push_back({r.id, r.name, r.engine ? "engine" : (r.compiled_by_default ? "compiled" : "eager"),
                    std::to_string(ids.size()), r.summary});
  }
  std::cout << FormatTable({"id", "name", "runs", "models", "what it is"}, rows);
  std::cout << "\n`ditune models --json` lists each model's entry per runtime (methods, flags, sources).\n";
  return 0;
}

}  // namespace ditune::cli
