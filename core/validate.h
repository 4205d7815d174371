// The validity rules of a configuration for a model, workload and GPU count — at least as
// strict as xDiT's. Every violation names its rule, the values, and the nearest valid
// choices.
#ifndef DITUNE_CORE_VALIDATE_H_
#define DITUNE_CORE_VALIDATE_H_

#include <string>
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

// Which Ulysses degrees the model allows on `gpus` devices: divisors of the head count
// that divide gpus.
std::vector<int> AllowedUlyssesDegrees(const ModelSpec& model, int gpus);

// Which sequence-parallel degrees split the image tokens evenly (see kRuleSpRows).
bool SequenceSplits(const TokenGeometry& tokens, int sp);

}  // namespace ditune

#endif  // DITUNE_CORE_VALIDATE_H_
