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
  Bytes activations;    // live activations at the block's peak, for this rank's tokens
  Bytes attention;      // fused-attention workspace (softmax statistics, Ring's K/V buffers)
  Bytes kv_buffers;     // PipeFusion's stale K/V for its layers; DistriFusion's for all layers
  Bytes comm_buffers;   // all-to-all staging, patch receive buffers, communicators
  Bytes vae_decode;     // the VAE decoder's peak activations (after denoising; not added
                        // to the DiT's activations, the larger of the two counts)
  Bytes runtime;        // context and workspaces
  Bytes capacity;       // usable device memory

  Bytes peak() const;   // everything resident + max(DiT working set, VAE decode)
  bool fits() const { return peak() <= capacity; }
};

// Requires a configuration that passed ValidateConfig.
MemoryBreakdown RankMemory(const ModelSpec& model, const TokenGeometry& tokens, const Workload& workload,
                           const ParallelConfig& config, const GpuSpec& gpu,
                           const MemoryOptions& options = {});

// The runtime overhead that makes `modelled` match a measured peak (the framework's
// context, allocator reserve and what else it keeps that the model does not name). It is
// what a one-GPU run calibrates, for predicting the same framework's multi-GPU runs.
// Never negative.
Bytes FitRuntimeOverhead(const MemoryBreakdown& modelled, Bytes measured_peak);

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_MEMORY_MODEL_H_
