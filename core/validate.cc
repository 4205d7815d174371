#include "core/validate.h"

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

  if (m.heads % (c.ulysses * c.tp) != 0) {
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
  if (!SequenceSplits(t, seq_split)) {
    if (!fail(kRuleSpRows, [&] {
          std::vector<int> valid;
          for (int d = 1; d <= ctx.gpus; ++d) {
            if (SequenceSplits(t, d)) valid.push_back(d);
          }
          std::string what = m.modality == Modality::kVideo
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

  if (c.pipefusion > 1 || c.patches > 1) {
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
  }

  if (c.pipefusion > 1 && c.warmup > ctx.steps) {
    if (!fail(kRuleWarmup, [&] {
          return fmt::format("warmup {} exceeds the {} denoising steps; valid: 0 to {}", c.warmup,
                             ctx.steps, ctx.steps);
        }))
      return false;
  }

  if (c.cfg > 2 || (c.cfg == 2 && !m.uses_cfg)) {
    if (!fail(kRuleCfg, [&] {
          if (c.cfg > 2) {
            return fmt::format("cfg {}: classifier-free guidance has two branches; cfg is 1 or 2",
                               c.cfg);
          }
          std::string msg = fmt::format(
              "cfg 2: {} runs no classifier-free guidance (guidance-distilled), so there is no "
              "second branch to split; use cfg=1",
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
  return ok;
}

}  // namespace

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
