#include "core/config_rules.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ditune {
namespace {

std::vector<int> Divisors(int n, int max) {
  std::vector<int> d;
  for (int i = 1; i <= n && i <= max; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

// Evaluates every rule. With `out` == nullptr stops at the first violation and builds no
// message (the enumeration path); otherwise records each violation with its message.
// `suggest` adds the nearest valid choices (off while computing suggestions).
bool Check(const ValidationContext& ctx, const ParallelConfig& c, std::vector<Violation>* out,
           bool suggest);

// The values of `field` that make the whole configuration valid, the other fields fixed.
std::vector<int> ValidValues(const ValidationContext& ctx, ParallelConfig c,
                             int ParallelConfig::*field, int max) {
  std::vector<int> values;
  // Patches that default to the stage count move with it.
  const bool tie_patches = field == &ParallelConfig::pipefusion && c.patches == c.pipefusion;
  for (int v = 1; v <= max; ++v) {
    c.*field = v;
    if (tie_patches) c.patches = v;
    if (Check(ctx, c, nullptr, false)) values.push_back(v);
  }
  return values;
}

std::string Suggest(const ValidationContext& ctx, const ParallelConfig& c, const char* key,
                    int ParallelConfig::*field, int max) {
  std::vector<int> v = ValidValues(ctx, c, field, max);
  if (v.empty()) return fmt::format("no {} degree makes the rest of this config valid", key);
  return fmt::format("with the other degrees as given, valid {}: {}", key, fmt::join(v, ", "));
}

// The configurations one step from `c` that pass every rule: the degree of `field` moved
// into another method (or the method dropped for data parallelism).
std::vector<std::string> MoveDegree(const ValidationContext& ctx, const ParallelConfig& c,
                                    int ParallelConfig::*field) {
  static constexpr int ParallelConfig::*kTargets[] = {&ParallelConfig::ulysses, &ParallelConfig::ring,
                                                      &ParallelConfig::pipefusion, &ParallelConfig::cfg,
                                                      &ParallelConfig::tp, &ParallelConfig::dp};
  std::vector<std::string> out;
  const int d = c.*field;
  if (d <= 1) return out;
  // The whole degree moved to one other method, or split between two.
  for (int ParallelConfig::*to : kTargets) {
    if (to == field) continue;
    for (int ParallelConfig::*to2 : kTargets) {
      if (to2 == field) continue;
      for (int a = 1; a <= d; ++a) {
        if (d % a != 0) continue;
        const int b = d / a;  // a to `to`, b to `to2` (to2 == to: all to one)
        if (to2 == to && b != 1) continue;
        ParallelConfig x = c;
        x.*field = 1;
        x.*to *= a;
        if (to2 != to) x.*to2 *= b;
        if (x.pipefusion != c.pipefusion) x.patches = x.pipefusion;
        if (x.pipefusion == 1) x.patches = 1;
        const std::string label = Label(x);
        if (std::find(out.begin(), out.end(), label) != out.end()) continue;
        if (Check(ctx, x, nullptr, false)) out.push_back(label);
      }
    }
  }
  if (out.size() > 6) out.resize(6);
  return out;
}

std::string Nearest(const std::vector<std::string>& fixes) {
  if (fixes.empty()) return "; no launchable configuration is one change away";
  return fmt::format("; nearest launchable: {}", fmt::join(fixes, " | "));
}

// The runtime's own rules for the model (ctx.runtime). Returns false to stop checking
// (enumeration).
bool CheckRuntime(const ValidationContext& ctx, const ParallelConfig& c, std::vector<Violation>* out, bool suggest,
               bool* ok) {
  const ModelSpec& m = *ctx.model;
  auto fail = [&](const char* rule, auto make_message) {
    *ok = false;
    if (out != nullptr) out->push_back({rule, make_message()});
    return out != nullptr;
  };
  const RuntimeSupport* entry = m.runtime(ctx.runtime);
  if (entry == nullptr) {
    return fail(kRuleRuntimeModel, [&] { return RuntimeRunsNoEntryMessage(m, ctx.runtime); });
  }
  const RuntimeSupport& x = *entry;
  const std::string& who = x.runtime_name;
  struct Use {
    RuntimeMethod method;
    int ParallelConfig::*field;
    int degree;
  };
  const Use uses[] = {{RuntimeMethod::kUlysses, &ParallelConfig::ulysses, c.ulysses},
                      {RuntimeMethod::kRing, &ParallelConfig::ring, c.ring},
                      {RuntimeMethod::kPipeFusion, &ParallelConfig::pipefusion, c.pipefusion},
                      {RuntimeMethod::kCfg, &ParallelConfig::cfg, c.cfg},
                      {RuntimeMethod::kTp, &ParallelConfig::tp, c.tp},
                      {RuntimeMethod::kDp, &ParallelConfig::dp, c.dp},
                      {RuntimeMethod::kDistriFusion, &ParallelConfig::distrifusion, c.distrifusion},
                      {RuntimeMethod::kFullyShard, &ParallelConfig::fsdp, c.fsdp},
                      {RuntimeMethod::kCpuOffload, &ParallelConfig::offload, c.offload != 0 ? 2 : 1},
                      {RuntimeMethod::kTorchCompile, &ParallelConfig::compile, c.compile != 0 ? 2 : 1}};
  for (const Use& u : uses) {
    if (u.degree <= 1 || x.runs(u.method)) continue;
    // cfg=2 on a model without guidance is the cfg rule's to name.
    if (u.method == RuntimeMethod::kCfg && m.GuidanceBranches() != 2) continue;
    if (!fail(kRuleRuntimeMethod, [&] {
          std::string msg = fmt::format("{} has no {} for {} ({})", who, RuntimeMethodPhrase(u.method), m.id,
                                        x.method(u.method).source);
          if (suggest && u.method != RuntimeMethod::kFullyShard && u.method != RuntimeMethod::kCpuOffload &&
              u.method != RuntimeMethod::kTorchCompile && u.method != RuntimeMethod::kTextEncoderParallel) {
            msg += Nearest(MoveDegree(ctx, c, u.field));
          }
          return msg;
        }))
      return false;
  }
  // The memory placements: each needs the runtime's way to ask for it.
  const std::pair<RuntimeMethod, bool> placements[] = {
      {RuntimeMethod::kTextEncoderParallel, c.te == TextEncoderPlacement::kParallel},
      {RuntimeMethod::kTextEncoderFsdp, c.te == TextEncoderPlacement::kFsdp},
      {RuntimeMethod::kTextEncoderCpu, c.te == TextEncoderPlacement::kCpu},
      {RuntimeMethod::kVaeTiling, c.vae == VaePlacement::kTiled},
      {RuntimeMethod::kParallelVae, c.vae == VaePlacement::kParallel},
      {RuntimeMethod::kVaeCpu, c.vae == VaePlacement::kCpu},
      {RuntimeMethod::kControlNetParallel, c.controlnet == ControlNetPlacement::kParallel},
  };
  for (const auto& placement : placements) {
    const RuntimeMethod method = placement.first;
    if (!placement.second || x.runs(method)) continue;
    if (!fail(kRuleRuntimeMethod, [&] {
          return fmt::format("{} has no {} for {} ({})", who, RuntimeMethodPhrase(method), m.id,
                             x.method(method).source);
        }))
      return false;
  }
  if (c.order != kDefaultRankOrder) {
    if (!fail(kRuleRuntimeOrder, [&] {
          return fmt::format(
              "{} always uses the rank order tp-sp-pp-cfg-dp; this config uses {}: launch it with ditune's "
              "engine (--runtime ditune) or remap the ranks (CUDA_VISIBLE_DEVICES)",
              who, RankOrderToString(c.order));
        }))
      return false;
  }
  // An entry point without PipeFusion's patch or warm-up flag runs xDiT's defaults: as many
  // patches as stages, one warm-up step. xDiT recomputes that count where it does not split
  // the rows (XditRunsAs), so the recomputed count is the same launch.
  if (c.pipefusion > 1 && x.flag("patches") == nullptr && c.patches != c.pipefusion) {
    ParallelConfig by_default = c;
    by_default.patches = c.pipefusion;
    const int runs = XditRunsAs(ctx.tokens, ctx.steps, by_default).patches;
    if (c.patches != runs &&
        !fail(kRuleRuntimeFlag, [&] {
          return fmt::format("{}'s entry point for {} takes no patch count ({}): it runs as many patches as "
                             "stages{}; use patches={}",
                             who, m.id, x.flags_source,
                             runs != c.pipefusion ? fmt::format(" (recomputed to {} for these rows)", runs) : "",
                             c.pipefusion);
        }))
      return false;
  }
  if (c.pipefusion > 1 && x.flag("warmup") == nullptr && c.warmup != 1) {
    if (!fail(kRuleRuntimeFlag, [&] {
          return fmt::format("{}'s entry point for {} takes no warm-up count ({}): it runs 1 warm-up step; "
                             "use warmup=1",
                             who, m.id, x.flags_source);
        }))
      return false;
  }
  for (const RuntimeConstraint& k : x.constraints) {
    bool broken = false;
    std::string what;
    int ParallelConfig::*move = nullptr;
    if (k.rule == kConstraintTpOnlyWithUlysses && c.tp > 1 &&
        (c.ring > 1 || c.pipefusion > 1 || c.cfg > 1 || c.dp > 1 || c.distrifusion > 1)) {
      broken = true;
      what = fmt::format("tensor parallelism (tp {}) combines only with Ulysses", c.tp);
      move = &ParallelConfig::tp;
    }
    if (k.rule == kConstraintSpIsWorld && ctx.gpus > 1 && c.ulysses * c.ring != ctx.gpus) {
      broken = true;
      what = fmt::format("on {} GPUs every rank is a sequence-parallel rank: ulysses x ring must be {} (got {} x {})",
                         ctx.gpus, ctx.gpus, c.ulysses, c.ring);
      move = &ParallelConfig::ulysses;
    }
    if (k.rule == kConstraintSquareSize) {
      const int height = ctx.tokens.latent_height * m.vae_spatial;
      const int width = ctx.tokens.latent_width * m.vae_spatial;
      if (height != width || height % 16 != 0) {
        broken = true;
        what = fmt::format("the size is {}x{}: it is launched square, height = width, a multiple of 16", height, width);
      }
    }
    if (k.rule == kConstraintTpOrRingIsWorld && ctx.gpus > 1 && c.tp != ctx.gpus && c.ring != ctx.gpus) {
      broken = true;
      what = fmt::format("on {} GPUs one method spans every rank: tp {} or ring {} (got tp {} x ring {})", ctx.gpus,
                         ctx.gpus, ctx.gpus, c.tp, c.ring);
      move = c.tp > 1 ? &ParallelConfig::tp : &ParallelConfig::ring;
    }
    if (k.rule == kConstraintOffloadAlone && c.offload != 0 && c.sp() > 1) {
      broken = true;
      what = fmt::format("model CPU offload does not run with sequence parallelism (ulysses {} x ring {})", c.ulysses,
                         c.ring);
    }
    if (k.rule == kConstraintFsdpIsWorld && c.fsdp > 1 && c.fsdp != ctx.gpus) {
      broken = true;
      what = fmt::format("the weights are sharded over every rank: fsdp is 1 or {} (got {})", ctx.gpus, c.fsdp);
    }
    if (!broken) continue;
    if (!fail(kRuleRuntimeConstraint, [&] {
          std::string msg = fmt::format("{} for {}: {} ({})", who, m.id, what, k.source);
          if (suggest && move != nullptr) msg += Nearest(MoveDegree(ctx, c, move));
          return msg;
        }))
      return false;
  }
  return true;
}

bool Check(const ValidationContext& ctx, const ParallelConfig& c, std::vector<Violation>* out,
           bool suggest) {
  const ModelSpec& m = *ctx.model;
  const TokenGeometry& t = ctx.tokens;
  bool ok = true;
  auto fail = [&](const char* rule, auto make_message) {
    ok = false;
    if (out != nullptr) out->push_back({rule, make_message()});
    return out != nullptr;  // keep going only when collecting messages
  };

  for (int d : {c.ulysses, c.ring, c.pipefusion, c.patches, c.cfg, c.dp, c.tp, c.distrifusion}) {
    if (d < 1) {
      fail(kRuleDegrees, [&] {
        return fmt::format("every degree and the patch count must be >= 1 (config '{}')", ToString(c));
      });
      return false;  // the other rules divide by these
    }
  }
  if (c.warmup < 0) {
    if (!fail(kRuleDegrees, [&] { return std::string("warmup must be >= 0"); })) return false;
  }

  if (c.world_size() != ctx.gpus) {
    if (!fail(kRuleProduct, [&] {
          std::string msg = fmt::format(
              "ulysses {} x ring {} x pipefusion {} x cfg {} x dp {} x tp {} x distrifusion {} "
              "= {} devices, but the cluster has {} GPUs",
              c.ulysses, c.ring, c.pipefusion, c.cfg, c.dp, c.tp, c.distrifusion, c.world_size(),
              ctx.gpus);
          if (c.cfg == 2) msg += " (cfg=2 doubles the devices a config needs)";
          if (suggest) {
            std::vector<std::string> fixes;
            static constexpr std::pair<const char*, int ParallelConfig::*> kFields[] = {
                {"ulysses", &ParallelConfig::ulysses}, {"ring", &ParallelConfig::ring},
                {"pipefusion", &ParallelConfig::pipefusion}, {"cfg", &ParallelConfig::cfg},
                {"dp", &ParallelConfig::dp}, {"tp", &ParallelConfig::tp}};
            for (const auto& [key, field] : kFields) {
              for (int v : ValidValues(ctx, c, field, ctx.gpus)) {
                ParallelConfig fixed = c;
                fixed.*field = v;
                if (field == &ParallelConfig::pipefusion && c.patches == c.pipefusion) fixed.patches = v;
                fixes.push_back(Label(fixed));
              }
            }
            if (fixes.empty()) {
              msg += fmt::format("; no single-degree change fits {} GPUs", ctx.gpus);
            } else {
              msg += fmt::format("; nearest valid: {}", fmt::join(fixes, " | "));
            }
          }
          return msg;
        }))
      return false;
  }

  const bool by_runtime = !ctx.runtime.empty();
  const RuntimeSupport* entry = by_runtime ? m.runtime(ctx.runtime) : nullptr;
  if (by_runtime && !CheckRuntime(ctx, c, out, suggest, &ok)) return false;

  const bool heads_padded = entry != nullptr && entry->constraint(kConstraintHeadsPadded) != nullptr && c.tp == 1;
  if (!heads_padded && m.heads % (c.ulysses * c.tp) != 0) {
    if (!fail(kRuleUlyssesHeads, [&] {
          std::string msg = fmt::format(
              "ulysses {} x tp {} = {} does not divide the {} attention heads of {}", c.ulysses,
              c.tp, c.ulysses * c.tp, m.heads, m.id);
          msg += fmt::format("; Ulysses degrees {} allows on {} GPUs: {}", m.id, ctx.gpus,
                             fmt::join(AllowedUlyssesDegrees(m, ctx.gpus), ", "));
          if (suggest) msg += "; " + Suggest(ctx, c, "ulysses", &ParallelConfig::ulysses, ctx.gpus);
          return msg;
        }))
      return false;
  }

  if (c.tp > 1 && (m.hidden % c.tp != 0 || m.mlp_hidden % c.tp != 0 ||
                   m.text_stream_hidden % c.tp != 0)) {
    if (!fail(kRuleTpWidth, [&] {
          std::vector<int> valid;
          for (int d = 1; d <= ctx.gpus; ++d) {
            if (m.hidden % d == 0 && m.mlp_hidden % d == 0 && m.text_stream_hidden % d == 0 &&
                m.heads % d == 0) {
              valid.push_back(d);
            }
          }
          return fmt::format(
              "tp {} must divide hidden {}, text-stream hidden {} and MLP width {} of {}; valid tp "
              "degrees up to {}: {}",
              c.tp, m.hidden, m.text_stream_hidden, m.mlp_hidden, m.id, ctx.gpus,
              fmt::join(valid, ", "));
        }))
      return false;
  }

  const int seq_split = c.sp() * c.distrifusion;
  const bool xdit_split = entry != nullptr;  // the runtime's own split unit
  const bool splits = xdit_split ? SequenceSplitsBy(t, seq_split, entry->split) : SequenceSplits(t, seq_split);
  if (!splits) {
    if (!fail(kRuleSpRows, [&] {
          std::vector<int> valid;
          for (int d = 1; d <= ctx.gpus; ++d) {
            if (xdit_split ? SequenceSplitsBy(t, d, entry->split) : SequenceSplits(t, d)) valid.push_back(d);
          }
          std::string what =
              xdit_split && entry->split == SequenceSplitUnit::kTokens
                  ? fmt::format("the {} image tokens, which {} splits as one flattened sequence ({})",
                                t.image_tokens(), entry->runtime_name, entry->split_source)
              : xdit_split && entry->split == SequenceSplitUnit::kAllTokens
                  ? fmt::format("the {} text and {} image tokens, which {} splits as one sequence in equal chunks ({})",
                                t.text_tokens, t.image_tokens(), entry->runtime_name, entry->split_source)
              : xdit_split && entry->split == SequenceSplitUnit::kRowsOrColumns
                  ? fmt::format("the {} patch rows nor the {} patch columns, which {} splits ({})", t.patch_rows,
                                t.patch_cols, entry->runtime_name, entry->split_source)
              : xdit_split ? fmt::format("the {} patch rows (latent height {} / patch {}), which {} splits ({})",
                                         t.patch_rows, t.latent_height, m.patch_spatial, entry->runtime_name,
                                         entry->split_source)
              : m.modality == Modality::kVideo
                                 ? fmt::format("any of the {} latent frames, {} patch rows or {} "
                                               "patch columns",
                                               t.patch_frames, t.patch_rows, t.patch_cols)
                                 : fmt::format("the {} patch rows (latent height {} / patch {})",
                                               t.patch_rows, t.latent_height, m.patch_spatial);
          return fmt::format(
              "sequence-parallel degree {} (ulysses {} x ring {}{}) does not divide {}; sequence "
              "degrees that split it evenly (up to {}): {}",
              seq_split, c.ulysses, c.ring,
              c.distrifusion > 1 ? fmt::format(" x distrifusion {}", c.distrifusion) : "", what,
              ctx.gpus, fmt::join(valid, ", "));
        }))
      return false;
  }

  // xDiT adjusts a patch count that does not split the rows (XditRunsAs); ditune's executor
  // needs whole rows per patch.
  if (!by_runtime && (c.pipefusion > 1 || c.patches > 1)) {
    // Each patch is a whole number of rows, and each sequence-parallel rank holds whole
    // rows of every patch: rows % (patches x sp) == 0.
    const int unit = c.patches * c.sp();
    if (t.patch_rows % unit != 0) {
      if (!fail(kRulePatches, [&] {
            std::vector<int> valid;
            for (int p = 1; p * c.sp() <= t.patch_rows; ++p) {
              if (t.patch_rows % (p * c.sp()) == 0) valid.push_back(p);
            }
            return fmt::format(
                "PipeFusion patches {} x sp {} = {} does not divide the {} patch rows: each patch "
                "must be a whole number of rows on every sequence-parallel rank; valid patch "
                "counts: {}",
                c.patches, c.sp(), unit, t.patch_rows, fmt::join(valid, ", "));
          }))
        return false;
    }
  }

  if (c.pipefusion > m.num_blocks()) {
    if (!fail(kRuleStages, [&] {
          return fmt::format("pipefusion {} exceeds the {} blocks of {}: every stage needs a block",
                             c.pipefusion, m.num_blocks(), m.id);
        }))
      return false;
  } else if (by_runtime && c.pipefusion > 1) {
    // xDiT gives every stage ceil(L / stages) blocks: the last stages may be left with none.
    const int per = (m.num_blocks() + c.pipefusion - 1) / c.pipefusion;
    if (per * (c.pipefusion - 1) >= m.num_blocks()) {
      if (!fail(kRuleStages, [&] {
            std::vector<int> valid;
            for (int s = 2; s <= std::min(ctx.gpus, m.num_blocks()); ++s) {
              const int p = (m.num_blocks() + s - 1) / s;
              if (p * (s - 1) < m.num_blocks()) valid.push_back(s);
            }
            return fmt::format(
                "xDiT gives each PipeFusion stage ceil({} / {}) = {} blocks of {}, which leaves the last stage "
                "none (base_transformer.py); stage counts xDiT fills (up to {}): {}",
                m.num_blocks(), c.pipefusion, per, m.id, ctx.gpus, fmt::join(valid, ", "));
          }))
        return false;
    }
  }

  // xDiT clamps the warm-up to the steps; ditune's executor refuses it.
  if (c.pipefusion > 1 && c.warmup > ctx.steps && !by_runtime) {
    if (!fail(kRuleWarmup, [&] {
          return fmt::format("warmup {} exceeds the {} denoising steps; valid: 0 to {}", c.warmup,
                             ctx.steps, ctx.steps);
        }))
      return false;
  }

  if (c.cfg > 2 || (c.cfg == 2 && m.GuidanceBranches() != 2)) {
    if (!fail(kRuleCfg, [&] {
          if (c.cfg > 2) {
            return fmt::format("cfg {}: classifier-free guidance has two branches; cfg is 1 or 2",
                               c.cfg);
          }
          std::string msg =
              m.uses_cfg ? fmt::format("cfg 2: {} runs {} guidance branches batched in one forward, which CFG "
                                       "parallelism's two ranks do not split; use cfg=1",
                                       m.id, m.GuidanceBranches())
                         : fmt::format("cfg 2: {} runs no classifier-free guidance (guidance-distilled), so there is "
                                       "no second branch to split; use cfg=1",
                                       m.id);
          if (suggest) {
            std::vector<std::string> fixes;
            for (int ParallelConfig::*field :
                 {&ParallelConfig::ulysses, &ParallelConfig::ring, &ParallelConfig::pipefusion,
                  &ParallelConfig::dp, &ParallelConfig::tp}) {
              ParallelConfig fixed = c;
              fixed.cfg = 1;
              fixed.*field *= 2;
              if (field == &ParallelConfig::pipefusion && c.patches == c.pipefusion) {
                fixed.patches = fixed.pipefusion;
              }
              if (Check(ctx, fixed, nullptr, false)) fixes.push_back(Label(fixed));
            }
            if (!fixes.empty()) msg += fmt::format("; nearest valid: {}", fmt::join(fixes, " | "));
          }
          return msg;
        }))
      return false;
  }

  if (m.control.blocks > 0 && !by_runtime) {
    if (!fail(kRuleControlNet, [&] {
          return fmt::format("{} runs a ControlNet beside its DiT; ditune's engine runs the DiT alone: price and "
                             "launch it with a runtime that runs the ControlNet (--runtime diffusers)",
                             m.id);
        }))
      return false;
  }
  if (c.te != TextEncoderPlacement::kWhole && !by_runtime) {
    if (!fail(kRulePlacement, [&] {
          return fmt::format(
              "te={}: ditune's engine encodes the prompt with whole text encoders on every rank; placing them "
              "otherwise is a PyTorch runtime's (--runtime diffusers, wan-generate, ...)",
              TextEncoderPlacementName(c.te));
        }))
      return false;
  }
  if (c.vae != VaePlacement::kWhole && !by_runtime) {
    if (!fail(kRulePlacement, [&] {
          return fmt::format(
              "vae={}: ditune's engine runs the DiT, not the VAE; tiled, parallel or CPU decoding is a PyTorch "
              "runtime's (--runtime xdit, hunyuan-sample, diffusers, ...)",
              VaePlacementName(c.vae));
        }))
      return false;
  }
  const bool split_placement = c.te == TextEncoderPlacement::kParallel || c.te == TextEncoderPlacement::kFsdp ||
                               c.vae == VaePlacement::kParallel;
  if (split_placement && ctx.gpus == 1) {
    if (!fail(kRulePlacement, [&] {
          return fmt::format("{}: on one GPU there are no other ranks to split over; valid on one GPU: te=whole|cpu, "
                             "vae=whole|tiled|cpu",
                             c.vae == VaePlacement::kParallel ? "vae=parallel"
                                                              : fmt::format("te={}", TextEncoderPlacementName(c.te)));
        }))
      return false;
  }
  if (c.vae == VaePlacement::kCpu && c.offload != 0) {
    if (!fail(kRulePlacement, [&] {
          return std::string("vae=cpu and offload=1 contradict: model CPU offload moves the VAE onto the GPU to decode "
                             "(diffusers' enable_model_cpu_offload); give one of them");
        }))
      return false;
  }
  if (c.compile != 0 && c.eager != 0) {
    if (!fail(kRuleCompile, [&] {
          return std::string("compile=1 and eager=1 contradict: compile=1 asks for torch.compile, eager=1 for the "
                             "runtime's eager mode (give one)");
        }))
      return false;
  }
  if (c.eager != 0 && !by_runtime) {
    if (!fail(kRuleCompile, [&] {
          return std::string(
              "eager=1: ditune's engine has no eager mode to ask for, it runs one kernel per op; eager=1 is for the "
              "PyTorch runtimes that compile by default (--runtime vllm-omni)");
        }))
      return false;
  }
  if (c.compile != 0 && !by_runtime) {
    if (!fail(kRuleCompile, [&] {
          return std::string(
              "compile=1: ditune's engine compiles nothing, it already runs one kernel per op; torch.compile is the "
              "PyTorch runtimes' (--runtime xdit, sglang, ...)");
        }))
      return false;
  }
  if (c.offload != 0 && !by_runtime) {
    if (!fail(kRuleOffload, [&] {
          return std::string(
              "offload=1: ditune's engine keeps every part of the pipeline on the GPU; model CPU offload is "
              "the PyTorch runtimes' (--runtime xdit, wan-generate, ...)");
        }))
      return false;
  }
  if (c.fsdp > 1 && (c.fsdp > ctx.gpus || ctx.gpus % c.fsdp != 0 || !by_runtime)) {
    if (!fail(kRuleFsdp, [&] {
          if (!by_runtime) {
            return fmt::format("fsdp {}: ditune's engine keeps whole weights on every rank; fully-sharded "
                               "weights are the PyTorch runtimes' (--runtime xdit, wan-generate, ...)",
                               c.fsdp);
          }
          return fmt::format("fsdp {} must divide the {} GPUs (the shards are a group of the ranks)", c.fsdp,
                             ctx.gpus);
        }))
      return false;
  }

  if (ctx.batch % c.dp != 0) {
    if (!fail(kRuleDp, [&] {
          return fmt::format(
              "dp {} splits the batch of {} prompts unevenly; use a batch that is a multiple of "
              "{} (--batch {}) or a dp that divides {}",
              c.dp, ctx.batch, c.dp, c.dp, ctx.batch);
        }))
      return false;
  }

  if (c.distrifusion > 1 &&
      (c.ulysses * c.ring * c.pipefusion * c.cfg * c.dp * c.tp != 1 || c.patches != 1)) {
    if (!fail(kRuleDistriFusion, [&] {
          return fmt::format(
              "distrifusion {} stands alone: it cannot be combined with other methods (got '{}'); "
              "use distrifusion={} alone",
              c.distrifusion, ToString(c), ctx.gpus);
        }))
      return false;
  }

  if ((c.controlnet == ControlNetPlacement::kParallel && m.control.blocks == 0) ||
      (m.control.blocks > 0 && (c.pipefusion > 1 || c.distrifusion > 1))) {
    if (!fail(kRuleControlNet, [&] {
          if (m.control.blocks == 0) {
            return fmt::format("controlnet=parallel: {} has no ControlNet; drop controlnet=", m.id);
          }
          return fmt::format("{} runs a ControlNet beside the whole DiT every step: no PipeFusion or DistriFusion "
                             "(got '{}'); use ulysses, ring, tp or cfg",
                             m.id, ToString(c));
        }))
      return false;
  }
  return ok;
}

}  // namespace

ParallelConfig XditRunsAs(const TokenGeometry& t, int steps, ParallelConfig c) {
  if (c.pipefusion <= 1) {
    c.patches = c.pipefusion;
    return c;
  }
  // runtime_state.py _calc_patches_metadata, in patch rows: the patch height rounded up to
  // whole rows on every sequence-parallel rank, the count recomputed from it.
  const int rows = t.patch_rows;
  const int sp = std::max(1, c.sp());
  const int per_patch = (rows + c.patches * sp - 1) / (c.patches * sp) * sp;
  if (per_patch > 0) c.patches = std::max(1, (rows + per_patch - 1) / per_patch);
  c.warmup = std::min(c.warmup, steps);
  return c;
}

bool SequenceSplitsBy(const TokenGeometry& t, int sp, SequenceSplitUnit unit) {
  if (sp <= 1) return true;
  switch (unit) {
    case SequenceSplitUnit::kRows: return t.patch_rows % sp == 0;
    case SequenceSplitUnit::kTokens: return t.image_tokens() % sp == 0;
    case SequenceSplitUnit::kPadded: return t.image_tokens() >= sp;
    case SequenceSplitUnit::kRowsOrColumns: return t.patch_rows % sp == 0 || t.patch_cols % sp == 0;
    case SequenceSplitUnit::kAllTokens: return (t.image_tokens() + t.text_tokens) % sp == 0;
  }
  return false;
}

bool SequenceSplits(const TokenGeometry& t, int sp) {
  if (sp <= 1) return true;
  if (t.patch_frames > 1) {
    return t.patch_frames % sp == 0 || t.patch_rows % sp == 0 || t.patch_cols % sp == 0;
  }
  return t.patch_rows % sp == 0;
}

std::vector<int> AllowedUlyssesDegrees(const ModelSpec& model, int gpus) {
  std::vector<int> v;
  for (int d : Divisors(model.heads, gpus)) {
    if (gpus % d == 0) v.push_back(d);
  }
  return v;
}

std::vector<Violation> CheckConfig(const ValidationContext& ctx, const ParallelConfig& config) {
  std::vector<Violation> out;
  Check(ctx, config, &out, true);
  return out;
}

bool IsValidConfig(const ValidationContext& ctx, const ParallelConfig& config) {
  return Check(ctx, config, nullptr, false);
}

Status ValidateConfig(const ValidationContext& ctx, const ParallelConfig& config) {
  std::vector<Violation> v = CheckConfig(ctx, config);
  if (v.empty()) return Status::Ok();
  std::string msg = fmt::format("config '{}' is not valid for {} on {} GPUs:", Label(config),
                                ctx.model->id, ctx.gpus);
  for (const auto& x : v) msg += fmt::format("\n  [{}] {}", x.rule, x.message);
  return Status::InvalidArgument(msg);
}

}  // namespace ditune
