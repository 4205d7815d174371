// A hybrid parallel configuration: the degree of every method and the rank order.
//
// Two syntaxes are accepted wherever a config is:
//   ditune:  "ulysses=2,ring=2,pipefusion=2,patches=4,warmup=1,cfg=2,dp=1,tp=1,
//             distrifusion=1,order=tp-sp-pp-cfg-dp"   (omitted keys take their defaults;
//             "" is one device)
//   flags:   xDiT's "--ulysses_degree 2 --ring_degree 2 --pipefusion_parallel_degree 2
//             --num_pipeline_patch 4 --warmup_steps 1 --use_cfg_parallel
//             --data_parallel_degree 1 --tensor_parallel_degree 1", and the other runtimes'
//             spellings of the same settings: Wan's "--ulysses_size 8 --ring_size 1 --dit_fsdp
//             --t5_fsdp", SGLang's and HunyuanVideo's "--ulysses-degree 2 --enable-cfg-parallel
//             --tp-size 2", vLLM-Omni's "--usp 2 --cfg-parallel-size 2", "--use_torch_compile"
#ifndef DITUNE_CORE_PARALLEL_CONFIG_H_
#define DITUNE_CORE_PARALLEL_CONFIG_H_

#include <array>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ditune {

// The dimensions of the rank order. kSp holds Ulysses (contiguous) and Ring (strided).
enum class OrderDim { kTp, kSp, kPp, kCfg, kDp };
inline constexpr int kNumOrderDims = 5;
using RankOrder = std::array<OrderDim, kNumOrderDims>;  // fastest-varying first

inline constexpr RankOrder kDefaultRankOrder = {OrderDim::kTp, OrderDim::kSp, OrderDim::kPp,
                                               OrderDim::kCfg, OrderDim::kDp};

std::string_view OrderDimName(OrderDim d);
std::string RankOrderToString(const RankOrder& order);
StatusOr<RankOrder> ParseRankOrder(std::string_view text);

// The most devices a configuration may occupy (the product of its degrees).
inline constexpr int kMaxWorldSize = 1 << 20;

// Where the text encoders are (memory placement knobs of the memory model; each runtime has
// its own flag for them):
//   kWhole     on every rank, whole (the default);
//   kParallel  split over every rank (cache-dit's --parallel-text-encoder: tensor parallel
//              over the world): "te=parallel";
//   kFsdp      sharded over every rank and gathered block by block (Wan's --t5_fsdp,
//              xDiT's --fully_shard_components text_encoder): "te=fsdp";
//   kCpu       in host memory, encoding on the CPU (Wan's --t5_cpu): "te=cpu".
enum class TextEncoderPlacement { kWhole, kParallel, kFsdp, kCpu };
std::string_view TextEncoderPlacementName(TextEncoderPlacement p);

// How the VAE decodes:
//   kWhole     the whole latent at once on one GPU (the default);
//   kTiled     tile by tile with overlaps (diffusers' enable_vae_tiling, HunyuanVideo's
//              --vae-tiling): "vae=tiled" (or "vae_tiling=1");
//   kParallel  latent patches with halos over every rank (xDiT's --use_parallel_vae):
//              "vae=parallel";
//   kCpu       the VAE in host memory, decoding on the CPU in fp32 (the fix of Wan2.1 #266,
//              out of memory at the decode on 3 x 16 GB): "vae=cpu".
enum class VaePlacement { kWhole, kTiled, kParallel, kCpu };
std::string_view VaePlacementName(VaePlacement p);

// Where a model's ControlNet (ModelSpec::control) runs:
//   kWhole     whole on every rank, over the whole sequence (the default);
//   kParallel  split over the sequence ranks like the DiT (cache-dit's --parallel-controlnet):
//              "controlnet=parallel".
enum class ControlNetPlacement { kWhole, kParallel };
std::string_view ControlNetPlacementName(ControlNetPlacement p);

struct ParallelConfig {
  int ulysses = 1;
  int ring = 1;
  int pipefusion = 1;  // PipeFusion stages
  int patches = 1;     // PipeFusion patches; the parser defaults it to `pipefusion`
  int warmup = 1;      // PipeFusion synchronous warm-up steps
  int cfg = 1;         // 1 or 2
  int dp = 1;
  int tp = 1;
  int distrifusion = 1;
  // Fully-sharded weights (FSDP, xDiT's --fully_shard_degree): the DiT's weights are split
  // over this many ranks and each block's are all-gathered before it runs. It overlays the
  // other methods' groups and adds no devices.
  int fsdp = 1;
  // Model CPU offload (xDiT's --enable_model_cpu_offload: diffusers' enable_model_cpu_offload):
  // each part of the pipeline is on the GPU only while it runs (the text encoders, then the
  // DiT, then the VAE), moved there from host memory and back once per generation. 0 or 1.
  int offload = 0;
  // torch.compile of the DiT (xDiT's --use_torch_compile, SGLang's --enable-torch-compile, ...):
  // priced without the eager host overhead where the runtime compiles the model. 0 or 1.
  int compile = 0;
  // The runtime's eager mode where its entry point compiles by default (vLLM-Omni's
  // --enforce-eager): priced eager. 0 or 1; never with compile=1.
  int eager = 0;
  // Where the text encoders are while they encode ("te=..."; TextEncoderPlacement).
  TextEncoderPlacement te = TextEncoderPlacement::kWhole;
  // How the VAE decodes ("vae=..."; VaePlacement).
  VaePlacement vae = VaePlacement::kWhole;
  // Where the ControlNet runs ("controlnet=..."; ControlNetPlacement).
  ControlNetPlacement controlnet = ControlNetPlacement::kWhole;
  RankOrder order = kDefaultRankOrder;

  int sp() const { return ulysses * ring; }
  // The number of devices this configuration occupies.
  int world_size() const { return ulysses * ring * pipefusion * cfg * dp * tp * distrifusion; }
  int degree(OrderDim d) const;

  bool operator==(const ParallelConfig&) const = default;
};

// Parses either syntax (xDiT's when the text starts with "--"). Checks syntax and that
// every value is an integer >= 1 (warmup >= 0); the model- and cluster-dependent rules
// live in validate.h.
StatusOr<ParallelConfig> ParseParallelConfig(std::string_view text);

// Canonical ditune syntax: keys in a fixed order, only those that differ from their
// defaults; "" for one device. ParseParallelConfig(ToString(c)) == c.
std::string ToString(const ParallelConfig& config);

// The configuration in xDiT's generic flag syntax, which ParseParallelConfig reads back
// (DistriFusion and a non-default rank order have none: check SupportedByXdit first). What
// a model's entry point runs and the flags it takes are the planner's MakeLaunch.
std::string ToXditFlags(const ParallelConfig& config);
// OK, or NotSupported naming what xDiT's flag syntax cannot express; model-agnostic (the
// per-model rules are ValidationContext::runtime).
Status SupportedByXdit(const ParallelConfig& config);

// A short human label, e.g. "ulysses=4" or "1 device".
std::string Label(const ParallelConfig& config);

}  // namespace ditune

#endif  // DITUNE_CORE_PARALLEL_CONFIG_H_
