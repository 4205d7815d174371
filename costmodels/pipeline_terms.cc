#include "costmodels/pipeline_terms.h"

#include <algorithm>
#include <cmath>

namespace ditune {

OpCost TextEncodeOp(const ModelSpec& m, const Workload& w) {
  // Each guidance branch's prompt is encoded (the negative prompt once per branch that takes it).
  const double prompts = static_cast<double>(w.batch) * m.GuidanceBranches();
  const double tokens = prompts * m.text_tokens;
  const double params = m.text_encoder_params();
  // One encoder layer is a few kernels; a 24-layer encoder ~ 24 x 10 launches.
  const int kernels = static_cast<int>(m.text_encoders.size()) * 240;
  return {"text_encode", OpClass::kGemm, Flops(2.0 * params * tokens), Bytes(kElementBytes * params), kernels};
}

OpCost VaeDecodeOp(const ModelSpec& m, const Workload& w, int parallel) {
  const double pixels = static_cast<double>(w.height) * w.width * w.frames * w.batch;
  // Parallel decode: each rank decodes its patch plus a halo (~1/8 of a patch's rows each side).
  const double share = parallel > 1 ? (1.0 / parallel) * 1.25 : 1.0;
  // The convolutions' work per pixel, and the mid block's attention over each frame's latent
  // positions (QK^T and AV: 4 n^2 C for n positions), which a patch-parallel decode splits too.
  const double positions = static_cast<double>(w.height / m.vae_spatial) * (w.width / m.vae_spatial);
  const double attention = 4.0 * positions * positions * m.vae_decoder_attention_channels *
                           static_cast<double>(w.frames) * w.batch;
  const double flops = (m.vae_decoder_flops_per_pixel * pixels + attention) * share;
  // Feature maps are re-read by every convolution: ~ 2 bytes x 128 channels x 30 layers per pixel.
  const double feature_bytes = pixels * share * kElementBytes * 128.0 * 30.0;
  if (m.vae_temporal == 1) return {"vae_decode", OpClass::kGemm, Flops(flops), Bytes(feature_bytes), 200};
  // A causal 3-D decoder's convolutions, on the channels-first tensors the framework keeps,
  // run as vol2col and a GEMM: the vol2col kernel reads each input value once and writes it
  // 27 times (one per 3x3x3 tap) into a column buffer the GEMM reads back. Public profiles of
  // such decodes on Hopper spend their time in those copy kernels, and xDiT's HunyuanVideo
  // runs leave as long a serial part on an H20 as on an H100 (a seventh of the tensor peak,
  // more memory bandwidth): the decode is priced by that traffic at memory bandwidth.
  constexpr double kColumnPasses = 1 + 27 + 27;
  return {"vae_decode", OpClass::kElementwise, Flops(flops), Bytes(feature_bytes * kColumnPasses), 200};
}

namespace {

// The op's time with the framework's compute scale and constants, or, where the term's own
// scale was measured, as its fit modelled it (scale 1, the default constants: FitPipelineTerms),
// so that the fitted scale reproduces the measurement whatever else is calibrated.
Seconds TermTime(const ComputeModel& compute, const OpCost& op, bool measured) {
  if (!measured) return compute.OpTime(op);
  ComputeModel plain = compute;
  plain.set_scale(1.0);
  plain.SetMechanisms(Mechanisms{});
  return plain.OpTime(op);
}

}  // namespace

Seconds TextEncodeTime(const ComputeModel& compute, const ModelSpec& m, const Workload& w,
                       const PipelineTermScales& scales) {
  return TermTime(compute, TextEncodeOp(m, w), scales.text_measured) * scales.text_encode;
}

Seconds VaeDecodeTime(const ComputeModel& compute, const ModelSpec& m, const Workload& w, int parallel,
                      const PipelineTermScales& scales) {
  if (w.output == OutputType::kLatent) return Seconds(0);
  const Mechanisms& mech = compute.mechanisms();
  // A VAE without temporal compression is an image decoder run frame by frame (Latte's SD
  // VAE): the image constant, whatever the model generates; the video constant is for the
  // causal 3-D decoders.
  const double framework =
      scales.vae_measured ? 1.0 : m.vae_temporal == 1 ? mech.image_vae_scale : mech.video_vae_scale;
  return TermTime(compute, VaeDecodeOp(m, w, parallel), scales.vae_measured) * scales.vae_decode * framework;
}

double TiledDecodeWork(const ModelSpec& m, const Workload& w) {
  const VaeDecodeMemory& d = m.vae_decode_memory;
  const double tile = d.tile_pixels;
  const double stride = std::max(1.0, tile * (1.0 - d.tile_overlap));
  auto tiles = [&](double extent) { return extent <= tile ? 1.0 : std::ceil((extent - tile) / stride) + 1.0; };
  const double covered = tiles(w.height) * std::min<double>(tile, w.height) * tiles(w.width) *
                         std::min<double>(tile, w.width);
  return covered / (static_cast<double>(w.height) * w.width);
}

namespace {

// An estimate, not measured: PyTorch's CPU matrix products and convolutions on a server's
// cores reach about a teraflop per second.
constexpr double kHostFlopsPerSecond = 1e12;

}  // namespace

Seconds HostTextEncodeTime(const ModelSpec& m, const Workload& w) {
  return Seconds(TextEncodeOp(m, w).flops.value() / kHostFlopsPerSecond);
}

Seconds HostVaeDecodeTime(const ModelSpec& m, const Workload& w) {
  if (w.output == OutputType::kLatent) return Seconds(0);
  // Every pixel's convolution FLOPs at the host's rate: Wan2.1's decode of 81 frames at
  // 832 x 480 comes to about eight minutes, the order users of CPU decodes report
  // (deepbeepmeep/Wan2GP #995: the CPU decode of 81-frame 480p videos "freezes for 5-15
  // minutes"; leejet/stable-diffusion.cpp #872: Wan2.1's VAE decode "taking 506.93s").
  return Seconds(VaeDecodeOp(m, w).flops.value() / kHostFlopsPerSecond);
}

}  // namespace ditune
