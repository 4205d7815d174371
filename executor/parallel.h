// The parallel methods, for real: one rank's share of a generation under a ParallelConfig —
// Ulysses (all-to-all between sequence and head sharding), Ring (K/V passed around with
// nonblocking sends overlapping the blockwise attention), USP, tensor parallel, CFG
// parallel, data parallel, and PipeFusion (stages, patches, one-step-stale K/V, synchronous
// warm-up steps, asynchronous patch sends, latents back to stage 0; Ulysses, Ring and tensor
// parallelism inside the stages, each patch's rows split over the sequence-parallel ranks),
// and DistriFusion (each rank its share of the sequence, attending over K/V whose other rows
// are one step stale).
#ifndef DITUNE_EXECUTOR_PARALLEL_H_
#define DITUNE_EXECUTOR_PARALLEL_H_

#include <memory>
#include <vector>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/rank_layout.h"
#include "core/workload.h"
#include "executor/comm.h"
#include "executor/dit.h"

namespace ditune::exec {

struct GenerationResult {
  std::vector<Mat> latents;           // every prompt's final latent (tokens x C p^2), on every rank
  std::vector<double> step_seconds;   // this rank's time per denoising step (all its prompts)
  double dit_seconds = 0;             // this rank's denoising loop
  OpTimers timers;                    // this rank's time per operation class
};

class ParallelRunner {
 public:
  // Splits `world` into the groups of every dimension (collective: every rank calls it) and
  // builds this rank's weights. The world's size must equal the configuration's.
  static StatusOr<std::unique_ptr<ParallelRunner>> Create(const ModelSpec& model, const Workload& workload,
                                                          const ParallelConfig& config, Comm* world, uint64_t seed);
  ~ParallelRunner();

  // One whole generation: the flow-matching Euler loop with classifier-free guidance
  // (scale 4) where the model uses it.
  StatusOr<GenerationResult> Generate();

  // Bytes this rank holds in weights (for the memory check before running).
  int64_t WeightBytes() const;

 private:
  ParallelRunner() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_PARALLEL_H_
