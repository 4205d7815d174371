// What a runtime runs for one model: the entry point (xDiT's unified runner or an example
// script, Wan's generate.py, SGLang's `sglang generate`, ...), the flags that entry point
// accepts, which parallel methods and options it implements for the model, how it splits
// the sequence, and its extra constraints. xDiT's facts are the "xdit" object of
// data/models/<id>.json; every other runtime's are data/runtimes/<id>.json (RuntimeSpec).
// Every fact carries the source that states it (README table, runner docs, a script line).
#ifndef DITUNE_CORE_RUNTIME_SUPPORT_H_
#define DITUNE_CORE_RUNTIME_SUPPORT_H_

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace ditune {

// The parallel methods and options a runtime may or may not run for a model.
enum class RuntimeMethod {
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
  kTextEncoderParallel,
  // Memory placements (ParallelConfig::te and ::vae): "te=fsdp", "te=cpu", "vae=tiled".
  kTextEncoderFsdp,
  kTextEncoderCpu,
  kVaeTiling,
  // The ControlNet split over the sequence ranks (ParallelConfig::controlnet).
  kControlNetParallel,
  // The VAE decoded on the CPU ("vae=cpu").
  kVaeCpu,
};
inline constexpr int kNumRuntimeMethods = 18;
// The key in the JSON ("ulysses", "parallel_vae", ...).
std::string_view RuntimeMethodKey(RuntimeMethod m);
// A phrase for messages ("Ulysses sequence parallelism", "tensor parallelism", ...).
std::string_view RuntimeMethodPhrase(RuntimeMethod m);

// How the entry point splits the image sequence over the sequence-parallel ranks.
// kRows: whole patch rows of the latent (image models, CogVideoX, ConsisID, Latte): the
//   sequence degree must divide the patch rows. kTokens: the flattened token sequence
//   (HunyuanVideo, Step-Video): it must divide the token count. kPadded: the sequence is
//   padded to a multiple of the degree (Wan): any degree. kRowsOrColumns: whole patch rows,
//   else whole patch columns (HunyuanVideo's sample_video.py): the degree divides either.
//   kAllTokens: the text and image tokens concatenated, in equal chunks, unpadded (Open-Sora
//   2.0's ColossalAI sequence parallelism): the degree divides text + image tokens.
enum class SequenceSplitUnit { kRows, kTokens, kPadded, kRowsOrColumns, kAllTokens };
std::string_view SequenceSplitUnitName(SequenceSplitUnit u);

// How the entry point assigns blocks to PipeFusion stages. kCeil: ceil(blocks / stages) to
// every stage but the last, which takes the rest (xDiT). kBalanced: the first
// blocks % stages stages take one more (ditune's engine).
enum class StagePartition { kCeil, kBalanced };

// What tensor parallelism splits. kMegatron: every projection and the MLP (column-parallel
// in, row-parallel out: one all-reduce per residual branch; PyTorch's DTensor plans, as
// cache-dit's). kCrossWhole: the same but cross-attention, which stays whole on every rank
// (xDiT's DiT TP of its published PixArt runs: self-attention by heads and the FeedForward
// split, `if subname == "attn1"` only).
enum class TpSplit { kMegatron, kCrossWhole };

// Constraints beyond the methods' own rules (ids are stable: messages and tests name them).
inline constexpr const char* kConstraintTpOnlyWithUlysses = "tp-only-with-ulysses";  // tp > 1: no other method but Ulysses
// The entry point pads the head count up to a multiple of the Ulysses degree, so Ulysses
// need not divide the heads (the padded heads are computed).
inline constexpr const char* kConstraintHeadsPadded = "heads-padded-for-ulysses";
// On more than one GPU every rank is a sequence-parallel rank: ulysses x ring = the GPUs
// (Wan's generate.py asserts it).
inline constexpr const char* kConstraintSpIsWorld = "sp-is-world";
// The weight sharding takes no degree: it shards over every rank (fsdp = 1 or the GPUs).
inline constexpr const char* kConstraintFsdpIsWorld = "fsdp-is-world";
// Model CPU offload runs on one GPU only, never with sequence parallelism (HunyuanVideo's
// sample_video.py refuses the two together).
inline constexpr const char* kConstraintOffloadAlone = "offload-without-sp";
// On more than one GPU one method spans every rank, tensor parallelism or Ring, never both
// (Open-Sora 2.0's ColossalAI plugin: "if tp_size > 1: assert sp_size == 1", its sequence
// group is the whole world).
inline constexpr const char* kConstraintTpOrRingIsWorld = "tp-or-ring-is-world";
// The entry point is launched at square sizes only, height = width a multiple of 16 (Open-Sora
// 2.0 takes an area class "Npx" and an aspect ratio; ditune writes 1:1).
inline constexpr const char* kConstraintSquareSize = "square-size";

struct RuntimeFact {
  bool runs = false;
  std::string source;  // where it is stated
};

struct RuntimeConstraint {
  std::string rule;    // one of the kXdit* ids above
  std::string source;
};

// How the entry point holds the pipeline's parts in GPU memory, where it differs from the
// usual bf16 pipeline on every rank (the "memory" object; every field optional).
struct RuntimeMemory {
  // Bytes per DiT parameter as held on the GPU without FSDP (Wan's generate.py keeps the
  // checkpoint's fp32 and computes under bf16 autocast: 4).
  double dit_bytes_per_param = 2;
  // Bytes per DiT parameter of an FSDP shard (the shard keeps the checkpoint's precision;
  // the gathered block is cast to the compute precision, 2 bytes).
  double fsdp_shard_bytes_per_param = 2;
  // Bytes per value of the VAE's weights and decode activations (fp32 VAE: 4).
  double vae_bytes_per_value = 2;
  // The entry point runs classifier-free guidance's two branches one after the other (Wan's
  // generate.py: the conditional forward, then the unconditional one), not as a batch of two:
  // a forward holds one branch's activations, and a step costs two forwards of batch one —
  // twice the host's ops and the collectives' latencies (SequentialForwards).
  bool cfg_sequential = false;
  // Bytes per value of the DiT's residual stream and its normalised copy (Wan keeps them in
  // fp32: 4), and of the rotary embedding's temporaries, two of one head-split tensor at a
  // time (Wan applies it in complex float64: 8; 0 where it is applied in place). Where they
  // are wider, the attention's peak is the rotation of K: Q, K (the norms' output, in the
  // weights' precision) and V, the rotated Q and the rotated K in fp32, and the temporaries.
  double residual_bytes = 2;
  double rope_bytes = 0;
  // The timestep's modulation is computed per token in fp32 (Wan2.2's model.py expands t
  // over the sequence): the six-way modulation held through the forward, each block's sum
  // with its own, and the embedding, 13 fp32 values per hidden unit and token.
  bool modulation_per_token = false;
  // Only the first rank decodes (the others wait): the decode's memory is counted on rank 0
  // alone, which is then the largest rank.
  bool vae_decode_first_rank = false;
  // The entry point always decodes tile by tile (HunyuanVideo's sample_video.py sets
  // --vae-tiling by default): vae=whole decodes as vae=tiled.
  bool vae_tiled_by_default = false;
  // On more than one GPU the entry point always decodes over every rank (Open-Sora 2.0's
  // VAE booster, tensor parallel over the convolutions' channels): vae=whole decodes as
  // vae=parallel there.
  bool vae_parallel_by_default = false;
  // Bytes per DiT parameter of the checkpoint's tensors the entry point reads onto the GPU
  // beside the model while loading it (Open-Sora 2.0 until 2025-03-26: safetensors'
  // load_file to the current CUDA device, bf16: 2); 0 where it reads them in host memory.
  // Loading comes before any split: the whole DiT is held.
  double load_copy_bytes_per_param = 0;
  // Model CPU offload as the entry point does it. Absent: diffusers' enable_model_cpu_offload
  // (each part on the GPU only while it runs). Wan's generate.py keeps the VAE on the GPU
  // throughout (vae_stays) and, for text-to-video, loads the DiT before the text encoder
  // runs (dit_during_text).
  bool offload_vae_stays = false;
  bool offload_dit_during_text = false;
  // The entry point streams the text encoders' layers from pinned host memory by default
  // (SGLang Diffusion's layerwise offload): on the GPU stay only the weights outside the
  // layers (the model file's unsplit_params) and, while encoding, the running layer and the
  // one fetched ahead. Only where te= leaves the encoders whole.
  bool text_encoders_layerwise = false;
  std::string source;
};

struct RuntimeSupport {
  std::string runtime;       // the runtime's id ("xdit", "wan-generate", ...)
  std::string runtime_name;  // as messages name it ("xDiT", "Wan generate.py", ...)
  // The command that starts the entry point, with placeholders {gpus}, {gpus_per_node},
  // {nodes} and {devices} (0,1,..,gpus-1); the workload and parallel flags are appended.
  std::string command;
  std::string command_source;
  // The flags the entry point accepts, by what they set: workload keys "model", "height",
  // "width", "size" (height and width in one flag), "frames", "steps", "output_type",
  // "patches", "warmup", and the method keys of RuntimeMethodKey for the methods and options
  // it runs. A method that runs has its flag; nothing else is ever printed. A flag is
  // followed by its value, unless it holds "{}" (the value goes there), "{width}" or
  // "{height}" (those go there), or it is a switch (cfg and the options, or a degree the
  // sp-is-world / fsdp-is-world constraints fix), which is printed as it stands.
  std::map<std::string, std::string, std::less<>> flags;
  std::string flags_source;
  // The value of the "model" flag, when the command does not name the model itself.
  std::string model_arg;
  std::array<RuntimeFact, kNumRuntimeMethods> methods;
  SequenceSplitUnit split = SequenceSplitUnit::kRows;
  std::string split_source;
  StagePartition stages = StagePartition::kCeil;
  TpSplit tp_split = TpSplit::kMegatron;
  std::string tp_split_source;
  std::vector<RuntimeConstraint> constraints;
  // A frame count the entry point always generates (0: it takes the workload's).
  int fixed_frames = 0;
  std::string fixed_frames_source;
  // What the entry point is told when an option is NOT chosen, where its default is on (Wan's
  // generate.py offloads on one GPU unless given "--offload_model False"): option key -> flag.
  // torch_compile's off flag is the runtime's eager mode where it compiles by default
  // (vLLM-Omni's --enforce-eager), told only when eager=1 asks for it.
  std::map<std::string, std::string, std::less<>> off_flags;
  std::string off_flags_source;  // where the off flags are from, where flags_source does not say
  // A file the launch writes beside the command (TensorRT-LLM VisualGen's YAML, a diffusers
  // script): its name (the command's {config_file}), its format ("yaml" or "python": how
  // booleans are written) and its text, with placeholders {model}, {height}, {width},
  // {frames}, {steps}, {gpus}, the degrees {ulysses} {ring} {cfg} {tp} {fsdp}, the options
  // {torch_compile} {cpu_offload} {parallel_vae} {vae_tiling} {vae_cpu} {text_encoder_parallel}
  // {text_encoder_fsdp} {text_encoder_cpu}, and
  // {uneven_sequence} (whether the image tokens split unevenly over the sequence ranks). A
  // method whose placeholder is in the text needs no flag.
  std::string config_name;
  std::string config_format;
  std::string config_text;
  std::string config_source;
  std::string notes;
  RuntimeMemory memory;

  const RuntimeFact& method(RuntimeMethod m) const { return methods[static_cast<int>(m)]; }
  bool runs(RuntimeMethod m) const { return method(m).runs; }
  // The flag the entry point takes for `key`, or nullptr when it takes none.
  const std::string* flag(std::string_view key) const;
  // The constraint with this id, or nullptr.
  const RuntimeConstraint* constraint(std::string_view rule) const;
};

// Parses one runtime's object for one model (the "xdit" object of a model file, or a model's
// entry of a runtime file merged over its "defaults"): every method listed with "runs" and
// "source", every running method's flag present, known constraint ids and split units, no
// unknown keys. `origin` names the object in messages.
// `compiled_by_default`: the runtime compiles unless told otherwise, so torch_compile needs no
// flag.
StatusOr<RuntimeSupport> ParseRuntimeSupport(const nlohmann::json& j, const std::string& origin,
                                             const std::string& runtime, const std::string& runtime_name,
                                             bool compiled_by_default = false);

// A runtime as a whole (data/runtimes/<id>.json): what it is, how its runs are priced, and
// — in the catalog — its entry per model (ModelSpec::runtimes).
// How a runtime's own script or benchmark times a generation, so that a user can measure
// what a plan predicts: what its printed figure covers and how many warm-up calls come first.
struct RuntimeTiming {
  std::string how;          // one sentence: the figure it prints and around what it is taken
  int warmup_calls = -1;    // warm-up calls before the timed one; -1 where not stated
  int text_encoding = -1;   // the figure includes the text encoders: 1 yes, 0 no, -1 not stated
  int vae_decode = -1;      // the figure includes the VAE decode: 1 yes, 0 no, -1 not stated
  std::string source;       // repository, file, a short quote
};

struct RuntimeSpec {
  std::string id;
  std::string name;
  std::string source;
  std::string summary;  // one line for listings: what the runtime is and who deploys it
  // ditune's own engine: its rules (CheckConfig without an entry) and the engine's scale.
  // Every other runtime is PyTorch and is priced on the calibrated PyTorch scale of the model.
  bool engine = false;
  // torch.compile (or an ahead-of-time engine) is on unless the user turns it off.
  bool compiled_by_default = false;
  std::string compiled_source;
  // Ring attention merges each block's partial output into the running one with a chain of
  // elementwise ops (the log-sum-exp rescaling). Fused: the runtime's ring library compiles
  // that chain into one kernel (xDiT's yunchang, TorchScript); otherwise it runs as eager
  // kernels, one per op.
  bool ring_merge_fused = false;
  std::string ring_merge_source;
  std::optional<RuntimeTiming> timing;  // absent where no source says
};

// Whether a runtime's run of a model is compiled: asked for (compile=1, --torch-compile) or
// the runtime's default, where its entry point for the model compiles it, unless its eager
// mode is asked for (eager=1, vLLM-Omni's --enforce-eager). `spec` or `entry` null: not
// compiled.
bool RuntimeCompiles(const RuntimeSpec* spec, const RuntimeSupport* entry, bool asked, bool eager = false);

// Parses a runtime file: the RuntimeSpec, and for each model id its support object (the
// file's "defaults" with the model's entry merged over them: objects key by key, other
// values replaced), parsed by ParseRuntimeSupport. `origin` names the file.
struct RuntimeFile {
  std::string id;  // spec.id
  RuntimeSpec spec;
  std::vector<std::pair<std::string, RuntimeSupport>> models;
};
StatusOr<RuntimeFile> ParseRuntimeFile(const nlohmann::json& j, const std::string& origin);

}  // namespace ditune

#endif  // DITUNE_CORE_RUNTIME_SUPPORT_H_
