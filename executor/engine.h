// The DiT engine: one rank's denoising loop written once over the Kernels interface
// (kernels.h), so the same code runs on the GPU (cuda kernels) and on the host (ref
// kernels, which check every access and count the FLOPs).
//
// On one device the engine computes the whole model (the flow-matching Euler loop with
// classifier-free guidance) in the kernels' activation type: bf16 with fp32 accumulation on
// the ref and cuda kernels, fp32 on the cpu kernels. For rank R of a multi-device
// plan it runs exactly rank R's kernels at rank R's shapes — the RankWork the cost models
// price (costmodels/dit_ops.h): its tokens, heads, tensor-parallel widths, blocks, patches,
// prompts and CFG branches. Without a communicator the transfers are left out: the values
// are then meaningless and only the device time counts (`ditune run --emulate-rank`). With
// one (a world of the plan's size, one process per rank) the engine exchanges for real —
// Ulysses all-to-alls of the heads, Ring attention passing K/V around with a log-sum-exp
// merge, tensor-parallel all-reduces, the CFG branches gathered for the guidance step, data-
// parallel prompts — and every rank ends with the model's output for every prompt. Over
// NCCL the tensors move in device memory; over MPI they are staged through the host (which
// is how several ranks share one GPU). PipeFusion runs for real (on one device too): patches
// attend over per-block K/V buffers of the whole sequence, one step stale for the patches not
// yet done; in joint and single blocks the first patch of a step carries the whole text and
// leaves its K/V for the later patches (xDiT's scheme); stages hand activations forward and
// the last hands the updated latent rows back. DistriFusion runs for real across ranks: each
// rank computes its share of the sequence attending over K/V buffers whose other rows are one
// step stale, refreshed by nonblocking all-gathers that overlap the next blocks (warm-up steps,
// at least one, gather synchronously). With sequence parallelism inside PipeFusion's stages a
// patch's rows are split over the sequence-parallel ranks (xDiT's order: patch, then rank),
// each rank keeping the K/V buffers of its heads; Ulysses and Ring bring every fresh row of
// the patch to each before it attends. Tensor parallelism inside the stages splits the heads
// and the buffers with them.
#ifndef DITUNE_EXECUTOR_ENGINE_H_
#define DITUNE_EXECUTOR_ENGINE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/workload.h"
#include "costmodels/dit_ops.h"
#include "executor/comm.h"
#include "executor/kernels.h"
#include "executor/tensor.h"

namespace ditune::exec {

// What one rank computes per denoising step.
struct EngineWork {
  RankWork steady;        // per forward in the steady steps (PipeFusion: per patch)
  RankWork warmup;        // per forward in PipeFusion's synchronous warm-up steps
  int warmup_steps = 0;
  int first_block = 0;    // blocks [first_block, first_block + blocks)
  int blocks = 0;
  int prompts = 1;        // prompts this rank serves
  int branches = 1;       // CFG branches it computes per prompt (steady.batch = prompts x branches)
  bool exact = false;     // one device, one patch: the output is the model's
  ParallelConfig config;  // the plan, and this rank of it
  int rank = 0;
};

// Rank `rank`'s work under `config` (which must have passed ValidateConfig).
StatusOr<EngineWork> EngineWorkFor(const ModelSpec& model, const Workload& workload, const ParallelConfig& config,
                                   int rank);

struct EngineOptions {
  // Weights are drawn on the device from the counter-based generator (random_hash.h), the
  // same on every backend; the inputs (model_inputs.h) on the host.
  uint64_t seed = 42;
  // The catalog architecture's finer parts: query-key RMS norm with rotary embedding in
  // joint and single blocks, gated MLPs where the model has them. On for timing runs; off
  // for the plain blocks.
  bool architecture_extras = true;
  float guidance = 4.0f;
  // DistriFusion without a communicator: compute every rank's share in turn on this device,
  // each over K/V buffers whose other rows are from the step before — what the ranks compute
  // together, with the same kernels on the same rows (for checking the real runs).
  bool distrifusion_in_turn = false;
};

struct EngineResult {
  std::vector<Mat> latents;           // exact runs: every prompt's final latent (tokens x C p^2)
  double comm_seconds = 0;            // host time in this rank's transfers (real multi-rank runs)
  std::vector<double> step_seconds;   // device time of each denoising step
  double dit_seconds = 0;             // device time of the denoising loop
  int64_t peak_bytes = 0;             // the device's memory high-water mark
};

class DitEngine {
 public:
  // Loads this rank's weights onto `kernels`' device (which must outlive the engine).
  // `world`, when given for a multi-rank plan, has the plan's size and work.rank as its rank;
  // the engine splits it into the groups of every dimension (collective: every rank creates
  // its engine) and exchanges for real (NotSupported, named, for what runs only emulated).
  static StatusOr<std::unique_ptr<DitEngine>> Create(const ModelSpec& model, const Workload& workload,
                                                     const EngineWork& work, Kernels* kernels,
                                                     const EngineOptions& options, Comm* world = nullptr);
  ~DitEngine();

  // One whole denoising loop (text embeddings and initial noise from the seed). The first
  // call also allocates the activations and builds the GEMM plans: time the later ones.
  StatusOr<EngineResult> Generate();

  int64_t weight_bytes() const;

 private:
  DitEngine() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Device bytes the engine needs for `work` on kernels whose act elements are `element_bytes`
// wide (the weights of the rank's blocks plus the largest activations), for refusing a run
// that cannot fit before allocating.
int64_t EngineBytes(const ModelSpec& model, const Workload& workload, const EngineWork& work,
                    const EngineOptions& options, int64_t element_bytes);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_ENGINE_H_
