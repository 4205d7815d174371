#include "costmodels/dit_ops.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/enum_names.h"

namespace ditune {
namespace {

constexpr double kB = kElementBytes;

// [n x k] x [k x m], bf16 operands.
OpCost Gemm(std::string name, double n, double k, double m) {
  OpCost op{std::move(name), OpClass::kGemm, Flops(2.0 * n * k * m), Bytes(kB * (n * k + k * m + n * m)), 1};
  op.kernel = kernel_names::kGemm;
  return op;
}

// An elementwise pass over n x w elements that touches each `passes` times (reads and
// writes), in `kernels` launches (eager frameworks split fused math into several); the
// engine computes it with `kernel`.
OpCost Elementwise(std::string name, double n, double w, double passes, int kernels, const char* kernel) {
  OpCost op{std::move(name), OpClass::kElementwise, Flops(4.0 * n * w), Bytes(kB * n * w * passes), kernels};
  op.kernel = kernel;
  return op;
}

OpCost Attention(std::string name, const ModelSpec& m, double q, double kv, double heads, double batch) {
  const double d = m.head_dim;
  if (m.attention == AttentionKind::kLinear) {
    // phi(K)^T V (d x d per head) and phi(Q) (K^T V): linear in tokens.
    OpCost op{std::move(name), OpClass::kLinearAttention, Flops(4.0 * batch * (q + kv) * heads * d * d),
              Bytes(kB * batch * heads * d * (2 * q + 2 * kv)), 3, false, m.head_dim};
    op.kernel = kernel_names::kLinearAttention;
    return op;
  }
  OpCost op{std::move(name), OpClass::kAttention, Flops(4.0 * batch * q * kv * heads * d),
            Bytes(kB * batch * heads * d * (2 * q + 2 * kv)), 1, false, m.head_dim};
  op.kernel = kernel_names::kAttention;
  return op;
}

double MlpParams(const ModelSpec& m, double width, double inner) {
  return (m.mlp_gated ? 3.0 : 2.0) * width * inner;
}

// The MLP of one stream: up (gated: up and gate), activation, down.
void AddMlp(std::vector<OpCost>* ops, const ModelSpec& m, const std::string& p, double n, double width,
            double inner, int tp) {
  ops->push_back(Gemm(p + "mlp_up", n, width, (m.mlp_gated ? 2.0 : 1.0) * inner / tp));
  if (!m.mlp_gated) ops->back().kernel = kernel_names::kGemmGelu;
  ops->push_back(Elementwise(p + "act", n, inner / tp, m.mlp_gated ? 3 : 2, m.mlp_gated ? 2 : 1,
                             m.mlp_gated ? kernel_names::kSwiGlu : kernel_names::kGelu));
  ops->back().engine_fused = !m.mlp_gated;
  ops->push_back(Gemm(p + "mlp_down", n, inner / tp, width));
}

// One stream of a joint (MMDiT) block up to attention: modulation, norm, QKV, qk-norm.
void AddJointPre(std::vector<OpCost>* ops, const ModelSpec& m, const std::string& p, double n, double width,
                 double hidden, double batch, int tp) {
  if (!m.shared_modulation) ops->push_back(Gemm(p + "modulation", batch, hidden, 6.0 * width));
  ops->push_back(Elementwise(p + "norm1_mod", n, width, 2, 4, kernel_names::kNormModulate));
  ops->push_back(Gemm(p + "qkv", n, width, 3.0 * hidden / tp));
  ops->push_back(Elementwise(p + "qk_norm_rope", n, 2.0 * hidden / tp, 2, 6, kernel_names::kQkNormRope));
}

void AddJointPost(std::vector<OpCost>* ops, const ModelSpec& m, const std::string& p, double n,
                  double width, double hidden, double inner, int tp) {
  ops->push_back(Gemm(p + "attn_out", n, hidden / tp, width));
  ops->push_back(Elementwise(p + "residual1", n, width, 3, 2, kernel_names::kGatedResidual));
  ops->push_back(Elementwise(p + "norm2_mod", n, width, 2, 4, kernel_names::kNormModulate));
  AddMlp(ops, m, p, n, width, inner, tp);
  ops->push_back(Elementwise(p + "residual2", n, width, 3, 2, kernel_names::kGatedResidual));
}

}  // namespace

bool IsKernelFitName(std::string_view name) {
  using namespace kernel_names;  // NOLINT(google-build-using-namespace): the list below
  for (const char* k : {kGemmGelu, kAttentionMerge, kNormModulate, kGatedResidual, kGelu, kSwiGlu, kQkNormRope, kCopy}) {
    if (name == k) return true;
  }
  return false;
}

constexpr EnumName<OpClass> kOpClassNames[] = {
    {OpClass::kGemm, "gemm"},
    {OpClass::kAttention, "attention"},
    {OpClass::kLinearAttention, "linear_attention"},
    {OpClass::kElementwise, "elementwise"},
};

std::string_view OpClassName(OpClass c) { return NameIn(kOpClassNames, c); }

StatusOr<OpClass> ParseOpClass(std::string_view name) { return ParseIn(kOpClassNames, name, "op"); }

RankWork ComputeRankWork(const ModelSpec& model, const TokenGeometry& tokens, const Workload& workload,
                         const ParallelConfig& c, TpSplit split) {
  RankWork w;
  const int64_t seq_split = static_cast<int64_t>(c.sp()) * c.distrifusion;
  const int patches = (c.pipefusion > 1 || c.patches > 1) ? c.patches : 1;
  w.patches = patches;
  // A sequence that does not split evenly is padded to the next multiple (Wan in xDiT):
  // every rank computes the padded share and attention reads the padded sequence.
  const int64_t parts = seq_split * patches;
  w.img_tokens = (tokens.image_tokens() + parts - 1) / parts;
  w.seq_img_tokens = w.img_tokens * parts;
  w.seq_txt_tokens = tokens.text_tokens;
  w.frames = tokens.patch_frames;
  // xDiT splits the text sequence over the sequence-parallel ranks when it divides evenly,
  // and otherwise keeps all of it on every rank.
  const int64_t txt_local = tokens.text_tokens % seq_split == 0 ? tokens.text_tokens / seq_split
                                                                : tokens.text_tokens;
  w.txt_tokens = (txt_local + patches - 1) / patches;
  w.ulysses = c.ulysses;
  w.tp = c.tp;
  w.cross_tp = split == TpSplit::kCrossWhole ? 1 : c.tp;
  // Heads per rank; an entry point that pads the heads to a multiple of the Ulysses degree
  // (Z-Image in xDiT) computes the padded ones.
  w.heads = (model.heads + c.ulysses * c.tp - 1) / (c.ulysses * c.tp);
  // CFG parallel gives each rank one of the two branches; otherwise every branch is batched.
  const int branches = c.cfg == 2 ? 1 : model.GuidanceBranches();
  w.batch = std::max(1, workload.batch / c.dp) * branches;
  return w;
}

int GlueOps(BlockFamily family) {
  switch (family) {
    case BlockFamily::kCross:
    case BlockFamily::kSpatial: return 45;
    // A temporal block has no cross-attention: its self-attention and MLP part of a cross
    // block, plus the reshapes that move frames into the sequence dimension and back.
    case BlockFamily::kTemporal: return 35;
    case BlockFamily::kJoint: return 70;
    case BlockFamily::kSingle: return 35;
  }
  return 0;
}

std::vector<OpCost> BlockOps(const ModelSpec& m, BlockFamily family, const RankWork& w) {
  std::vector<OpCost> ops;
  ops.push_back({"glue", OpClass::kElementwise, Flops(0), Bytes(0), GlueOps(family), true});
  const double b = w.batch;
  const double H = m.hidden;
  const double M = m.mlp_hidden;
  const int tp = w.tp;
  const int xtp = w.cross_tp;
  const double ni = b * static_cast<double>(w.img_tokens);
  const double nt = b * static_cast<double>(w.txt_tokens);
  // Queries per head after Ulysses gathers the sequence; keys/values: the whole sequence
  // (Ring passes it around; PipeFusion and DistriFusion read stale full buffers).
  const double u = w.ulysses;
  switch (family) {
    case BlockFamily::kCross:
    case BlockFamily::kSpatial:
    case BlockFamily::kTemporal: {
      // Keys per query: the whole sequence (cross), one frame's tokens (spatial), or one
      // position's frames (temporal).
      const double frames = std::max<double>(1.0, static_cast<double>(w.frames));
      const double seq = static_cast<double>(w.seq_img_tokens);
      const double kv = family == BlockFamily::kCross ? seq : family == BlockFamily::kSpatial ? seq / frames : frames;
      ops.push_back(Elementwise("norm1_mod", ni, H, 2, 4, kernel_names::kNormModulate));
      ops.push_back(Gemm("qkv", ni, H, 3.0 * H / tp));
      ops.push_back(Attention("attn", m, u * static_cast<double>(w.img_tokens), kv, w.heads, b));
      ops.push_back(Gemm("attn_out", ni, H / tp, H));
      ops.push_back(Elementwise("residual1", ni, H, 3, 2, kernel_names::kGatedResidual));
      if (family == BlockFamily::kTemporal) {
        // No cross-attention: norm, MLP, residual.
        ops.push_back(Elementwise("norm3_mod", ni, H, 2, 4, kernel_names::kNormModulate));
        AddMlp(&ops, m, "", ni, H, M, tp);
        ops.push_back(Elementwise("residual3", ni, H, 3, 2, kernel_names::kGatedResidual));
        break;
      }
      // Cross-attention to the text: local queries, all heads (text is on every rank).
      ops.push_back(Elementwise("norm2", ni, H, 2, 1, kernel_names::kNormModulate));
      ops.push_back(Gemm("cross_q", ni, H, H / xtp));
      const double text_per_patch = b * static_cast<double>(w.seq_txt_tokens) / (w.text_each_patch ? 1 : w.patches);
      ops.push_back(Gemm("cross_kv", text_per_patch, H, 2.0 * H / xtp));
      OpCost xattn = Attention("cross_attn", m, static_cast<double>(w.img_tokens),
                               static_cast<double>(w.seq_txt_tokens), static_cast<double>(m.heads) / xtp, b);
      if (xattn.cls == OpClass::kLinearAttention) {
        // SANA's cross-attention is softmax attention over the short text.
        xattn.cls = OpClass::kAttention;
        xattn.flops = Flops(4.0 * b * static_cast<double>(w.img_tokens) * static_cast<double>(w.seq_txt_tokens) *
                            m.heads / xtp * m.head_dim);
        xattn.kernels = 1;
        xattn.kernel = kernel_names::kAttention;
      }
      ops.push_back(xattn);
      ops.push_back(Gemm("cross_out", ni, H / xtp, H));
      ops.push_back(Elementwise("residual2", ni, H, 3, 1, kernel_names::kGatedResidual));
      ops.push_back(Elementwise("norm3_mod", ni, H, 2, 4, kernel_names::kNormModulate));
      AddMlp(&ops, m, "", ni, H, M, tp);
      ops.push_back(Elementwise("residual3", ni, H, 3, 2, kernel_names::kGatedResidual));
      break;
    }
    case BlockFamily::kJoint: {
      const double Ht = m.text_stream_hidden;
      const double Mt = M * Ht / H;
      AddJointPre(&ops, m, "img.", ni, H, H, b, tp);
      AddJointPre(&ops, m, "txt.", nt, Ht, H, b, tp);
      ops.push_back(Attention("attn", m, u * static_cast<double>(w.img_tokens + w.txt_tokens),
                              static_cast<double>(w.seq_img_tokens + w.seq_txt_tokens), w.heads, b));
      AddJointPost(&ops, m, "img.", ni, H, H, M, tp);
      AddJointPost(&ops, m, "txt.", nt, Ht, H, Mt, tp);
      break;
    }
    case BlockFamily::kSingle: {
      const double n = ni + nt;
      if (!m.shared_modulation) ops.push_back(Gemm("modulation", b, H, 3.0 * H));
      ops.push_back(Elementwise("norm_mod", n, H, 2, 4, kernel_names::kNormModulate));
      ops.push_back(Gemm("qkv_mlp_in", n, H, (3.0 * H + (m.mlp_gated ? 2.0 : 1.0) * M) / tp));
      ops.push_back(Elementwise("qk_norm_rope", n, 2.0 * H / tp, 2, 6, kernel_names::kQkNormRope));
      ops.push_back(Attention("attn", m, u * static_cast<double>(w.img_tokens + w.txt_tokens),
                              static_cast<double>(w.seq_img_tokens + w.seq_txt_tokens), w.heads, b));
      ops.push_back(Elementwise("act", n, M / tp, 2, 1, m.mlp_gated ? kernel_names::kSwiGlu : kernel_names::kGelu));
      ops.push_back(Gemm("out", n, (H + M) / tp, H));
      ops.push_back(Elementwise("residual", n, H, 3, 2, kernel_names::kGatedResidual));
      break;
    }
  }
  return ops;
}

std::vector<OpCost> StepOverheadOps(const ModelSpec& m, const RankWork& w) {
  std::vector<OpCost> ops;
  const double b = w.batch;
  const double ni = b * static_cast<double>(w.img_tokens);
  const double patch_in = static_cast<double>(m.latent_channels) * m.patch_spatial * m.patch_spatial * m.patch_temporal;
  const double text = b * static_cast<double>(w.seq_txt_tokens) / (w.text_each_patch ? 1 : w.patches);
  ops.push_back(Gemm("patch_embed", ni, patch_in, m.hidden));
  ops.push_back(Gemm("time_embed", b, 256 + m.hidden, m.hidden));
  ops.push_back(Gemm("text_embed", text, m.text_hidden, m.text_stream_hidden));
  ops.push_back(Elementwise("final_norm_mod", ni, m.hidden, 2, 4, kernel_names::kNormModulate));
  ops.push_back(Gemm("final_proj", ni, m.hidden, patch_in));
  // Shared modulation: every block's shift, scale and gate from one GEMM per stream kind.
  if (m.shared_modulation) {
    const double H = m.hidden;
    if (m.num_blocks(BlockFamily::kJoint) > 0) {
      ops.push_back(Gemm("img.modulation", b, H, 6.0 * H));
      ops.push_back(Gemm("txt.modulation", b, H, 6.0 * m.text_stream_hidden));
    }
    if (m.num_blocks(BlockFamily::kSingle) > 0) ops.push_back(Gemm("modulation", b, H, 3.0 * H));
  }
  return ops;
}

Flops TotalFlops(const std::vector<OpCost>& ops) {
  Flops f;
  for (const auto& o : ops) f += o.flops;
  return f;
}

Bytes TotalBytes(const std::vector<OpCost>& ops) {
  Bytes b;
  for (const auto& o : ops) b += o.bytes;
  return b;
}

double BlockParams(const ModelSpec& m, BlockFamily family) {
  const double H = m.hidden;
  const double M = m.mlp_hidden;
  switch (family) {
    case BlockFamily::kCross:
    case BlockFamily::kSpatial:
      // self-attention QKV + out, cross-attention Q, KV (text projected to H) + out, MLP.
      return 4 * H * H + 4 * H * H + MlpParams(m, H, M);
    case BlockFamily::kTemporal:
      // self-attention QKV + out, MLP.
      return 4 * H * H + MlpParams(m, H, M);
    case BlockFamily::kJoint: {
      const double Ht = m.text_stream_hidden;
      const double Mt = M * Ht / H;
      // Per stream: QKV, out, MLP, adaLN modulation (6 x width from the conditioning) unless
      // the model shares it (DitParams counts it once).
      const double mod = m.shared_modulation ? 0.0 : 1.0;
      const double img = 4 * H * H + MlpParams(m, H, M) + mod * 6 * H * H;
      const double txt = 4 * H * Ht + MlpParams(m, Ht, Mt) + mod * 6 * Ht * H;
      // Shared weights (CogVideoX): one set of projections and MLP; its modulation comes
      // from a narrow time embedding and is left out.
      return m.joint_shared_weights ? 4 * H * H + MlpParams(m, H, M) : img + txt;
    }
    case BlockFamily::kSingle:
      // Fused QKV + MLP-in, fused out over [attention; MLP], modulation (3 x H) unless shared.
      return H * (3 * H + (m.mlp_gated ? 2.0 : 1.0) * M) + (H + M) * H + (m.shared_modulation ? 0.0 : 3 * H * H);
  }
  return 0;
}

double DitParams(const ModelSpec& m) {
  double p = 0;
  for (const auto& g : m.blocks) p += g.count * BlockParams(m, g.family);
  const double patch = static_cast<double>(m.latent_channels) * m.patch_spatial * m.patch_spatial * m.patch_temporal;
  p += 2 * patch * m.hidden;                                           // patch embed, final layer
  p += static_cast<double>(m.text_hidden) * m.text_stream_hidden;      // caption / context embedder
  p += (256.0 + m.hidden) * m.hidden;                                  // timestep embedding
  if (m.shared_modulation) {  // the modulation layers the blocks share
    if (m.num_blocks(BlockFamily::kJoint) > 0) p += 6.0 * m.hidden * (m.hidden + m.text_stream_hidden);
    if (m.num_blocks(BlockFamily::kSingle) > 0) p += 3.0 * m.hidden * m.hidden;
  }
  return p;
}

}  // namespace ditune
