// The shapes of one DiT model, as shipped in data/models/<id>.json.
#ifndef DITUNE_CORE_MODEL_SPEC_H_
#define DITUNE_CORE_MODEL_SPEC_H_

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "core/runtime_support.h"

namespace ditune {

// cross: self-attention, cross-attention to text, MLP, adaLN (PixArt, HunyuanDiT, Wan).
// joint: MMDiT double stream, per-stream weights, joint attention over [text; image].
// single: Flux single-stream block (parallel attention and MLP over [text; image]).
// spatial: a cross block whose self-attention stays within one frame (Latte).
// temporal: self-attention across frames at one spatial position, no cross-attention, MLP
//   (Latte's temporal blocks).
enum class BlockFamily { kCross, kJoint, kSingle, kSpatial, kTemporal };
inline constexpr int kNumBlockFamilies = 5;
inline constexpr BlockFamily kAllBlockFamilies[kNumBlockFamilies] = {
    BlockFamily::kCross, BlockFamily::kJoint, BlockFamily::kSingle, BlockFamily::kSpatial, BlockFamily::kTemporal};
// Whether the family's attention runs over the text tokens too (joint, single).
bool AttendsOverText(BlockFamily f);
enum class AttentionKind { kSoftmax, kLinear };
enum class Modality { kImage, kVideo };

std::string_view BlockFamilyName(BlockFamily f);

struct BlockGroup {
  BlockFamily family = BlockFamily::kCross;
  int count = 0;
};

struct TextEncoderSpec {
  std::string name;
  double params = 0;  // parameter count
  // The parameters outside the encoder's layers (token embedding, output head, a vision
  // tower), which tensor parallelism over the layers (te=parallel) leaves whole and FSDP's
  // root unit (te=fsdp) keeps gathered after the first forward; and the layer count (one
  // layer is gathered at a time). 0 where not given: nothing kept whole, 24 layers.
  double unsplit_params = 0;
  int layers = 0;
  // An image encoder loaded beside the text encoders (Wan I2V's CLIP): always whole on the
  // GPU, whatever te= places the text encoders.
  bool image_encoder = false;
};

// What the VAE decoder holds while it decodes (the model file's "vae.decode_memory"), from
// its architecture. Absent: diffusers' 2-D `Decoder` (AutoencoderKL, AutoencoderKLFlux2)
// with block_out_channels (128, 256, 512, 512), video decoders eight frames at a time. Its
// peak is the last up block's first residual block (huggingface/diffusers@58eb52c
// models/autoencoders/vae.py `Decoder.forward`, models/resnet.py `ResnetBlock2D.forward`):
// its input is the 256-channel map that the block before upsampled to full resolution
// (upsampling.py `Upsample2D`), kept by the caller and for the shortcut while norm1 and
// the SiLU each make a new 256-channel map (norm1's freed only after the SiLU); the
// shortcut, the sum and its division by output_scale_factor, 128 channels each with the
// same input still held, come to the same. Three maps of 256 channels.
struct VaeDecodeMemory {
  // Channels of the decoder's maps at the output resolution, and how many such maps are
  // alive at once at its peak (a residual block's input kept for the skip, plus the
  // temporaries its norm, activation and convolution make).
  double full_res_channels = 256;
  double live_maps = 3;
  // Output frames decoded at once (a causal decoder's chunk); 0: every frame.
  int frames_at_once = 8;
  // A causal decoder caches the last `cache_frames` input frames of each causal
  // convolution: the input channels of those convolutions summed, per scale (1: output
  // resolution, 2: half, ...).
  int cache_frames = 0;
  std::vector<std::pair<int, double>> cached_channels;
  // Tiled decoding (vae=tiled): the tile's edge in output pixels, the overlap between tiles
  // (a fraction of the tile) and the frames per temporal tile (0: no temporal tiling).
  int tile_pixels = 512;
  double tile_overlap = 0.25;
  int tile_frames = 0;
  std::string source;
};

struct ModelSpec {
  std::string id;
  std::string name;
  std::string source;
  std::string notes;
  Modality modality = Modality::kImage;
  std::vector<BlockGroup> blocks;  // in execution order
  int hidden = 0;
  int heads = 0;
  int head_dim = 0;
  int mlp_hidden = 0;
  bool mlp_gated = false;
  AttentionKind attention = AttentionKind::kSoftmax;
  int text_hidden = 0;         // width of the text embeddings fed to the DiT
  int text_stream_hidden = 0;  // width of the text stream inside joint blocks
  int text_tokens = 0;
  int patch_spatial = 1;
  int patch_temporal = 1;
  int latent_channels = 0;
  int vae_spatial = 8;
  int vae_temporal = 1;
  // A pipeline that maps frames by groups (Step-Video: floors the frame count to a multiple
  // of 17 and makes 3 latent frames per 17): frames per group and latent frames per group;
  // 0 when the VAE's causal rule 1 + (frames - 1) / vae_temporal applies.
  int frame_group = 0;
  int latent_frames_per_group = 0;
  double vae_decoder_params = 0;
  // The encoder's parameters: a runtime loads the whole autoencoder onto the GPU, so they are
  // resident beside the decoder's though nothing of a text-to-video run encodes (LTX-2's video
  // encoder is larger than its decoder). 0 where the model file gives none.
  double vae_encoder_params = 0;
  double vae_decoder_flops_per_pixel = 0;  // per output pixel and frame
  // Width of the decoder's self-attention over every latent position of a frame (the SD-family
  // VAE's mid block: one head of 512 channels), whose cost is quadratic in the latent size and
  // so not a per-pixel figure; 0 where the decoder has none (or only linear attention).
  double vae_decoder_attention_channels = 0;
  VaeDecodeMemory vae_decode_memory;
  std::vector<TextEncoderSpec> text_encoders;
  bool uses_cfg = true;
  // Forwards classifier-free guidance runs per step where uses_cfg: 2 (conditional and
  // unconditional), 3 where an image guidance branch joins them (Open-Sora 2.0's
  // [text, negative, negative] with the image condition zeroed in the third, batched in one
  // forward). Read it through GuidanceBranches().
  int guidance_branches = 2;
  int GuidanceBranches() const { return uses_cfg ? guidance_branches : 1; }
  // A ControlNet run beside the DiT every step (Z-Image-Turbo-Fun-ControlNet-Union): `blocks`
  // blocks of `family` over the DiT's tokens, whose outputs ("hints") are added to the DiT's
  // stream. A runtime splits them over the sequence ranks only where asked
  // (ParallelConfig::controlnet); otherwise every rank runs them whole. Where the DiT's
  // sequence is split, the runtime gathers the DiT's stream after `gathers` of its blocks to
  // add the whole-sequence hints (cache-dit's ControlNet plans). count 0: no ControlNet.
  struct ControlBranch {
    BlockFamily family = BlockFamily::kSingle;
    int blocks = 0;
    int hints = 0;        // whole-sequence outputs held until the DiT adds them
    int gathers = 0;      // DiT blocks after which the split stream is all-gathered
    double params = 0;    // the ControlNet's own weights
    std::string source;
  };
  ControlBranch control;
  // Host time of one eager forward of each block family, measured on the block code the
  // eager runtimes run (diffusers' block classes: bench/diffusers_host_ops.py), in framework
  // ops of the measuring host: its host µs per block over its mean host µs per ATen op, so
  // Mechanisms::eager_op_us turns it into the deploying host's time. 0 for a family not
  // measured: its counted ops (costmodels/dit_ops.cc) and the family's host scale stand.
  struct EagerHostOps {
    double by_family[kNumBlockFamilies] = {};
    std::string source;
    double Of(BlockFamily f) const { return by_family[static_cast<int>(f)]; }
  };
  EagerHostOps eager_host_ops;
  // The ATen ops an eager step dispatches outside the blocks, counted on the runtime's model
  // code and scheduler (bench/diffusers_step_ops.py): `outside` per forward of the whole
  // transformer (embedders, rotary tables, final norm and projection, unpatchify), `scheduler`
  // per scheduler step. Zero: not counted (the step's own few ops are then counted by hand and
  // the scheduler is not priced).
  struct StepHostOps {
    double outside = 0;
    double scheduler = 0;
    std::string source;
  };
  StepHostOps step_host_ops;
  bool skip_connections = false;
  // Joint blocks whose text and image tokens share one set of attention and MLP weights
  // (CogVideoX's expert adaptive LayerNorm): same FLOPs, half the parameters.
  bool joint_shared_weights = false;
  // The adaLN modulation is computed once per forward by model-level layers every block
  // shares (FLUX.2: double_stream_modulation_img/_txt and single_stream_modulation, diffusers
  // transformer_flux2.py), not by a layer in each block: its weights lie outside the blocks
  // (whole on every tensor-parallel rank) and its GEMMs run once per forward.
  bool shared_modulation = false;
  // The reference pipeline serves the text encoders and VAE from a separate process, so
  // they do not occupy the DiT's GPUs (StepVideo).
  bool encoders_remote = false;
  double published_params = 0;  // one expert's, for a mixture of experts
  // A mixture of experts chosen by noise level (Wan2.2 A14B: a high-noise and a low-noise
  // DiT of the same shape, one running per step): how many. Every expert's weights are held
  // unless model CPU offload swaps them in turn.
  int experts = 1;
  int default_steps = 0;
  int default_height = 0;
  int default_width = 0;
  int default_frames = 1;
  // What each runtime runs for this model, by runtime id: "xdit" from the model file's
  // "xdit" object, the others from data/runtimes (Catalog::Load). A runtime absent here does
  // not run the model (ditune's engine is never listed: its rules are its own).
  std::map<std::string, RuntimeSupport, std::less<>> runtimes;
  // The entry of runtime `runtime_id`, or nullptr when it does not run the model.
  const RuntimeSupport* runtime(std::string_view runtime_id) const {
    auto it = runtimes.find(runtime_id);
    return it == runtimes.end() ? nullptr : &it->second;
  }

  int num_blocks() const;
  int num_blocks(BlockFamily family) const;
  // The family of block `index` (0-based, execution order). Requires index < num_blocks().
  BlockFamily family_of(int index) const;
  double text_encoder_params() const;
  // Whether it has Latte's frame-local blocks (spatial or temporal), which ditune's
  // executor does not run yet.
  bool has_frame_blocks() const {
    return num_blocks(BlockFamily::kSpatial) + num_blocks(BlockFamily::kTemporal) > 0;
  }
};

// "runtime 'R' runs no entry point for M; runtimes that run it: a, b, ditune" — the message
// every refusal of a runtime for a model gives.
std::string RuntimeRunsNoEntryMessage(const ModelSpec& model, std::string_view runtime);

// OK, or InvalidArgument naming the blocks ditune's executor cannot run for this model.
Status ExecutorRunsModel(const ModelSpec& model);

// Parses and cross-checks one model description (hidden = heads x head_dim, positive
// sizes, known enums, no unknown fields). `origin` names the source in messages.
StatusOr<ModelSpec> ParseModelSpec(const nlohmann::json& j, const std::string& origin);

}  // namespace ditune

#endif  // DITUNE_CORE_MODEL_SPEC_H_
