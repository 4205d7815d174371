#include "costmodels/memory_model.h"

#include <algorithm>

#include "costmodels/dit_ops.h"

namespace ditune {

Bytes MemoryBreakdown::peak() const {
  const Bytes dit = activations + attention + comm_buffers;
  if (offloaded) {
    return runtime + std::max({text_encoder_weights, weights + kv_buffers + dit, vae_weights + vae_decode});
  }
  const Bytes resident = weights + encoders + kv_buffers + runtime;
  return resident + std::max(dit, vae_decode);
}

double TextEncoderShards(const ParallelConfig& c) { return c.te_parallel != 0 ? c.world_size() : 1.0; }

Bytes DitWeightBytes(const ModelSpec& m, const ParallelConfig& c) {
  const double B = kElementBytes;
  // Published parameter counts are the reliable ones; the shapes' count is the fallback.
  const double params = m.published_params > 0 ? m.published_params : DitParams(m);
  const double weights = params * B / (c.tp * c.pipefusion);
  if (c.fsdp <= 1) return Bytes(weights);
  // Sharded over fsdp ranks, with the running block's and the prefetched block's weights
  // gathered whole (FSDP all-gathers one block ahead).
  double largest = 0;
  for (const auto& g : m.blocks) largest = std::max(largest, BlockParams(m, g.family));
  const double scale = params / std::max(1.0, DitParams(m));  // published over computed
  return Bytes(weights / c.fsdp + 2.0 * largest * scale * B / c.tp);
}

OffloadTraffic OffloadMoves(const ModelSpec& m, const ParallelConfig& c) {
  if (c.offload == 0) return {};
  const Bytes text(m.encoders_remote ? 0.0 : m.text_encoder_params() * kElementBytes / TextEncoderShards(c));
  const Bytes vae(m.vae_decoder_params * kElementBytes);
  const Bytes dit = DitWeightBytes(m, c);
  return {text + text + dit, dit + vae + vae};
}

MemoryBreakdown RankMemory(const ModelSpec& m, const TokenGeometry& tokens, const Workload& workload,
                           const ParallelConfig& c, const GpuSpec& gpu, const MemoryOptions& opt) {
  MemoryBreakdown mb;
  const double B = kElementBytes;
  const double H = m.hidden;
  const double M = m.mlp_hidden;
  const int tp = c.tp;
  mb.weights = DitWeightBytes(m, c);
  if (c.offload != 0) {
    // diffusers' model CPU offload moves each part to the GPU when it is called and the
    // previous one back to the host: the encoders' weights are never there with the DiT's.
    mb.offloaded = true;
    if (!m.encoders_remote) mb.text_encoder_weights = Bytes(m.text_encoder_params() * B / TextEncoderShards(c));
    mb.vae_weights = Bytes(m.vae_decoder_params * B);
  } else if (opt.encoders_resident && !m.encoders_remote) {
    mb.encoders = Bytes((m.text_encoder_params() / TextEncoderShards(c) + m.vae_decoder_params) * B);
  }

  const RankWork w = ComputeRankWork(m, tokens, workload, c);
  // Tokens resident per forward on this rank: one patch with PipeFusion.
  const double n = static_cast<double>(w.batch) * static_cast<double>(w.img_tokens + w.txt_tokens);
  // Live at a block's peak: the residual stream and its normalised copy (full width), and
  // the larger of the attention phase (Q, K, V and the output, split by tp) and the MLP
  // phase (hidden and activated hidden, split by tp).
  // Ulysses' all-to-all buffers (gathered Q, K, V and the scattered O, as large as the
  // local ones) live only in the attention phase.
  const double a2a = c.ulysses > 1 ? 4.0 * H / tp : 0.0;
  const double attn_phase = 4.0 * H / tp + a2a;
  const double mlp_phase = (m.mlp_gated ? 3.0 : 2.0) * M / tp;
  mb.activations = Bytes(B * n * (2.0 * H + std::max(attn_phase, mlp_phase)));
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
    // Two full-sequence K/V copies per layer: the stale one attention reads, and the one the
    // asynchronous all-gather of this step's fresh K/V writes into meanwhile.
    mb.kv_buffers = Bytes(2.0 * B * seq * 2.0 * H * m.num_blocks());
  }
  int communicators = 0;
  for (int d : {c.ulysses, c.ring, c.pipefusion, c.cfg, c.dp, c.tp, c.distrifusion}) communicators += d > 1;
  double patch_buffers = c.pipefusion > 1 ? 2.0 * B * n * H : 0.0;
  mb.comm_buffers = Bytes(patch_buffers) + opt.per_communicator * communicators;

  // VAE decoder: its widest stage, a residual block at full resolution, holds two feature
  // maps of 128 channels at once (the block's input, kept for the skip, and its branch's
  // output; each convolution's input is freed once its output exists). A 1-GPU Flux.1-dev
  // 4096² run completes on a 48 GB L40 in xDiT; three maps would not fit it. Video decoders
  // work on a few frames at a time.
  const double frames = std::min(workload.frames, 8);
  if (workload.output == OutputType::kDecoded) {
    mb.vae_decode = Bytes(2.0 * 128.0 * workload.height * workload.width * frames * B);
  }
  mb.runtime = opt.runtime_overhead;
  mb.capacity = gpu.memory * opt.usable_fraction;
  return mb;
}

Bytes FitRuntimeOverhead(const MemoryBreakdown& modelled, Bytes measured_peak) {
  const Bytes without = modelled.peak() - modelled.runtime;
  return measured_peak > without ? measured_peak - without : Bytes(0);
}

}  // namespace ditune
