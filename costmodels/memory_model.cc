#include "costmodels/memory_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/enum_names.h"
#include "costmodels/dit_ops.h"

namespace ditune {
namespace {

constexpr EnumName<MemoryPhase> kMemoryPhaseNames[] = {
    {MemoryPhase::kTextEncode, "text encoding"},
    {MemoryPhase::kDenoise, "denoising"},
    {MemoryPhase::kVaeDecode, "VAE decode"},
    {MemoryPhase::kLoad, "loading the checkpoint"},
};

// The compute precision of weights gathered or split for use, and of the encoders.
constexpr double kComputeBytes = kElementBytes;
// Layers of a text encoder whose file does not give them (T5-XXL's encoder has 24).
constexpr int kDefaultEncoderLayers = 24;

struct EncoderBytes {
  Bytes resident;  // on the GPU from load to the end (when not offloaded)
  Bytes encoding;  // on the GPU only while encoding, on top of `resident`
  Bytes turn;      // with model CPU offload: what the encoders' turn brings
};

// The text and image encoders' bytes on one rank, as te= places the text encoders.
EncoderBytes Encoders(const ModelSpec& m, const ParallelConfig& c, const RuntimeMemory& place) {
  EncoderBytes e;
  if (m.encoders_remote) return e;
  const double world = c.world_size();
  for (const TextEncoderSpec& t : m.text_encoders) {
    const double whole = t.params * kComputeBytes;
    if (t.image_encoder) {
      e.resident = e.resident + Bytes(whole);
      e.turn = e.turn + Bytes(whole);
      continue;
    }
    switch (c.te) {
      case TextEncoderPlacement::kWhole:
        if (place.text_encoders_layerwise && t.unsplit_params > 0) {
          // Streamed layer by layer: what lies outside the layers stays, and while encoding
          // the running layer and the one fetched ahead.
          const double layers = t.layers > 0 ? t.layers : kDefaultEncoderLayers;
          const Bytes kept(t.unsplit_params * kComputeBytes);
          const Bytes streaming(2.0 * (t.params - t.unsplit_params) / layers * kComputeBytes);
          e.resident = e.resident + kept;
          e.encoding = e.encoding + streaming;
          e.turn = e.turn + kept + streaming;
          break;
        }
        e.resident = e.resident + Bytes(whole);
        e.turn = e.turn + Bytes(whole);
        break;
      case TextEncoderPlacement::kParallel: {
        // Tensor parallel over the layers: what lies outside them stays whole.
        const Bytes split((t.params - t.unsplit_params) * kComputeBytes / world + t.unsplit_params * kComputeBytes);
        e.resident = e.resident + split;
        e.turn = e.turn + split;
        break;
      }
      case TextEncoderPlacement::kFsdp: {
        // The shard, and the root unit (the token embedding) FSDP keeps gathered after the
        // first forward ("Do not free the root's parameters in the post-forward for
        // FULL_SHARD", pytorch torch/distributed/fsdp/_runtime_utils.py); while encoding,
        // the running and prefetched layers gathered.
        const double layers = t.layers > 0 ? t.layers : kDefaultEncoderLayers;
        const double layer = (t.params - t.unsplit_params) / layers * kComputeBytes;
        const Bytes kept(whole / world + t.unsplit_params * kComputeBytes);
        e.resident = e.resident + kept;
        e.encoding = e.encoding + Bytes(2.0 * layer);
        e.turn = e.turn + kept + Bytes(2.0 * layer);
        break;
      }
      case TextEncoderPlacement::kCpu:
        break;  // encodes in host memory
    }
  }
  return e;
}

}  // namespace

std::string_view MemoryPhaseName(MemoryPhase p) { return NameIn(kMemoryPhaseNames, p); }

VaePlacement EffectiveVae(const ParallelConfig& c, const RuntimeMemory& place) {
  if (c.vae != VaePlacement::kWhole) return c.vae;
  if (place.vae_parallel_by_default && c.world_size() > 1) return VaePlacement::kParallel;
  return place.vae_tiled_by_default ? VaePlacement::kTiled : c.vae;
}

Bytes MemoryBreakdown::tensors_peak() const { return *std::max_element(phases.begin(), phases.end()); }

MemoryPhase MemoryBreakdown::peak_phase() const {
  return static_cast<MemoryPhase>(std::max_element(phases.begin(), phases.end()) - phases.begin());
}

double TextEncoderShards(const ParallelConfig& c) {
  return c.te == TextEncoderPlacement::kParallel ? c.world_size() : 1.0;
}

Bytes DitWeightBytes(const ModelSpec& m, const ParallelConfig& c, const RuntimeMemory& placement) {
  // Published parameter counts are the reliable ones; the shapes' count is the fallback.
  const double params = m.published_params > 0 ? m.published_params : DitParams(m);
  // Every expert of a mixture is held (model CPU offload swaps them: RankMemory counts one).
  const double experts = c.offload != 0 ? 1.0 : m.experts;
  double largest = 0;
  double blocks = 0;
  for (const auto& g : m.blocks) {
    largest = std::max(largest, BlockParams(m, g.family));
    blocks += g.count * BlockParams(m, g.family);
  }
  const double computed = std::max(1.0, DitParams(m));
  const double scale = params / computed;  // published over computed
  // Outside the blocks (embedders, shared modulation, head): tensor parallelism splits the
  // blocks' attention and MLP only, so these stay whole on every tp rank.
  const double root = experts * std::max(0.0, computed - blocks) * scale;
  const double split = (experts * params - root) / (c.tp * c.pipefusion) + root / c.pipefusion;
  if (c.fsdp <= 1) return Bytes(split * placement.dit_bytes_per_param);
  // Sharded over fsdp ranks in the checkpoint's precision; the root unit stays gathered after
  // the first forward, and the running and the prefetched block are gathered in the compute
  // precision (FSDP all-gathers one block ahead).
  return Bytes(split / c.fsdp * placement.fsdp_shard_bytes_per_param + root * kComputeBytes +
               2.0 * largest * scale * kComputeBytes / c.tp);
}

Bytes VaeDecodeBytes(const ModelSpec& m, const Workload& w, const ParallelConfig& c, double bytes_per_value) {
  if (w.output != OutputType::kDecoded || c.vae == VaePlacement::kCpu) return Bytes(0);
  const VaeDecodeMemory& d = m.vae_decode_memory;
  double height = w.height;
  double width = w.width;
  const double frames = std::max(1, w.frames);
  double chunk = d.frames_at_once == 0 ? frames : std::min<double>(frames, d.frames_at_once);
  if (c.vae == VaePlacement::kTiled) {
    height = std::min<double>(height, d.tile_pixels);
    width = std::min<double>(width, d.tile_pixels);
    if (d.tile_frames > 0) chunk = std::min<double>(chunk, d.tile_frames);
  }
  // Parallel decode: each rank holds its rows of every map plus a halo (an eighth of a
  // patch's rows on each side); the decoded frames are gathered whole on every rank.
  const double share = c.vae == VaePlacement::kParallel && c.world_size() > 1 ? 1.25 / c.world_size() : 1.0;
  double cached = 0;
  for (const auto& [scale, channels] : d.cached_channels) cached += channels / (double(scale) * scale);
  const double pixels = height * width * share;
  const double maps = d.live_maps * d.full_res_channels * pixels * chunk;
  const double cache = d.cache_frames * cached * pixels;
  const double output = 3.0 * w.height * w.width * frames;
  return Bytes(bytes_per_value * w.batch * (maps + cache + output));
}

OffloadTraffic OffloadMoves(const ModelSpec& m, const ParallelConfig& c) {
  if (c.offload == 0) return {};
  const Bytes text = Encoders(m, c, RuntimeMemory{}).turn;
  const Bytes vae(m.encoders_remote ? 0.0 : (m.vae_decoder_params + m.vae_encoder_params) * kElementBytes);
  const Bytes dit = DitWeightBytes(m, c);
  return {text + text + dit, dit + vae + vae};
}

int SequentialForwards(const ModelSpec& model, const ParallelConfig& config, const RuntimeMemory& place) {
  const int branches = model.GuidanceBranches();
  const bool batched_elsewhere = config.cfg > 1 || config.pipefusion > 1 || config.distrifusion > 1;
  return place.cfg_sequential && branches > 1 && !batched_elsewhere ? branches : 1;
}

MemoryBreakdown RankMemory(const ModelSpec& m, const TokenGeometry& tokens, const Workload& workload,
                           const ParallelConfig& c, const GpuSpec& gpu, const MemoryOptions& opt) {
  MemoryBreakdown mb;
  const RuntimeMemory& place = opt.placement;
  const double B = kElementBytes;
  const double H = m.hidden;
  const double M = m.mlp_hidden;
  const int tp = c.tp;
  mb.weights = DitWeightBytes(m, c, place) + Bytes(m.control.params * kComputeBytes);
  const bool local_parts = opt.encoders_resident && !m.encoders_remote;
  const EncoderBytes enc = local_parts ? Encoders(m, c, place) : EncoderBytes{};
  // The VAE on the CPU (vae=cpu) holds nothing on the GPU.
  // The whole autoencoder is loaded: the encoder's weights sit beside the decoder's.
  mb.vae_weights = Bytes(local_parts && c.vae != VaePlacement::kCpu
                             ? (m.vae_decoder_params + m.vae_encoder_params) * place.vae_bytes_per_value
                             : 0.0);
  mb.text_encoder_weights = enc.resident + enc.encoding;
  mb.offloaded = c.offload != 0;
  if (!mb.offloaded) mb.encoders = enc.resident;

  const RankWork w = ComputeRankWork(m, tokens, workload, c);
  // Tokens resident per forward on this rank: one patch with PipeFusion.
  // One branch at a time where the runtime runs classifier-free guidance's branches in turn.
  const int forwards = SequentialForwards(m, c, place);
  const int batch = forwards > 1 && w.batch >= forwards ? w.batch / forwards : w.batch;
  const double n = static_cast<double>(batch) * static_cast<double>(w.img_tokens + w.txt_tokens);
  // Live at a block's peak: the residual stream and its normalised copy (full width), and
  // the larger of the attention phase (Q, K, V and the output, split by tp) and the MLP
  // phase (hidden and activated hidden, split by tp).
  // Ulysses' all-to-all buffers (gathered Q, K, V and the scattered O, as large as the
  // local ones) live only in the attention phase.
  // The runtime may keep the residual stream wider (residual_bytes) and apply the rotary
  // embedding through temporaries (rope_bytes: two of one head-split tensor at a time).
  const double a2a = c.ulysses > 1 ? 4.0 * H / tp : 0.0;
  double attn_phase = B * (4.0 * H / tp + a2a);
  if (place.rope_bytes > 0) {
    // The rotation of K is the attention's peak: Q and K out of their norms in the weights'
    // precision (FSDP's gathered blocks compute in bf16), V, the rotated Q and the rotated K
    // in fp32, and the rotation's two wide temporaries.
    const double qk_bytes = c.fsdp > 1 ? B : std::max(B, place.dit_bytes_per_param);
    attn_phase = (2.0 * qk_bytes + B + 4.0 + 4.0 + 2.0 * place.rope_bytes) * H / tp + B * a2a;
  }
  // fp32 timestep modulation per token: 13 values per hidden unit.
  const double modulation = place.modulation_per_token ? 13.0 * 4.0 * H : 0.0;
  const double mlp_phase = B * (m.mlp_gated ? 3.0 : 2.0) * M / tp;
  const double per_token = place.residual_bytes * 2.0 * H + modulation + std::max(attn_phase, mlp_phase);
  mb.activations = Bytes(n * per_token);
  if (m.control.blocks > 0) {
    // The ControlNet runs first, whole on every rank unless split like the DiT; its hints,
    // over the whole sequence, stay until the DiT adds them.
    const double whole = static_cast<double>(w.batch) * static_cast<double>(tokens.image_tokens() + tokens.text_tokens);
    const double control_tokens = c.controlnet == ControlNetPlacement::kParallel ? n : whole;
    mb.activations = Bytes(std::max(n, control_tokens) * per_token + m.control.hints * whole * B * H);
  }
  // Ring keeps two K/V blocks in flight besides its own.
  const double ring = c.ring > 1 ? 2.0 * 2.0 * H / tp : 0.0;
  // Softmax statistics: fp32 max and sum per query and head.
  mb.attention = Bytes(n * (ring * B + 2.0 * 4.0 * m.heads / tp));

  const double seq = static_cast<double>(tokens.image_tokens() + tokens.text_tokens) * w.batch;
  if (c.pipefusion > 1) {
    // Stale K and V of the whole sequence for each layer of this stage.
    const double layers = static_cast<double>(m.num_blocks()) / c.pipefusion;
    mb.kv_buffers = Bytes(B * seq * 2.0 * H / (tp * c.ulysses) * layers);
  } else if (c.distrifusion > 1) {
    // One full-sequence K/V per layer: the communication manager's buffer, one slice per
    // device, that attention reads stale and the asynchronous all-gather refills in place;
    // and, while a layer attends, that layer's K/V concatenated whole (xdit-project/xDiT
    // branch legacy, pipefuser/utils.py PatchParallelismCommManager.create_buffer 'torch.empty(
    // self.numel, ...) for _ in range(self.distri_config.n_device_per_batch)';
    // pipefuser/modules/dit/patch_parallel/attn.py 'full_kv = torch.cat(new_buffer_list,
    // dim=1)'). The buffer is never freed: it is still there while the VAE decodes.
    mb.kv_buffers = Bytes(B * seq * 2.0 * H * m.num_blocks());
    mb.attention = mb.attention + Bytes(B * seq * 2.0 * H);
  }
  int communicators = 0;
  for (int d : {c.ulysses, c.ring, c.pipefusion, c.cfg, c.dp, c.tp, c.distrifusion}) communicators += d > 1;
  double patch_buffers = c.pipefusion > 1 ? 2.0 * B * n * H : 0.0;
  mb.comm_buffers = Bytes(patch_buffers) + opt.per_communicator * communicators;

  // The decoder's working set, on the rank(s) that decode: every rank, or the first only
  // (the largest rank, which this breakdown describes).
  ParallelConfig decode = c;
  decode.vae = EffectiveVae(c, place);
  mb.vae_decode = local_parts ? VaeDecodeBytes(m, workload, decode, place.vae_bytes_per_value) : Bytes(0);
  if (local_parts && decode.vae == VaePlacement::kParallel && place.vae_tiled_by_default && c.world_size() > 1) {
    // A runtime that tiles and splits each tile over the ranks (Open-Sora's tensor-parallel
    // decoder): a tile's working set, shared out as the parallel decode shares a frame.
    ParallelConfig tiled = decode;
    tiled.vae = VaePlacement::kTiled;
    mb.vae_decode = VaeDecodeBytes(m, workload, tiled, place.vae_bytes_per_value) * (1.25 / c.world_size());
  }
  mb.runtime = opt.runtime_overhead;
  mb.capacity = gpu.memory * opt.usable_fraction;

  // A runtime that reads the checkpoint onto the GPU holds the whole DiT (before any split
  // or shard: those come after loading) and the checkpoint's tensors at once.
  if (place.load_copy_bytes_per_param > 0 && !m.encoders_remote) {
    const double params = m.experts * (m.published_params > 0 ? m.published_params : DitParams(m));
    mb.loading = Bytes(params * (place.dit_bytes_per_param + place.load_copy_bytes_per_param));
  }
  const Bytes dit_work = mb.kv_buffers + mb.activations + mb.attention + mb.comm_buffers;
  auto& phase = mb.phases;
  constexpr int kText = static_cast<int>(MemoryPhase::kTextEncode);
  constexpr int kDenoise = static_cast<int>(MemoryPhase::kDenoise);
  constexpr int kDecode = static_cast<int>(MemoryPhase::kVaeDecode);
  phase[static_cast<int>(MemoryPhase::kLoad)] = mb.loading;
  if (!mb.offloaded) {
    // Everything loaded stays: each phase adds its own working set.
    const Bytes resident = mb.weights + enc.resident + mb.vae_weights;
    phase[kText] = resident + enc.encoding;
    phase[kDenoise] = resident + dit_work;
    // DistriFusion's K/V buffer outlives the denoising loop.
    phase[kDecode] = resident + mb.vae_decode + (c.distrifusion > 1 ? mb.kv_buffers : Bytes(0));
  } else {
    // Model CPU offload: each part comes to the GPU for its turn and leaves after it; the
    // runtime may keep the VAE throughout and the DiT through the text encoders' turn.
    const Bytes vae_kept = place.offload_vae_stays ? mb.vae_weights : Bytes(0);
    phase[kText] = enc.turn + vae_kept + (place.offload_dit_during_text ? mb.weights : Bytes(0));
    phase[kDenoise] = mb.weights + dit_work + vae_kept;
    phase[kDecode] = mb.vae_weights + mb.vae_decode;
  }
  return mb;
}

MemoryPhasesGb PhasesGb(const MemoryBreakdown& mb) {
  MemoryPhasesGb g;
  g.text_encoding = mb.phases[static_cast<int>(MemoryPhase::kTextEncode)].value() / 1e9;
  g.denoising = mb.phases[static_cast<int>(MemoryPhase::kDenoise)].value() / 1e9;
  g.vae_decode = mb.phases[static_cast<int>(MemoryPhase::kVaeDecode)].value() / 1e9;
  g.loading = mb.phases[static_cast<int>(MemoryPhase::kLoad)].value() / 1e9;
  g.runtime = mb.runtime.value() / 1e9;
  g.peak_phase = MemoryPhaseName(mb.peak_phase());
  return g;
}

std::string MemoryPhasesText(const MemoryBreakdown& mb) {
  const MemoryPhasesGb g = PhasesGb(mb);
  const std::string loading = g.loading > 0 ? fmt::format(", loading the checkpoint {:.1f} GB", g.loading) : "";
  return fmt::format("text encoding {:.1f} GB, denoising {:.1f} GB, VAE decode {:.1f} GB{} (+ runtime {:.1f} GB; peak: {})",
                     g.text_encoding, g.denoising, g.vae_decode, loading, g.runtime, g.peak_phase);
}

Bytes FitRuntimeOverhead(const MemoryBreakdown& modelled, Bytes measured_peak) {
  const Bytes without = modelled.tensors_peak();
  return measured_peak > without ? measured_peak - without : Bytes(0);
}

std::string MemoryBlocker(const ParallelConfig& c, const MemoryBreakdown& mb,
                          const RuntimeSupport* runtime) {
  auto gb = [](Bytes b) { return fmt::format("{:.1f} GB", b.value() / 1e9); };
  auto can = [&](RuntimeMethod m) { return runtime != nullptr && runtime->runs(m); };
  const bool several = c.world_size() > 1;
  const MemoryPhase phase = mb.peak_phase();
  if (phase == MemoryPhase::kLoad) {
    return fmt::format("loading the DiT: its checkpoint is read onto the GPU beside the whole model ({}), before any "
                       "split; no placement the runtime has shrinks it (a release that loads on the CPU does)",
                       gb(mb.loading));
  }
  // The parts on the GPU at the peak phase; the largest is named, with the first knob that
  // removes or shrinks it and is not in the configuration already.
  const bool dit_here = phase == MemoryPhase::kDenoise || !mb.offloaded;
  const bool encoders_here = phase == MemoryPhase::kTextEncode || !mb.offloaded;
  const Bytes encoders = phase == MemoryPhase::kTextEncode ? mb.text_encoder_weights : mb.encoders;
  const Bytes work = phase == MemoryPhase::kVaeDecode ? mb.vae_decode
                     : phase == MemoryPhase::kDenoise ? mb.activations + mb.attention + mb.kv_buffers + mb.comm_buffers
                                                      : Bytes(0);
  const Bytes weights = dit_here ? mb.weights : Bytes(0);
  const Bytes text = encoders_here ? encoders : Bytes(0);
  std::vector<std::string> fixes;
  auto fix = [&](bool ok, std::string_view what) {
    if (ok) fixes.emplace_back(what);
  };
  // Model CPU offload decodes on the GPU: with vae=cpu it is offered in place of it.
  const std::string offload_fix = c.vae == VaePlacement::kCpu
                                      ? "offload each part while the others run (offload=1, with the VAE back on the GPU)"
                                      : "offload each part while the others run (offload=1)";
  std::string part;
  if (text >= weights && text >= work) {
    part = fmt::format("the text encoders ({}{})", gb(text),
                       c.te == TextEncoderPlacement::kWhole ? ", whole on every rank" : "");
    fix(several && c.te == TextEncoderPlacement::kWhole && can(RuntimeMethod::kTextEncoderParallel),
        "split them over the ranks (te=parallel)");
    fix(several && c.te == TextEncoderPlacement::kWhole && can(RuntimeMethod::kTextEncoderFsdp),
        "shard them (te=fsdp)");
    fix(c.te != TextEncoderPlacement::kCpu && can(RuntimeMethod::kTextEncoderCpu), "keep them on the CPU (te=cpu)");
    fix(c.offload == 0 && phase != MemoryPhase::kTextEncode && can(RuntimeMethod::kCpuOffload),
        offload_fix);
  } else if (weights >= work) {
    part = fmt::format("the DiT's weights ({}{})", gb(weights), c.fsdp > 1 ? fmt::format(", sharded over {}", c.fsdp) : "");
    fix(several && c.fsdp < c.world_size() && can(RuntimeMethod::kFullyShard),
        c.fsdp > 1 ? "shard them over more ranks (fsdp)" : "shard them (fsdp)");
    fix(c.offload == 0 && can(RuntimeMethod::kCpuOffload), offload_fix);
  } else if (phase == MemoryPhase::kVaeDecode) {
    part = fmt::format("the VAE decode ({} of working set)", gb(work));
    fix(c.vae == VaePlacement::kWhole && can(RuntimeMethod::kVaeTiling), "decode tile by tile (vae=tiled)");
    fix(several && c.vae == VaePlacement::kWhole && can(RuntimeMethod::kParallelVae), "decode in parallel (vae=parallel)");
    fix(c.offload == 0 && can(RuntimeMethod::kVaeCpu), "decode on the CPU (vae=cpu, minutes for a video)");
  } else {
    part = fmt::format("the DiT's activations and buffers ({}) for this rank's tokens", gb(work));
    fixes.emplace_back("split the sequence further (more ulysses or ring)");
  }
  if (fixes.empty()) return part + "; no placement the runtime has shrinks it further";
  return fmt::format("{}: {}", part, fmt::join(fixes, ", or "));
}

}  // namespace ditune
