#include "core/xdit_support.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/enum_names.h"
#include "core/json_fields.h"

namespace ditune {
namespace {

constexpr XditMethod kAllMethods[kNumXditMethods] = {
    XditMethod::kUlysses,     XditMethod::kRing,       XditMethod::kPipeFusion,   XditMethod::kCfg,
    XditMethod::kTp,          XditMethod::kDp,         XditMethod::kDistriFusion, XditMethod::kParallelVae,
    XditMethod::kFullyShard,  XditMethod::kTorchCompile, XditMethod::kFp8Gemms,   XditMethod::kCpuOffload,
};

// Workload keys a flag may set besides the methods.
constexpr const char* kWorkloadKeys[] = {"model", "height", "width", "frames", "steps", "output_type",
                                         "patches", "warmup"};

}  // namespace

constexpr EnumName<XditMethod> kXditMethodKeys[] = {
    {XditMethod::kUlysses, "ulysses"},
    {XditMethod::kRing, "ring"},
    {XditMethod::kPipeFusion, "pipefusion"},
    {XditMethod::kCfg, "cfg"},
    {XditMethod::kTp, "tp"},
    {XditMethod::kDp, "dp"},
    {XditMethod::kDistriFusion, "distrifusion"},
    {XditMethod::kParallelVae, "parallel_vae"},
    {XditMethod::kFullyShard, "fully_shard"},
    {XditMethod::kTorchCompile, "torch_compile"},
    {XditMethod::kFp8Gemms, "fp8_gemms"},
    {XditMethod::kCpuOffload, "cpu_offload"},
};

std::string_view XditMethodKey(XditMethod m) { return NameIn(kXditMethodKeys, m); }

constexpr EnumName<XditMethod> kXditMethodPhrases[] = {
    {XditMethod::kUlysses, "Ulysses sequence parallelism"},
    {XditMethod::kRing, "Ring sequence parallelism"},
    {XditMethod::kPipeFusion, "PipeFusion"},
    {XditMethod::kCfg, "CFG parallelism"},
    {XditMethod::kTp, "tensor parallelism"},
    {XditMethod::kDp, "data parallelism"},
    {XditMethod::kDistriFusion, "DistriFusion"},
    {XditMethod::kParallelVae, "parallel VAE"},
    {XditMethod::kFullyShard, "fully-sharded weights"},
    {XditMethod::kTorchCompile, "torch.compile"},
    {XditMethod::kFp8Gemms, "FP8 GEMMs"},
    {XditMethod::kCpuOffload, "CPU offload"},
};

std::string_view XditMethodPhrase(XditMethod m) { return NameIn(kXditMethodPhrases, m); }

constexpr EnumName<SequenceSplitUnit> kSequenceSplitUnitNames[] = {
    {SequenceSplitUnit::kRows, "rows"},
    {SequenceSplitUnit::kTokens, "tokens"},
    {SequenceSplitUnit::kPadded, "padded"},
};

std::string_view SequenceSplitUnitName(SequenceSplitUnit u) { return NameIn(kSequenceSplitUnitNames, u); }

const std::string* XditSupport::flag(std::string_view key) const {
  auto it = flags.find(key);
  return it == flags.end() ? nullptr : &it->second;
}

const XditConstraint* XditSupport::constraint(std::string_view rule) const {
  for (const auto& c : constraints) {
    if (c.rule == rule) return &c;
  }
  return nullptr;
}

StatusOr<XditSupport> ParseXditSupport(const nlohmann::json& j, const std::string& origin) {
  JsonFields f(j, origin);
  XditSupport s;
  s.command = f.String("command");
  s.command_source = f.String("command_source");
  s.flags_source = f.String("flags_source");
  if (f.Has("model_arg")) s.model_arg = f.String("model_arg");
  if (const nlohmann::json* flags = f.Object("flags")) {
    for (const auto& [key, value] : flags->items()) {
      bool known = false;
      for (const char* k : kWorkloadKeys) known |= key == k;
      for (XditMethod m : kAllMethods) known |= key == XditMethodKey(m);
      if (!known) {
        f.Fail(fmt::format("{}: flags: unknown key '{}'; valid: model, height, width, frames, steps, "
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
    for (XditMethod m : kAllMethods) {
      if (!mf.Has(XditMethodKey(m))) continue;
      const nlohmann::json* one = mf.Object(XditMethodKey(m));
      if (one == nullptr) continue;
      JsonFields of(*one, fmt::format("{}: methods.{}", origin, XditMethodKey(m)));
      XditFact& fact = s.methods[static_cast<int>(m)];
      fact.runs = of.Bool("runs");
      fact.source = of.String("source");
      of.RejectUnknownKeys();
      if (!of.status().ok()) return of.status();
      if (fact.source.empty()) {
        return Status::InvalidArgument(
            fmt::format("{}: methods.{}.source is empty: every fact cites its source", origin, XditMethodKey(m)));
      }
    }
    mf.RejectUnknownKeys();
    if (!mf.status().ok()) return mf.status();
  }
  if (const nlohmann::json* split = f.Object("sequence_split")) {
    JsonFields sf(*split, origin + ": sequence_split");
    const std::string unit = sf.Enum("unit", {"rows", "tokens", "padded"});
    s.split = unit == "tokens" ? SequenceSplitUnit::kTokens
              : unit == "padded" ? SequenceSplitUnit::kPadded
                                 : SequenceSplitUnit::kRows;
    s.split_source = sf.String("source");
    sf.RejectUnknownKeys();
    if (!sf.status().ok()) return sf.status();
  }
  if (f.Has("stage_partition")) {
    s.stages = f.Enum("stage_partition", {"ceil", "balanced"}) == "balanced" ? StagePartition::kBalanced
                                                                             : StagePartition::kCeil;
  }
  if (f.Has("constraints")) {
    if (const nlohmann::json* cons = f.Array("constraints")) {
      int i = 0;
      for (const auto& c : *cons) {
        JsonFields cf(c, fmt::format("{}: constraints[{}]", origin, i++));
        XditConstraint x;
        x.rule = cf.Enum("rule", {kXditTpOnlyWithUlysses, kXditHeadsPadded});
        x.source = cf.String("source");
        cf.RejectUnknownKeys();
        if (!cf.status().ok()) return cf.status();
        s.constraints.push_back(std::move(x));
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
  for (XditMethod m : {XditMethod::kUlysses, XditMethod::kRing, XditMethod::kPipeFusion, XditMethod::kCfg,
                       XditMethod::kTp, XditMethod::kDp, XditMethod::kDistriFusion}) {
    if (s.method(m).source.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}: methods.{} is missing: every parallel method is listed with runs and its source", origin,
          XditMethodKey(m)));
    }
  }
  for (XditMethod m : kAllMethods) {
    if (s.runs(m) && m != XditMethod::kDistriFusion && s.flag(XditMethodKey(m)) == nullptr) {
      return Status::InvalidArgument(fmt::format(
          "{}: methods.{} runs but flags.{} is missing: name the flag the entry point takes for it", origin,
          XditMethodKey(m), XditMethodKey(m)));
    }
  }
  for (const char* key : {"height", "width", "steps"}) {
    if (s.flag(key) == nullptr) {
      return Status::InvalidArgument(fmt::format("{}: flags.{} is missing", origin, key));
    }
  }
  return s;
}

}  // namespace ditune
