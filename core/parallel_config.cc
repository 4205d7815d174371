#include "core/parallel_config.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/enum_names.h"
#include "core/text.h"

namespace ditune {
constexpr EnumName<TextEncoderPlacement> kTextEncoderPlacements[] = {
    {TextEncoderPlacement::kWhole, "whole"},
    {TextEncoderPlacement::kParallel, "parallel"},
    {TextEncoderPlacement::kFsdp, "fsdp"},
    {TextEncoderPlacement::kCpu, "cpu"},
};
constexpr EnumName<VaePlacement> kVaePlacements[] = {
    {VaePlacement::kWhole, "whole"},
    {VaePlacement::kTiled, "tiled"},
    {VaePlacement::kParallel, "parallel"},
    {VaePlacement::kCpu, "cpu"},
};

constexpr EnumName<ControlNetPlacement> kControlNetPlacements[] = {
    {ControlNetPlacement::kWhole, "whole"},
    {ControlNetPlacement::kParallel, "parallel"},
};

std::string_view TextEncoderPlacementName(TextEncoderPlacement p) { return NameIn(kTextEncoderPlacements, p); }
std::string_view ControlNetPlacementName(ControlNetPlacement p) { return NameIn(kControlNetPlacements, p); }
std::string_view VaePlacementName(VaePlacement p) { return NameIn(kVaePlacements, p); }

namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::optional<int> ParseInt(std::string_view s) {
  s = Trim(s);
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

constexpr const char* kKeys =
    "ulysses, ring, pipefusion, patches, warmup, cfg, dp, tp, distrifusion, fsdp, offload (0 or 1), compile (0 or 1), eager (0 or 1), "
    "te (whole, parallel, fsdp or cpu), vae (whole, tiled, parallel or cpu; vae_tiling=1 is vae=tiled), controlnet (whole or "
    "parallel), order";
constexpr const char* kXditFlags =
    "xDiT's --ulysses_degree, --ring_degree, --pipefusion_parallel_degree, --num_pipeline_patch, "
    "--warmup_steps, --use_cfg_parallel, --data_parallel_degree, --tensor_parallel_degree, --fully_shard_degree, "
    "--enable_model_cpu_offload, --use_torch_compile, --use_parallel_vae; Wan's --ulysses_size, --ring_size, "
    "--dit_fsdp, --t5_fsdp, --t5_cpu, --offload_model True|False; HunyuanVideo's --vae-tiling; SGLang's and HunyuanVideo's --ulysses-degree, --ring-degree, --tp-size, "
    "--enable-cfg-parallel, --use-fsdp-inference, --dit-cpu-offload, --use-cpu-offload, --enable-torch-compile; "
    "vLLM-Omni's --usp, --cfg-parallel-size 2, --tensor-parallel-size, --use-hsdp, --enable-cpu-offload, --enforce-eager; "
    "cache-dit's --parallel-controlnet";

struct Fields {
  ParallelConfig config;
  bool patches_given = false;
  bool fsdp_all = false;  // a sharding switch without a degree: over every rank
};

// Sets one integer field by its ditune key; `shown` names it in messages.
Status SetField(Fields* f, std::string_view key, std::string_view value, std::string_view shown) {
  struct Entry {
    const char* key;
    int ParallelConfig::*field;
    int min;
  };
  static constexpr Entry kEntries[] = {
      {"ulysses", &ParallelConfig::ulysses, 1}, {"ring", &ParallelConfig::ring, 1},
      {"pipefusion", &ParallelConfig::pipefusion, 1}, {"patches", &ParallelConfig::patches, 1},
      {"warmup", &ParallelConfig::warmup, 0}, {"cfg", &ParallelConfig::cfg, 1},
      {"dp", &ParallelConfig::dp, 1}, {"tp", &ParallelConfig::tp, 1},
      {"distrifusion", &ParallelConfig::distrifusion, 1}, {"fsdp", &ParallelConfig::fsdp, 1},
      {"offload", &ParallelConfig::offload, 0}, {"compile", &ParallelConfig::compile, 0},
      {"eager", &ParallelConfig::eager, 0},
  };
  for (const auto& e : kEntries) {
    if (key != e.key) continue;
    std::optional<int> v = ParseInt(value);
    if (!v || *v < e.min || *v > 1 << 20) {
      return Status::InvalidArgument(fmt::format("{}: '{}' is not an integer >= {}", shown,
                                                 Trim(value), e.min));
    }
    if ((key == "offload" || key == "compile" || key == "eager") && *v > 1) {
      return Status::InvalidArgument(fmt::format("{}: '{}' is 0 (off) or 1 (on)", shown, Trim(value)));
    }
    f->config.*e.field = *v;
    if (key == "patches") f->patches_given = true;
    return Status::Ok();
  }
  return Status::InvalidArgument(fmt::format("unknown config key '{}'; valid keys: {}", key, kKeys));
}

Status ParseDitune(std::string_view text, Fields* f) {
  if (text.empty()) return Status::Ok();  // one device
  std::vector<std::string_view> seen;
  for (std::string_view item : Split(text, ',')) {
    item = Trim(item);
    if (item.empty()) {
      return Status::InvalidArgument(fmt::format(
          "an empty item between commas; write key=value items separated by single commas, e.g. ulysses=2,ring=2 "
          "(valid keys: {}; \"\" is one device)",
          kKeys));
    }
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument(
          fmt::format("config item '{}' is not key=value; valid keys: {}", item, kKeys));
    }
    std::string_view key = Trim(item.substr(0, eq));
    std::string_view value = Trim(item.substr(eq + 1));
    for (std::string_view k : seen) {
      if (k == key) return Status::InvalidArgument(fmt::format("'{}' is given twice; give each key once", key));
    }
    seen.push_back(key);
    if (key == "order") {
      DITUNE_ASSIGN_OR_RETURN(f->config.order, ParseRankOrder(value));
      continue;
    }
    if (key == "te") {
      DITUNE_ASSIGN_OR_RETURN(f->config.te, ParseIn(kTextEncoderPlacements, value, "te"));
      continue;
    }
    if (key == "vae") {
      DITUNE_ASSIGN_OR_RETURN(f->config.vae, ParseIn(kVaePlacements, value, "vae"));
      continue;
    }
    if (key == "controlnet") {
      DITUNE_ASSIGN_OR_RETURN(f->config.controlnet, ParseIn(kControlNetPlacements, value, "controlnet"));
      continue;
    }
    if (key == "vae_tiling") {
      if (value != "0" && value != "1") {
        return Status::InvalidArgument(fmt::format("vae_tiling: '{}' is 0 (off) or 1 (on: vae=tiled)", value));
      }
      for (std::string_view k : seen) {
        if (k == "vae") return Status::InvalidArgument("give vae=... or vae_tiling=..., not both");
      }
      seen.push_back("vae");
      f->config.vae = value == "1" ? VaePlacement::kTiled : VaePlacement::kWhole;
      continue;
    }
    DITUNE_RETURN_IF_ERROR(SetField(f, key, value, key));
  }
  return Status::Ok();
}

Status ParseXdit(std::string_view text, Fields* f) {
  std::vector<std::string_view> tokens;
  for (std::string_view t : Split(text, ' ')) {
    t = Trim(t);
    if (!t.empty()) tokens.push_back(t);
  }
  // Flags that take a degree, in every runtime's spelling.
  static constexpr std::pair<const char*, const char*> kFlagToKey[] = {
      {"--ulysses_degree", "ulysses"},  // xDiT
      {"--ring_degree", "ring"},
      {"--pipefusion_parallel_degree", "pipefusion"},
      {"--num_pipeline_patch", "patches"},
      {"--warmup_steps", "warmup"},
      {"--data_parallel_degree", "dp"},
      {"--tensor_parallel_degree", "tp"},
      {"--fully_shard_degree", "fsdp"},
      {"--ulysses_size", "ulysses"},  // Wan's generate.py
      {"--ring_size", "ring"},
      {"--ulysses-degree", "ulysses"},  // SGLang, HunyuanVideo's sample_video.py, vLLM-Omni
      {"--ring-degree", "ring"},
      {"--tp-size", "tp"},  // SGLang
      {"--usp", "ulysses"},  // vLLM-Omni
      {"--tensor-parallel-size", "tp"},
      {"--cfg-parallel-size", "cfg"},
  };
  // Switches: a flag alone turns the setting on.
  static constexpr std::pair<const char*, const char*> kSwitchToKey[] = {
      {"--use_cfg_parallel", "cfg"},             {"--enable-cfg-parallel", "cfg"},
      {"--enable_model_cpu_offload", "offload"}, {"--use-cpu-offload", "offload"},
      {"--enable-cpu-offload", "offload"},       {"--use_torch_compile", "compile"},
      {"--enable-torch-compile", "compile"},     {"--dit_fsdp", "fsdp"},
      {"--t5_fsdp", "te_fsdp"},                  {"--use-hsdp", "fsdp"},
      {"--parallel-text-encoder", "te"},         {"--parallel-text", "te"},
      {"--t5_cpu", "te_cpu"},                    {"--use_parallel_vae", "vae_parallel"},
      {"--vae-tiling", "vae_tiled"},             {"--enforce-eager", "eager"},
      {"--parallel-controlnet", "controlnet"},
  };
  // Settings given as a boolean value (Wan's --offload_model True, SGLang's
  // --use-fsdp-inference true).
  static constexpr std::pair<const char*, const char*> kBoolToKey[] = {
      {"--offload_model", "offload"},
      {"--use-fsdp-inference", "fsdp"},
      {"--dit-cpu-offload", "offload"},
  };
  auto turn_on = [&](std::string_view key, bool on) {
    if (key == "cfg") f->config.cfg = on ? 2 : 1;
    if (key == "offload") f->config.offload = on ? 1 : 0;
    if (key == "compile") f->config.compile = on ? 1 : 0;
    if (key == "eager") f->config.eager = on ? 1 : 0;
    if (key == "fsdp") f->fsdp_all = on;
    if (key == "te") f->config.te = on ? TextEncoderPlacement::kParallel : TextEncoderPlacement::kWhole;
    if (key == "te_fsdp") f->config.te = on ? TextEncoderPlacement::kFsdp : TextEncoderPlacement::kWhole;
    if (key == "te_cpu") f->config.te = on ? TextEncoderPlacement::kCpu : TextEncoderPlacement::kWhole;
    if (key == "vae_parallel") f->config.vae = on ? VaePlacement::kParallel : VaePlacement::kWhole;
    if (key == "vae_tiled") f->config.vae = on ? VaePlacement::kTiled : VaePlacement::kWhole;
    if (key == "controlnet") f->config.controlnet = on ? ControlNetPlacement::kParallel : ControlNetPlacement::kWhole;
  };
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string_view flag = tokens[i];
    std::optional<std::string_view> inline_value;
    if (size_t eq = flag.find('='); eq != std::string_view::npos) {
      inline_value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    bool handled = false;
    for (const auto& [fl, k] : kSwitchToKey) {
      if (flag != fl) continue;
      if (inline_value) return Status::InvalidArgument(fmt::format("{} is a switch and takes no value", flag));
      turn_on(k, true);
      handled = true;
    }
    for (const auto& [fl, k] : kBoolToKey) {
      if (flag != fl || handled) continue;
      std::string_view value;
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < tokens.size() && tokens[i + 1].substr(0, 2) != "--") {
        value = tokens[++i];
      } else {
        value = "true";  // given alone
      }
      const std::string v = Lower(value);
      if (v != "true" && v != "false") {
        return Status::InvalidArgument(fmt::format("{} takes True or False, not '{}'", flag, value));
      }
      turn_on(k, v == "true");
      handled = true;
    }
    if (handled) continue;
    if (flag == "--num-gpus" || flag == "--sp-degree") {
      return Status::InvalidArgument(fmt::format(
          "{} is not a parallel setting ditune reads from a config: give the GPU count with --gpus and the degrees "
          "with --ulysses-degree/--ring-degree",
          flag));
    }
    const char* key = nullptr;
    for (const auto& [fl, k] : kFlagToKey) {
      if (flag == fl) key = k;
    }
    if (key == nullptr) {
      return Status::InvalidArgument(
          fmt::format("unknown flag '{}'; valid flags: {}", flag, kXditFlags));
    }
    std::string_view value;
    if (inline_value) {
      value = *inline_value;
    } else {
      if (i + 1 >= tokens.size()) {
        return Status::InvalidArgument(fmt::format("flag {} needs a value", flag));
      }
      value = tokens[++i];
    }
    if (std::string_view(key) == "cfg") {
      // --cfg-parallel-size takes 1 or 2.
      if (value != "1" && value != "2") {
        return Status::InvalidArgument(fmt::format("{} takes 1 or 2, not '{}'", flag, value));
      }
    }
    DITUNE_RETURN_IF_ERROR(SetField(f, key, value, flag));
  }
  // A sharding switch shards the weights over every rank.
  if (f->fsdp_all) f->config.fsdp = f->config.world_size();
  return Status::Ok();
}

}  // namespace

constexpr EnumName<OrderDim> kOrderDimNames[] = {
    {OrderDim::kTp, "tp"},
    {OrderDim::kSp, "sp"},
    {OrderDim::kPp, "pp"},
    {OrderDim::kCfg, "cfg"},
    {OrderDim::kDp, "dp"},
};

std::string_view OrderDimName(OrderDim d) { return NameIn(kOrderDimNames, d); }

std::string RankOrderToString(const RankOrder& order) {
  std::string s;
  for (OrderDim d : order) {
    if (!s.empty()) s += '-';
    s += OrderDimName(d);
  }
  return s;
}

StatusOr<RankOrder> ParseRankOrder(std::string_view text) {
  std::vector<std::string_view> parts = Split(text, '-');
  auto bad = [&]() {
    return Status::InvalidArgument(fmt::format(
        "order '{}' must name tp, sp, pp, cfg and dp once each, fastest-varying first, "
        "e.g. tp-sp-pp-cfg-dp",
        text));
  };
  if (parts.size() != kNumOrderDims) return bad();
  RankOrder order{};
  bool seen[kNumOrderDims] = {};
  for (size_t i = 0; i < parts.size(); ++i) {
    std::optional<OrderDim> d;
    for (OrderDim c : kDefaultRankOrder) {
      if (OrderDimName(c) == Trim(parts[i])) d = c;
    }
    if (!d || seen[static_cast<int>(*d)]) return bad();
    seen[static_cast<int>(*d)] = true;
    order[i] = *d;
  }
  return order;
}

int ParallelConfig::degree(OrderDim d) const {
  switch (d) {
    case OrderDim::kTp: return tp;
    case OrderDim::kSp: return sp() * distrifusion;
    case OrderDim::kPp: return pipefusion;
    case OrderDim::kCfg: return cfg;
    case OrderDim::kDp: return dp;
  }
  return 1;
}

StatusOr<ParallelConfig> ParseParallelConfig(std::string_view text) {
  Fields f;
  std::string_view t = Trim(text);
  Status st = t.substr(0, 2) == "--" ? ParseXdit(t, &f) : ParseDitune(t, &f);
  if (!st.ok()) return st.WithContext(fmt::format("config '{}'", t));
  if (!f.patches_given) f.config.patches = f.config.pipefusion;
  // The degrees multiply to the device count: bound the product, in 64 bits, so that no
  // later product or division by it overflows.
  const ParallelConfig& c = f.config;
  int64_t product = 1;
  for (int d : {c.ulysses, c.ring, c.pipefusion, c.cfg, c.dp, c.tp, c.distrifusion}) {
    product *= d;
    if (product > kMaxWorldSize) {
      return Status::InvalidArgument(fmt::format(
          "config '{}': the degrees multiply to more than {} devices; give degrees whose product is the GPU count",
          t, kMaxWorldSize));
    }
  }
  if (static_cast<int64_t>(c.patches) * c.sp() > kMaxWorldSize) {
    return Status::InvalidArgument(
        fmt::format("config '{}': patches x ulysses x ring exceeds {}", t, kMaxWorldSize));
  }
  return f.config;
}

std::string ToString(const ParallelConfig& c) {
  std::vector<std::string> items;
  auto add = [&](const char* key, int v, int def) {
    if (v != def) items.push_back(fmt::format("{}={}", key, v));
  };
  add("ulysses", c.ulysses, 1);
  add("ring", c.ring, 1);
  add("pipefusion", c.pipefusion, 1);
  add("patches", c.patches, c.pipefusion);
  add("warmup", c.warmup, 1);
  add("cfg", c.cfg, 1);
  add("dp", c.dp, 1);
  add("tp", c.tp, 1);
  add("distrifusion", c.distrifusion, 1);
  add("fsdp", c.fsdp, 1);
  add("offload", c.offload, 0);
  add("compile", c.compile, 0);
  add("eager", c.eager, 0);
  if (c.te != TextEncoderPlacement::kWhole) items.push_back(fmt::format("te={}", TextEncoderPlacementName(c.te)));
  if (c.vae != VaePlacement::kWhole) items.push_back(fmt::format("vae={}", VaePlacementName(c.vae)));
  if (c.controlnet != ControlNetPlacement::kWhole) {
    items.push_back(fmt::format("controlnet={}", ControlNetPlacementName(c.controlnet)));
  }
  if (c.order != kDefaultRankOrder) items.push_back("order=" + RankOrderToString(c.order));
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ",") + i;
  return s;
}

std::string Label(const ParallelConfig& c) {
  std::string s = ToString(c);
  return s.empty() ? "1 device" : s;
}

Status SupportedByXdit(const ParallelConfig& c) {
  if (c.distrifusion > 1) {
    return Status::NotSupported("xDiT has no flag for DistriFusion; run it with ditune's executor");
  }
  if (c.order != kDefaultRankOrder) {
    return Status::NotSupported(fmt::format(
        "xDiT always uses the rank order tp-sp-pp-cfg-dp; this plan uses {}: launch it with "
        "ditune's executor or remap the ranks (CUDA_VISIBLE_DEVICES)",
        RankOrderToString(c.order)));
  }
  if (c.cfg > 2) return Status::NotSupported("xDiT's CFG parallel degree is 1 or 2");
  return Status::Ok();
}

std::string ToXditFlags(const ParallelConfig& c) {
  std::string s = fmt::format("--ulysses_degree {} --ring_degree {}", c.ulysses, c.ring);
  s += fmt::format(" --pipefusion_parallel_degree {}", c.pipefusion);
  if (c.pipefusion > 1 || c.patches != c.pipefusion) {
    s += fmt::format(" --num_pipeline_patch {}", c.patches);
  }
  if (c.pipefusion > 1 || c.warmup != 1) s += fmt::format(" --warmup_steps {}", c.warmup);
  if (c.cfg == 2) s += " --use_cfg_parallel";
  if (c.dp != 1) s += fmt::format(" --data_parallel_degree {}", c.dp);
  if (c.tp != 1) s += fmt::format(" --tensor_parallel_degree {}", c.tp);
  if (c.fsdp != 1) s += fmt::format(" --fully_shard_degree {}", c.fsdp);
  if (c.offload != 0) s += " --enable_model_cpu_offload";
  if (c.compile != 0) s += " --use_torch_compile";
  if (c.vae == VaePlacement::kParallel) s += " --use_parallel_vae";
  return s;
}

}  // namespace ditune
