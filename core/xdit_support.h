// What xDiT runs for one model, as shipped in the "xdit" object of data/models/<id>.json:
// the entry point (xDiT's unified runner, an example script, or the model's own launcher),
// the flags that entry point accepts, which parallel methods and runner options it
// implements for the model, how it splits the sequence, and the model's extra constraints.
// Every fact carries the source that states it (README table, runner docs, a script line).
#ifndef DITUNE_CORE_XDIT_SUPPORT_H_
#define DITUNE_CORE_XDIT_SUPPORT_H_

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace ditune {

// The parallel methods and runner options xDiT may or may not run for a model.
enum class XditMethod {
  kUlysses,
  kRing,
  kPipeFusion,
  kCfg,
  kTp,
  kDp,
  kDistriFusion,
  kParallelVae,
  kFullyShard,
  kTorchCompile,
  kFp8Gemms,
  kCpuOffload,
};
inline constexpr int kNumXditMethods = 12;
// The key in the JSON ("ulysses", "parallel_vae", ...).
std::string_view XditMethodKey(XditMethod m);
// A phrase for messages ("Ulysses sequence parallelism", "tensor parallelism", ...).
std::string_view XditMethodPhrase(XditMethod m);

// How the entry point splits the image sequence over the sequence-parallel ranks.
// kRows: whole patch rows of the latent (image models, CogVideoX, ConsisID, Latte): the
//   sequence degree must divide the patch rows. kTokens: the flattened token sequence
//   (HunyuanVideo, Step-Video): it must divide the token count. kPadded: the sequence is
//   padded to a multiple of the degree (Wan): any degree.
enum class SequenceSplitUnit { kRows, kTokens, kPadded };
std::string_view SequenceSplitUnitName(SequenceSplitUnit u);

// How the entry point assigns blocks to PipeFusion stages. kCeil: ceil(blocks / stages) to
// every stage but the last, which takes the rest (xDiT). kBalanced: the first
// blocks % stages stages take one more (ditune's engine).
enum class StagePartition { kCeil, kBalanced };

// Constraints beyond the methods' own rules (ids are stable: messages and tests name them).
inline constexpr const char* kXditTpOnlyWithUlysses = "tp-only-with-ulysses";  // tp > 1: no other method but Ulysses
// The entry point pads the head count up to a multiple of the Ulysses degree, so Ulysses
// need not divide the heads (the padded heads are computed).
inline constexpr const char* kXditHeadsPadded = "heads-padded-for-ulysses";

struct XditFact {
  bool runs = false;
  std::string source;  // where it is stated
};

struct XditConstraint {
  std::string rule;    // one of the kXdit* ids above
  std::string source;
};

struct XditSupport {
  // The command that starts the entry point, with placeholders {gpus}, {gpus_per_node},
  // {nodes} and {devices} (0,1,..,gpus-1); the workload and parallel flags are appended.
  std::string command;
  std::string command_source;
  // The flags the entry point accepts, by what they set: workload keys "model", "height",
  // "width", "frames", "steps", "output_type", and the method keys of XditMethodKey for
  // the methods and options it runs. A method that runs has its flag; nothing else is ever
  // printed.
  std::map<std::string, std::string, std::less<>> flags;
  std::string flags_source;
  // The value of the "model" flag, when the command does not name the model itself.
  std::string model_arg;
  std::array<XditFact, kNumXditMethods> methods;
  SequenceSplitUnit split = SequenceSplitUnit::kRows;
  std::string split_source;
  StagePartition stages = StagePartition::kCeil;
  std::vector<XditConstraint> constraints;
  // A frame count the entry point always generates (0: it takes the workload's).
  int fixed_frames = 0;
  std::string fixed_frames_source;

  const XditFact& method(XditMethod m) const { return methods[static_cast<int>(m)]; }
  bool runs(XditMethod m) const { return method(m).runs; }
  // The flag the entry point takes for `key`, or nullptr when it takes none.
  const std::string* flag(std::string_view key) const;
  // The constraint with this id, or nullptr.
  const XditConstraint* constraint(std::string_view rule) const;
};

// Parses the "xdit" object of a model file: every method listed with "runs" and "source",
// every running method's flag present, known constraint ids and split units, no unknown
// keys. `origin` names the object in messages.
StatusOr<XditSupport> ParseXditSupport(const nlohmann::json& j, const std::string& origin);

}  // namespace ditune

#endif  // DITUNE_CORE_XDIT_SUPPORT_H_
