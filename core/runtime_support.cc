#include "core/runtime_support.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/enum_names.h"
#include "core/json_fields.h"

namespace ditune {
namespace {

constexpr RuntimeMethod kAllMethods[kNumRuntimeMethods] = {
    RuntimeMethod::kUlysses,     RuntimeMethod::kRing,       RuntimeMethod::kPipeFusion,   RuntimeMethod::kCfg,
    RuntimeMethod::kTp,          RuntimeMethod::kDp,         RuntimeMethod::kDistriFusion, RuntimeMethod::kParallelVae,
    RuntimeMethod::kFullyShard,  RuntimeMethod::kTorchCompile, RuntimeMethod::kFp8Gemms,   RuntimeMethod::kCpuOffload,
    RuntimeMethod::kTextEncoderParallel, RuntimeMethod::kTextEncoderFsdp, RuntimeMethod::kTextEncoderCpu,
    RuntimeMethod::kVaeTiling,   RuntimeMethod::kControlNetParallel, RuntimeMethod::kVaeCpu,
};

// Workload keys a flag may set besides the methods.
constexpr const char* kWorkloadKeys[] = {"model", "height", "width", "size", "frames", "steps", "output_type",
                                         "patches", "warmup"};

// `over` merged onto `base`: objects key by key (recursively), anything else replaced.
nlohmann::json Merged(nlohmann::json base, const nlohmann::json& over) {
  if (!base.is_object() || !over.is_object()) return over;
  for (const auto& [key, value] : over.items()) {
    base[key] = base.contains(key) ? Merged(base[key], value) : value;
  }
  return base;
}

}  // namespace

constexpr EnumName<RuntimeMethod> kRuntimeMethodKeys[] = {
    {RuntimeMethod::kUlysses, "ulysses"},
    {RuntimeMethod::kRing, "ring"},
    {RuntimeMethod::kPipeFusion, "pipefusion"},
    {RuntimeMethod::kCfg, "cfg"},
    {RuntimeMethod::kTp, "tp"},
    {RuntimeMethod::kDp, "dp"},
    {RuntimeMethod::kDistriFusion, "distrifusion"},
    {RuntimeMethod::kParallelVae, "parallel_vae"},
    {RuntimeMethod::kFullyShard, "fully_shard"},
    {RuntimeMethod::kTorchCompile, "torch_compile"},
    {RuntimeMethod::kFp8Gemms, "fp8_gemms"},
    {RuntimeMethod::kCpuOffload, "cpu_offload"},
    {RuntimeMethod::kTextEncoderParallel, "text_encoder_parallel"},
    {RuntimeMethod::kTextEncoderFsdp, "text_encoder_fsdp"},
    {RuntimeMethod::kTextEncoderCpu, "text_encoder_cpu"},
    {RuntimeMethod::kVaeTiling, "vae_tiling"},
    {RuntimeMethod::kControlNetParallel, "controlnet_parallel"},
    {RuntimeMethod::kVaeCpu, "vae_cpu"},
};

std::string_view RuntimeMethodKey(RuntimeMethod m) { return NameIn(kRuntimeMethodKeys, m); }

constexpr EnumName<RuntimeMethod> kRuntimeMethodPhrases[] = {
    {RuntimeMethod::kUlysses, "Ulysses sequence parallelism"},
    {RuntimeMethod::kRing, "Ring sequence parallelism"},
    {RuntimeMethod::kPipeFusion, "PipeFusion"},
    {RuntimeMethod::kCfg, "CFG parallelism"},
    {RuntimeMethod::kTp, "tensor parallelism"},
    {RuntimeMethod::kDp, "data parallelism"},
    {RuntimeMethod::kDistriFusion, "DistriFusion"},
    {RuntimeMethod::kParallelVae, "parallel VAE"},
    {RuntimeMethod::kFullyShard, "fully-sharded weights"},
    {RuntimeMethod::kTorchCompile, "torch.compile"},
    {RuntimeMethod::kFp8Gemms, "FP8 GEMMs"},
    {RuntimeMethod::kCpuOffload, "CPU offload"},
    {RuntimeMethod::kTextEncoderParallel, "text-encoder parallelism"},
    {RuntimeMethod::kTextEncoderFsdp, "text encoders sharded over the ranks"},
    {RuntimeMethod::kTextEncoderCpu, "text encoders on the CPU"},
    {RuntimeMethod::kVaeTiling, "tiled VAE decode"},
    {RuntimeMethod::kControlNetParallel, "ControlNet split over the sequence ranks"},
    {RuntimeMethod::kVaeCpu, "VAE decode on the CPU"},
};

std::string_view RuntimeMethodPhrase(RuntimeMethod m) { return NameIn(kRuntimeMethodPhrases, m); }

constexpr EnumName<SequenceSplitUnit> kSequenceSplitUnitNames[] = {
    {SequenceSplitUnit::kRows, "rows"},
    {SequenceSplitUnit::kTokens, "tokens"},
    {SequenceSplitUnit::kPadded, "padded"},
    {SequenceSplitUnit::kRowsOrColumns, "rows-or-columns"},
    {SequenceSplitUnit::kAllTokens, "all-tokens"},
};

std::string_view SequenceSplitUnitName(SequenceSplitUnit u) { return NameIn(kSequenceSplitUnitNames, u); }

const std::string* RuntimeSupport::flag(std::string_view key) const {
  auto it = flags.find(key);
  return it == flags.end() ? nullptr : &it->second;
}

const RuntimeConstraint* RuntimeSupport::constraint(std::string_view rule) const {
  for (const auto& c : constraints) {
    if (c.rule == rule) return &c;
  }
  return nullptr;
}

StatusOr<RuntimeSupport> ParseRuntimeSupport(const nlohmann::json& j, const std::string& origin,
                                             const std::string& runtime, const std::string& runtime_name,
                                             bool compiled_by_default) {
  JsonFields f(j, origin);
  RuntimeSupport s;
  s.runtime = runtime;
  s.runtime_name = runtime_name;
  s.command = f.String("command");
  s.command_source = f.String("command_source");
  s.flags_source = f.String("flags_source");
  if (f.Has("model_arg")) s.model_arg = f.String("model_arg");
  if (const nlohmann::json* flags = f.Object("flags")) {
    for (const auto& [key, value] : flags->items()) {
      bool known = false;
      for (const char* k : kWorkloadKeys) known |= key == k;
      for (RuntimeMethod m : kAllMethods) known |= key == RuntimeMethodKey(m);
      if (!known) {
        f.Fail(fmt::format("{}: flags: unknown key '{}'; valid: model, height, width, size, frames, steps, "
                           "output_type, patches, warmup and the method keys",
                           origin, key));
        break;
      }
      if (!value.is_string() || value.get<std::string>().rfind("--", 0) != 0) {
        f.Fail(fmt::format("{}: flags.{} must be a flag string starting with --", origin, key));
        break;
      }
      s.flags[key] = value.get<std::string>();
    }
  }
  if (const nlohmann::json* methods = f.Object("methods")) {
    JsonFields mf(*methods, origin + ": methods");
    for (RuntimeMethod m : kAllMethods) {
      if (!mf.Has(RuntimeMethodKey(m))) continue;
      const nlohmann::json* one = mf.Object(RuntimeMethodKey(m));
      if (one == nullptr) continue;
      JsonFields of(*one, fmt::format("{}: methods.{}", origin, RuntimeMethodKey(m)));
      RuntimeFact& fact = s.methods[static_cast<int>(m)];
      fact.runs = of.Bool("runs");
      fact.source = of.String("source");
      of.RejectUnknownKeys();
      if (!of.status().ok()) return of.status();
      if (fact.source.empty()) {
        return Status::InvalidArgument(
            fmt::format("{}: methods.{}.source is empty: every fact cites its source", origin, RuntimeMethodKey(m)));
      }
    }
    mf.RejectUnknownKeys();
    if (!mf.status().ok()) return mf.status();
  }
  if (const nlohmann::json* split = f.Object("sequence_split")) {
    JsonFields sf(*split, origin + ": sequence_split");
    const std::string unit = sf.Enum("unit", {"rows", "tokens", "padded", "rows-or-columns", "all-tokens"});
    s.split = unit == "tokens"            ? SequenceSplitUnit::kTokens
              : unit == "padded"          ? SequenceSplitUnit::kPadded
              : unit == "rows-or-columns" ? SequenceSplitUnit::kRowsOrColumns
              : unit == "all-tokens"      ? SequenceSplitUnit::kAllTokens
                                          : SequenceSplitUnit::kRows;
    s.split_source = sf.String("source");
    sf.RejectUnknownKeys();
    if (!sf.status().ok()) return sf.status();
  }
  if (f.Has("stage_partition")) {
    s.stages = f.Enum("stage_partition", {"ceil", "balanced"}) == "balanced" ? StagePartition::kBalanced
                                                                             : StagePartition::kCeil;
  }
  if (f.Has("tp_split")) {
    if (const nlohmann::json* tp = f.Object("tp_split")) {
      JsonFields tf(*tp, origin + ": tp_split");
      s.tp_split = tf.Enum("split", {"megatron", "cross-whole"}) == "cross-whole" ? TpSplit::kCrossWhole
                                                                                 : TpSplit::kMegatron;
      s.tp_split_source = tf.String("source");
      tf.RejectUnknownKeys();
      if (!tf.status().ok()) return tf.status();
    }
  }
  if (f.Has("constraints")) {
    if (const nlohmann::json* cons = f.Array("constraints")) {
      int i = 0;
      for (const auto& c : *cons) {
        JsonFields cf(c, fmt::format("{}: constraints[{}]", origin, i++));
        RuntimeConstraint x;
        x.rule = cf.Enum("rule", {kConstraintTpOnlyWithUlysses, kConstraintHeadsPadded, kConstraintSpIsWorld,
                                  kConstraintFsdpIsWorld, kConstraintOffloadAlone, kConstraintTpOrRingIsWorld,
                                  kConstraintSquareSize});
        x.source = cf.String("source");
        cf.RejectUnknownKeys();
        if (!cf.status().ok()) return cf.status();
        s.constraints.push_back(std::move(x));
      }
    }
  }
  if (f.Has("off_flags")) {
    if (const nlohmann::json* off = f.Object("off_flags")) {
      for (const auto& [key, value] : off->items()) {
        bool known = false;
        for (RuntimeMethod m : {RuntimeMethod::kCpuOffload, RuntimeMethod::kTorchCompile, RuntimeMethod::kParallelVae}) {
          known |= key == RuntimeMethodKey(m);
        }
        if (!known || !value.is_string() || value.get<std::string>().rfind("--", 0) != 0) {
          f.Fail(fmt::format("{}: off_flags.{}: give an option key (cpu_offload, torch_compile, parallel_vae) and a "
                             "flag string starting with --",
                             origin, key));
          break;
        }
        s.off_flags[key] = value.get<std::string>();
      }
    }
  }
  if (f.Has("off_flags_source")) s.off_flags_source = f.String("off_flags_source");
  if (f.Has("config_file")) {
    if (const nlohmann::json* cfg = f.Object("config_file")) {
      JsonFields cf(*cfg, origin + ": config_file");
      s.config_name = cf.String("name");
      s.config_format = cf.Enum("format", {"yaml", "python"});
      s.config_text = cf.String("text");
      s.config_source = cf.String("source");
      cf.RejectUnknownKeys();
      if (!cf.status().ok()) return cf.status();
      if (s.config_name.empty() || s.config_text.empty() || s.config_source.empty()) {
        return Status::InvalidArgument(
            fmt::format("{}: config_file: name, text and source must not be empty", origin));
      }
    }
  }
  if (f.Has("notes")) s.notes = f.String("notes");
  if (f.Has("memory")) {
    if (const nlohmann::json* mem = f.Object("memory")) {
      JsonFields mf(*mem, origin + ": memory");
      auto bytes = [&](const char* key, double* out) {
        if (!mf.Has(key)) return;
        const double v = mf.Number(key, 2, 4);
        if (v != 2 && v != 4) {
          mf.Fail(fmt::format("{}: memory.{} is {}: give 2 (bf16/fp16) or 4 (fp32)", origin, key, v));
          return;
        }
        *out = v;
      };
      bytes("dit_bytes_per_param", &s.memory.dit_bytes_per_param);
      bytes("fsdp_shard_bytes_per_param", &s.memory.fsdp_shard_bytes_per_param);
      bytes("vae_bytes_per_value", &s.memory.vae_bytes_per_value);
      bytes("residual_bytes", &s.memory.residual_bytes);
      s.memory.cfg_sequential = mf.OptionalBool("cfg_sequential", false);
      s.memory.vae_tiled_by_default = mf.OptionalBool("vae_tiled_by_default", false);
      s.memory.vae_parallel_by_default = mf.OptionalBool("vae_parallel_by_default", false);
      bytes("load_copy_bytes_per_param", &s.memory.load_copy_bytes_per_param);
      if (mf.Has("rope_bytes")) s.memory.rope_bytes = mf.Number("rope_bytes", 0, 8);
      s.memory.modulation_per_token = mf.OptionalBool("modulation_per_token", false);
      if (mf.Has("vae_decode")) {
        s.memory.vae_decode_first_rank = mf.Enum("vae_decode", {"every-rank", "first-rank"}) == "first-rank";
      }
      s.memory.offload_vae_stays = mf.OptionalBool("offload_vae_stays", false);
      s.memory.offload_dit_during_text = mf.OptionalBool("offload_dit_during_text", false);
      s.memory.text_encoders_layerwise = mf.OptionalBool("text_encoders_layerwise", false);
      s.memory.source = mf.String("source");
      mf.RejectUnknownKeys();
      if (!mf.status().ok()) return mf.status();
      if (s.memory.source.empty()) {
        return Status::InvalidArgument(fmt::format("{}: memory.source is empty: every fact cites its source", origin));
      }
    }
  }
  if (f.Has("fixed_frames")) {
    s.fixed_frames = static_cast<int>(f.Int("fixed_frames", 1, 1024));
    s.fixed_frames_source = f.String("fixed_frames_source");
  }
  f.RejectUnknownKeys();
  if (!f.status().ok()) return f.status();

  if (s.command.empty() || s.command_source.empty() || s.flags_source.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: command, command_source and flags_source must not be empty", origin));
  }
  for (RuntimeMethod m : {RuntimeMethod::kUlysses, RuntimeMethod::kRing, RuntimeMethod::kPipeFusion, RuntimeMethod::kCfg,
                       RuntimeMethod::kTp, RuntimeMethod::kDp, RuntimeMethod::kDistriFusion}) {
    if (s.method(m).source.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}: methods.{} is missing: every parallel method is listed with runs and its source", origin,
          RuntimeMethodKey(m)));
    }
  }
  // An option the data does not list is taken as not run, and says so.
  for (RuntimeFact& fact : s.methods) {
    if (fact.source.empty()) fact.source = fmt::format("not listed in {}: taken as not run", origin);
  }
  // A method needs a way to be asked for: its flag, its placeholder in the config file, or —
  // for one sequence-parallel method where every rank is a sequence rank — nothing at all.
  const bool sp_is_world = s.constraint(kConstraintSpIsWorld) != nullptr;
  int implied = 0;
  for (RuntimeMethod m : kAllMethods) {
    if (!s.runs(m) || m == RuntimeMethod::kDistriFusion || s.flag(RuntimeMethodKey(m)) != nullptr) continue;
    if (s.config_text.find(fmt::format("{{{}}}", RuntimeMethodKey(m))) != std::string::npos) continue;
    if (sp_is_world && (m == RuntimeMethod::kUlysses || m == RuntimeMethod::kRing) && ++implied == 1) continue;
    if (compiled_by_default && m == RuntimeMethod::kTorchCompile) continue;
    return Status::InvalidArgument(fmt::format(
        "{}: methods.{} runs but flags.{} is missing (and the config file has no {{{}}}): name the flag the entry "
        "point takes for it",
        origin, RuntimeMethodKey(m), RuntimeMethodKey(m), RuntimeMethodKey(m)));
  }
  const bool size = s.flag("size") != nullptr;
  if (size && (s.flag("size")->find("{width}") == std::string::npos ||
               s.flag("size")->find("{height}") == std::string::npos)) {
    return Status::InvalidArgument(
        fmt::format("{}: flags.size must hold {{width}} and {{height}} (e.g. \"--size {{width}}*{{height}}\")", origin));
  }
  for (const char* key : {"height", "width", "steps"}) {
    if (s.config_text.find(fmt::format("{{{}}}", key)) != std::string::npos) continue;
    if (s.flag(key) == nullptr && !(size && key[0] != 's')) {
      return Status::InvalidArgument(
          fmt::format("{}: flags.{} is missing{}", origin, key, key[0] != 's' ? " (or flags.size)" : ""));
    }
  }
  return s;
}

bool RuntimeCompiles(const RuntimeSpec* spec, const RuntimeSupport* entry, bool asked, bool eager) {
  if (spec == nullptr || entry == nullptr || eager) return false;
  return (asked || spec->compiled_by_default) && entry->runs(RuntimeMethod::kTorchCompile);
}

StatusOr<RuntimeFile> ParseRuntimeFile(const nlohmann::json& j, const std::string& origin) {
  JsonFields f(j, origin);
  RuntimeFile out;
  RuntimeSpec& r = out.spec;
  r.id = f.String("id");
  r.name = f.String("name");
  r.source = f.String("source");
  r.summary = f.String("summary");
  r.engine = f.OptionalBool("engine", false);
  r.compiled_by_default = f.OptionalBool("compiled_by_default", false);
  if (f.Has("compiled_source")) r.compiled_source = f.String("compiled_source");
  r.ring_merge_fused = f.OptionalBool("ring_merge_fused", false);
  if (f.Has("ring_merge_source")) r.ring_merge_source = f.String("ring_merge_source");
  if (f.Has("timing")) {
    if (const nlohmann::json* t = f.Object("timing")) {
      JsonFields tf(*t, origin + ": timing");
      RuntimeTiming timing;
      timing.how = tf.String("how");
      if (tf.Has("warmup_calls")) timing.warmup_calls = static_cast<int>(tf.Int("warmup_calls", 0, 100));
      if (tf.Has("text_encoding")) timing.text_encoding = tf.Bool("text_encoding") ? 1 : 0;
      if (tf.Has("vae_decode")) timing.vae_decode = tf.Bool("vae_decode") ? 1 : 0;
      timing.source = tf.String("source");
      tf.RejectUnknownKeys();
      if (!tf.status().ok()) return tf.status();
      if (timing.how.empty() || timing.source.empty()) {
        return Status::InvalidArgument(fmt::format("{}: timing: how and source must not be empty", origin));
      }
      r.timing = std::move(timing);
    }
  }
  nlohmann::json defaults = nlohmann::json::object();
  if (f.Has("defaults")) {
    if (const nlohmann::json* d = f.Object("defaults")) defaults = *d;
  }
  const nlohmann::json* models = f.Object("models");
  if (f.Has("notes")) (void)f.String("notes");
  f.RejectUnknownKeys();
  if (!f.status().ok()) return f.status();
  if (r.id.empty() || r.name.empty() || r.source.empty() || r.summary.empty()) {
    return Status::InvalidArgument(fmt::format("{}: id, name, source and summary must not be empty", origin));
  }
  if (r.compiled_by_default && r.compiled_source.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: compiled_by_default needs compiled_source: every fact cites its source", origin));
  }
  if (r.ring_merge_fused && r.ring_merge_source.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: ring_merge_fused needs ring_merge_source: every fact cites its source", origin));
  }
  if (r.engine && !models->empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: an engine runtime lists no models: its rules are the engine's own", origin));
  }
  for (const auto& [id, entry] : models->items()) {
    if (!entry.is_object()) {
      return Status::InvalidArgument(fmt::format("{}: models.{} must be an object", origin, id));
    }
    DITUNE_ASSIGN_OR_RETURN(RuntimeSupport s, ParseRuntimeSupport(Merged(defaults, entry),
                                                                  fmt::format("{}: models.{}", origin, id),
                                                                  r.id, r.name, r.compiled_by_default));
    out.models.emplace_back(id, std::move(s));
  }
  out.id = r.id;
  return out;
}

}  // namespace ditune
