// Peak memory of one rank during a generation, by phase and component, and whether it fits.
//
// A generation has three phases: text encoding, denoising, VAE decode. Each phase's tensors
// are what stays on the GPU through it (the parts the runtime keeps resident) plus its own
// working set; the rank's peak is the largest phase plus the runtime's own overhead (CUDA
// context, workspaces, allocator reserve). How the runtime places the parts (weights' precision,
// FSDP shards, text encoders whole, split, sharded or on the CPU, the VAE whole, tiled or
// parallel, model CPU offload) comes from the configuration (te=, vae=, fsdp, offload) and the
// runtime's RuntimeMemory.
#ifndef DITUNE_COSTMODELS_MEMORY_MODEL_H_
#define DITUNE_COSTMODELS_MEMORY_MODEL_H_

#include <array>
#include <string>
#include <string_view>

#include "core/hardware_spec.h"
#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/runtime_support.h"
#include "core/units.h"
#include "core/workload.h"

namespace ditune {

// How the VAE decodes under `placement`: the configuration's choice, tiled where the runtime
// tiles by default.
VaePlacement EffectiveVae(const ParallelConfig& config, const RuntimeMemory& placement);

struct MemoryOptions {
  // The text encoders and the VAE are on the GPUs (false: served elsewhere).
  bool encoders_resident = true;
  // CUDA context, library workspaces and the allocator's reserve.
  Bytes runtime_overhead = Gigabytes(1.5);
  // Per communicator (NCCL's buffers) of each parallel dimension with degree > 1.
  Bytes per_communicator = Megabytes(200);
  // Fraction of the device's memory (nvidia-smi's total) that the CUDA allocator sees as the
  // device's capacity: the driver keeps the rest. PyTorch's out-of-memory messages print both
  // halves of the ratio: "total capacity of 14.75 GiB" on a T4 (15,360 MiB; hpcaitech/Open-Sora
  // #697), 39.50 GiB on an A100 40GB (40,960 MiB; TianheWu/CoSeR #10), 23.68 GiB on an RTX
  // 4090 (24,564 MiB; zai-org/CogVideo #36), 31.51 GiB on an RTX 5090 (32,607 MiB;
  // siliconflow/onediff #1041): 0.983 to 0.990, 0.987 in the middle. The context, library
  // workspaces and the allocator's unallocated reserve are runtime_overhead's (CoSeR #10: 0.49
  // GiB outside PyTorch and 0.89 GiB reserved but unallocated, 1.48 GB together).
  double usable_fraction = 0.987;
  // How the runtime holds the parts (the runtime's "memory" facts; bf16 everywhere when absent).
  RuntimeMemory placement;
};

// kLoad: the DiT's checkpoint read onto the GPU beside the model it fills, where the runtime
// loads it there (RuntimeMemory::load_copy_bytes_per_param); 0 elsewhere.
enum class MemoryPhase { kTextEncode, kDenoise, kVaeDecode, kLoad };
inline constexpr int kNumMemoryPhases = 4;
// "text encoding", "denoising", "VAE decode", "loading the checkpoint"
std::string_view MemoryPhaseName(MemoryPhase p);

struct MemoryBreakdown {
  // Components (bytes on this rank while they are on the GPU).
  Bytes weights;        // DiT weights held through denoising (shards, roots and gathered blocks)
  Bytes encoders;       // text and image encoders' weights kept on the GPU (not offloaded)
  Bytes text_encoder_weights;  // the encoders' weights while they encode
  Bytes vae_weights;    // the VAE's weights
  bool offloaded = false;  // model CPU offload: parts come to the GPU in turn
  Bytes activations;    // live activations at a block's peak, for this rank's tokens
  Bytes attention;      // fused-attention workspace (softmax statistics, Ring's K/V buffers)
  Bytes kv_buffers;     // PipeFusion's stale K/V for its layers; DistriFusion's for all layers
  Bytes comm_buffers;   // all-to-all staging, patch receive buffers, communicators
  Bytes vae_decode;     // the VAE decoder's working set on this rank (0 where it does not decode)
  Bytes loading;        // the whole DiT and its checkpoint's copy while it loads (0: loaded elsewhere)
  Bytes runtime;        // context and workspaces
  Bytes capacity;       // usable device memory
  // The tensors on the GPU at each phase's peak (runtime excluded), by MemoryPhase.
  std::array<Bytes, kNumMemoryPhases> phases{};

  // The largest phase's tensors: what torch.cuda.max_memory_allocated reports.
  Bytes tensors_peak() const;
  MemoryPhase peak_phase() const;
  // Everything the device must hold: the largest phase + the runtime.
  Bytes peak() const { return tensors_peak() + runtime; }
  bool fits() const { return peak() <= capacity; }
};

// Forwards one denoising step runs one after another: the guidance branches, where the
// runtime runs them in turn (RuntimeMemory::cfg_sequential) and neither CFG parallel splits
// them nor PipeFusion or DistriFusion (which batch them) runs; 1 otherwise. Each forward holds
// and computes its share of the batch.
int SequentialForwards(const ModelSpec& model, const ParallelConfig& config, const RuntimeMemory& place);

// Requires a configuration that passed ValidateConfig.
MemoryBreakdown RankMemory(const ModelSpec& model, const TokenGeometry& tokens, const Workload& workload,
                           const ParallelConfig& config, const GpuSpec& gpu,
                           const MemoryOptions& options = {});

// Over how many ranks the text encoders' weights and work are split (te=parallel: every rank).
double TextEncoderShards(const ParallelConfig& config);

// The bytes of the DiT's weights one rank holds while it denoises: split by tp and
// PipeFusion stage; with fsdp, the shard, the root unit FSDP keeps gathered, and the running
// and prefetched blocks.
Bytes DitWeightBytes(const ModelSpec& model, const ParallelConfig& config, const RuntimeMemory& placement = {});

// The VAE decoder's working set on one rank: its live maps at the output resolution (or a
// tile's), a causal decoder's per-convolution frame caches, and the decoded frames; 0 for a
// latent output.
Bytes VaeDecodeBytes(const ModelSpec& model, const Workload& workload, const ParallelConfig& config,
                     double bytes_per_value);

// What model CPU offload (ParallelConfig::offload) moves over a GPU's host link in one
// generation, both directions summed: before the loop the text encoders come and go and the
// DiT comes; after it the DiT goes and the VAE comes and goes.
struct OffloadTraffic {
  Bytes before_loop;
  Bytes after_loop;
};
OffloadTraffic OffloadMoves(const ModelSpec& model, const ParallelConfig& config);

// The runtime overhead that makes `modelled` match a measured peak (the framework's
// context, allocator reserve and what else it keeps that the model does not name). It is
// what a one-GPU run calibrates, for predicting the same framework's multi-GPU runs.
// Never negative.
Bytes FitRuntimeOverhead(const MemoryBreakdown& modelled, Bytes measured_peak);

// "text encoding 12.3 GB, denoising 40.1 GB, VAE decode 20.5 GB (+ runtime 1.5 GB; peak:
// denoising)": the per-phase peaks in one line; the loading phase where it is priced.
std::string MemoryPhasesText(const MemoryBreakdown& memory);
// {"text_encoding": GB, "denoising": GB, "vae_decode": GB, "loading": GB, "runtime": GB,
// "peak_phase": name}.
struct MemoryPhasesGb {
  double text_encoding = 0, denoising = 0, vae_decode = 0, loading = 0, runtime = 0;
  std::string_view peak_phase;
};
MemoryPhasesGb PhasesGb(const MemoryBreakdown& memory);

// "the text encoders (48.0 GB, whole on every rank)": what dominates the peak phase, for the
// message when nothing fits, with the knob that removes it where `runtime` has one (nullptr:
// none named).
std::string MemoryBlocker(const ParallelConfig& config, const MemoryBreakdown& memory,
                          const RuntimeSupport* runtime);

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_MEMORY_MODEL_H_
