// The operations of DiT inference with their FLOPs and bytes, for any rank's share under
// any configuration. Shapes come from the ModelSpec; what a rank holds from RankWork.
#ifndef DITUNE_COSTMODELS_DIT_OPS_H_
#define DITUNE_COSTMODELS_DIT_OPS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/units.h"
#include "core/workload.h"

namespace ditune {

// kGemm: dense matmul (projections, MLP). kAttention: fused softmax attention (the S x S
// matrix never reaches memory). kLinearAttention: SANA's linear attention. kElementwise:
// norms, modulation, activations, residuals — memory-bound.
enum class OpClass { kGemm, kAttention, kLinearAttention, kElementwise };
inline constexpr int kNumOpClasses = 4;
std::string_view OpClassName(OpClass c);
// The op class named `name` (OpClassName's); InvalidArgument naming the valid names otherwise.
StatusOr<OpClass> ParseOpClass(std::string_view name);

// The kernels ditune's engine runs (executor/kernels.h), by the names its kernel profile
// (`ditune run --profile`) and the per-kernel compute fits ("<device>/<backend>/<kernel>")
// use. An op's `kernel` says which one computes it there.
namespace kernel_names {
inline constexpr const char* kGemm = "gemm";
inline constexpr const char* kGemmGelu = "gemm_gelu";  // a GEMM with the GELU in its epilogue
inline constexpr const char* kAttention = "attention";
inline constexpr const char* kLinearAttention = "linear_attention";
inline constexpr const char* kAttentionMerge = "attention_merge";
inline constexpr const char* kNormModulate = "norm_modulate";
inline constexpr const char* kGatedResidual = "gated_residual";
inline constexpr const char* kGelu = "gelu";
inline constexpr const char* kSwiGlu = "swiglu";
inline constexpr const char* kQkNormRope = "qk_norm_rope";
inline constexpr const char* kCopy = "copy";
}  // namespace kernel_names
// Whether `name` is one of the engine's kernels above that has a fit of its own
// ("<device>/<backend>/<name>"): GEMMs with the GELU epilogue and the elementwise kernels.
bool IsKernelFitName(std::string_view name);

struct OpCost {
  std::string name;  // e.g. "img.qkv", "attn", "txt.mlp_up"
  OpClass cls = OpClass::kGemm;
  Flops flops;
  Bytes bytes;  // bytes read and written, bf16 activations and weights
  int kernels = 1;  // framework ops the host issues (kernels, and views/reshapes that launch none)
  bool host_only = false;  // no device work: views, reshapes, chunking, Python glue
  int head_dim = 0;        // attention: kernels' efficiency depends on it
  // ditune's engine computes this op in the epilogue of the GEMM before it (the GELU of a
  // non-gated MLP): no device time or launch of its own under Runtime::kEngine.
  bool engine_fused = false;
  // The engine kernel that computes it (kernel_names); empty: none in particular.
  std::string kernel;
};

// Framework ops of one block that launch no kernel of their own (views, transposes,
// chunking, module calls) in an eager implementation, per family. Counted from diffusers'
// block implementations: they cost host time, not device time.
int GlueOps(BlockFamily family);

// What one rank computes in one forward of one block (one patch, with PipeFusion).
struct RankWork {
  int64_t img_tokens = 0;      // image tokens in this rank's projections and MLP
  int64_t txt_tokens = 0;      // text tokens in its projections and MLP (joint, single)
  int64_t seq_img_tokens = 0;  // the whole image sequence attention reads as keys/values
  int64_t seq_txt_tokens = 0;  // the whole text sequence
  int ulysses = 1;             // Ulysses gathers this many ranks' tokens per head group
  int heads = 0;               // heads this rank computes in self/joint attention
  int tp = 1;                  // projection, self-attention and MLP widths are divided by tp
  int cross_tp = 1;            // cross-attention's (1: whole on every rank, TpSplit::kCrossWhole)
  int batch = 1;               // sequences per forward: prompts x CFG branches on this rank
  int patches = 1;             // PipeFusion patches per step (text work is spread over them)
  int frames = 1;              // latent frames of the whole sequence (after the temporal patch)
  // Every patch's forward carries the whole text (txt_tokens is then every text token of the
  // rank, and the cross blocks project the text's K/V in each patch), where the runtime does
  // not spread the text over the patches (xDiT's PipeFusion: StageCosts sets it).
  bool text_each_patch = false;
};

// The work of any rank per block forward (every rank's share has the same size: a valid
// configuration's degrees divide evenly).
// `split`: what the runtime's tensor parallelism splits.
RankWork ComputeRankWork(const ModelSpec& model, const TokenGeometry& tokens,
                         const Workload& workload, const ParallelConfig& config,
                         TpSplit split = TpSplit::kMegatron);

// The operations of one block of `family` for `work`.
std::vector<OpCost> BlockOps(const ModelSpec& model, BlockFamily family, const RankWork& work);

// Work outside the blocks, once per step and per patch: patch embedding, caption and
// timestep embedding, final layer and unpatchify.
std::vector<OpCost> StepOverheadOps(const ModelSpec& model, const RankWork& work);

// Sums.
Flops TotalFlops(const std::vector<OpCost>& ops);
Bytes TotalBytes(const std::vector<OpCost>& ops);

// Parameters of one block of `family`, and of the whole DiT, computed from the shapes.
double BlockParams(const ModelSpec& model, BlockFamily family);
double DitParams(const ModelSpec& model);

// Bytes of one element: ditune's runtime and the xDiT runs it models use bf16.
inline constexpr double kElementBytes = 2.0;

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_DIT_OPS_H_
