// Peak memory of one rank during a generation, by component, and whether it fits.
#ifndef DITUNE_COSTMODELS_MEMORY_MODEL_H_
#define DITUNE_COSTMODELS_MEMORY_MODEL_H_

#include <string>

#include "core/hardware_spec.h"
#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/units.h"
#include "core/workload.h"

namespace ditune {

struct MemoryOptions {
  // The text encoders and the VAE stay on every GPU (xDiT keeps the whole pipeline on
  // each rank).
  bool encoders_resident = true;
  // CUDA context, library workspaces and the allocator's reserve.
  Bytes runtime_overhead = Gigabytes(1.5);
  // Per communicator (NCCL's buffers) of each parallel dimension with degree > 1.
  Bytes per_communicator = Megabytes(200);
  // Fraction of the device's memory usable before an out-of-memory error.
  double usable_fraction = 0.95;
};

struct MemoryBreakdown {
  Bytes weights;        // DiT parameters held by this rank (split by PipeFusion stage and tp)
  Bytes encoders;       // text encoders and VAE weights, when resident
  // Model CPU offload (ParallelConfig::offload): nothing but the runtime stays; the text
  // encoders, the DiT and the VAE take the GPU in turn, each with its own working set.
  bool offloaded = false;
  Bytes text_encoder_weights;  // the text encoders' turn (offloaded only)
  Bytes vae_weights;           // with the decode's activations, the VAE's turn (offloaded only)
  Bytes activations;    // live activations at the block's peak, for this rank's tokens
  Bytes attention;      // fused-attention workspace (softmax statistics, Ring's K/V buffers)
  Bytes kv_buffers;     // PipeFusion's stale K/V for its layers; DistriFusion's for all layers
  Bytes comm_buffers;   // all-to-all staging, patch receive buffers, communicators
  Bytes vae_decode;     // the VAE decoder's peak activations (after denoising; not added
                        // to the DiT's activations, the larger of the two counts)
  Bytes runtime;        // context and workspaces
  Bytes capacity;       // usable device memory

  // Everything resident + max(DiT working set, VAE decode); offloaded, the runtime + the
  // largest of the three turns.
  Bytes peak() const;
  bool fits() const { return peak() <= capacity; }
};

// Requires a configuration that passed ValidateConfig.
MemoryBreakdown RankMemory(const ModelSpec& model, const TokenGeometry& tokens, const Workload& workload,
                           const ParallelConfig& config, const GpuSpec& gpu,
                           const MemoryOptions& options = {});

// Over how many ranks the text encoders' weights and work are split (te=parallel: every rank).
double TextEncoderShards(const ParallelConfig& config);

// The bytes of the DiT's weights one rank holds: split by tp and PipeFusion stage, and with
// fsdp sharded, plus the two gathered blocks.
Bytes DitWeightBytes(const ModelSpec& model, const ParallelConfig& config);

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

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_MEMORY_MODEL_H_
