// The validity rules of a configuration for a model, workload and GPU count — at least as
// strict as xDiT's. Every violation names its rule, the values, and the nearest valid
// choices.
#ifndef DITUNE_CORE_CONFIG_RULES_H_
#define DITUNE_CORE_CONFIG_RULES_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/workload.h"

namespace ditune {

// Everything the rules look at.
struct ValidationContext {
  const ModelSpec* model = nullptr;
  TokenGeometry tokens;
  int steps = 1;
  int batch = 1;
  int gpus = 1;
  // The runtime whose entry point for the model (ModelSpec::runtimes) adds its rules to the
  // method rules: only the methods it runs, its rank order, its sequence split, its
  // constraints. Empty: the rules of ditune's own engine. Must outlive the checks.
  std::string_view runtime;
};

// Rule ids (stable; tests and messages name them).
inline constexpr const char* kRuleDegrees = "degrees-positive";
inline constexpr const char* kRuleProduct = "product-equals-gpus";
inline constexpr const char* kRuleUlyssesHeads = "heads-divisible-by-ulysses-x-tp";
inline constexpr const char* kRuleTpWidth = "tp-divides-widths";
inline constexpr const char* kRuleSpRows = "sequence-divisible-by-sp";
inline constexpr const char* kRulePatches = "pipefusion-patch-rows";
inline constexpr const char* kRuleStages = "pipefusion-stages-le-blocks";
inline constexpr const char* kRuleWarmup = "warmup-le-steps";
inline constexpr const char* kRuleCfg = "cfg-needs-guidance";
inline constexpr const char* kRuleDp = "batch-divisible-by-dp";
inline constexpr const char* kRuleDistriFusion = "distrifusion-alone";
inline constexpr const char* kRuleFsdp = "fsdp-divides-gpus";
inline constexpr const char* kRuleOffload = "offload-is-xdits";
// controlnet=parallel needs a model with a ControlNet; a ControlNet runs beside the whole DiT
// every step, never across PipeFusion's stages or DistriFusion's stale patches.
inline constexpr const char* kRuleControlNet = "controlnet-beside-the-whole-dit";
inline constexpr const char* kRuleCompile = "compile-is-the-runtimes";
// te=... and vae=... other than whole: a runtime's memory placements, on more than one GPU
// where they split over the ranks.
inline constexpr const char* kRulePlacement = "placement-is-the-runtimes";
// A runtime's rules (ValidationContext::runtime).
inline constexpr const char* kRuleRuntimeModel = "runtime-runs-model";
inline constexpr const char* kRuleRuntimeMethod = "runtime-runs-method";
inline constexpr const char* kRuleRuntimeOrder = "runtime-rank-order";
inline constexpr const char* kRuleRuntimeConstraint = "runtime-constraint";
inline constexpr const char* kRuleRuntimeFlag = "runtime-entry-point-flags";

struct Violation {
  std::string rule;     // one of the kRule* ids
  std::string message;  // what is wrong, with the values and the nearest valid choices
};

// Every rule the configuration breaks; empty when it is valid.
std::vector<Violation> CheckConfig(const ValidationContext& ctx, const ParallelConfig& config);

// True iff CheckConfig finds nothing. Cheap enough for enumeration (no messages built).
bool IsValidConfig(const ValidationContext& ctx, const ParallelConfig& config);

// OK, or InvalidArgument whose message lists every violation, one per line.
Status ValidateConfig(const ValidationContext& ctx, const ParallelConfig& config);

// What xDiT runs when given `config`: a PipeFusion patch count that does not split the patch
// rows into whole rows per sequence-parallel rank is adjusted as xDiT adjusts it (the patch
// height rounded up, the count recomputed), and the warm-up is clamped to the steps.
// Configurations that differ only in what xDiT adjusts run the same.
ParallelConfig XditRunsAs(const TokenGeometry& tokens, int steps, ParallelConfig config);

// Which Ulysses degrees the model allows on `gpus` devices: divisors of the head count
// that divide gpus.
std::vector<int> AllowedUlyssesDegrees(const ModelSpec& model, int gpus);

// Which sequence-parallel degrees split the image tokens evenly (see kRuleSpRows): ditune's
// executor splits a video along whichever of frames, rows or columns the degree divides.
bool SequenceSplits(const TokenGeometry& tokens, int sp);
// The same for an entry point that splits by `unit` (xDiT: rows, flattened tokens, or a
// padded sequence that any degree splits).
bool SequenceSplitsBy(const TokenGeometry& tokens, int sp, SequenceSplitUnit unit);

}  // namespace ditune

#endif  // DITUNE_CORE_CONFIG_RULES_H_
