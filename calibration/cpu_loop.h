// The CPU executor's side of the calibration loop: the cluster its ranks form, the
// simulator's prediction of a configuration on it, and the refit of its compute scale from
// measured runs (what `ditune autotune` does on the CPU).
#ifndef DITUNE_CALIBRATION_CPU_LOOP_H_
#define DITUNE_CALIBRATION_CPU_LOOP_H_

#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/workload.h"
#include "costmodels/store.h"

namespace ditune::calibration {

// `ranks` CPU ranks over shared memory.
StatusOr<Cluster> CpuCluster(const Catalog& catalog, int ranks);

// The predicted denoising loop (latent output: no text encoding or VAE) of `config` on
// `ranks` CPU ranks with `fits`, in seconds.
StatusOr<double> PredictOnCpu(const Catalog& catalog, const Workload& w, const ParallelConfig& config, int ranks,
                              const std::vector<Fit>& fits);

// The compute scale of (cpu, `model_id`) refitted from runs: the factor that takes
// `predicted` (made with `fits`) to `measured` (FitScale: the weighted median of the ratios,
// robust to an outlier), composed with the scale `fits` already holds. An e2e fit keyed E2eFitKey("cpu", model_id) over predicted.size() points; its mape
// and measurement ids are the caller's to fill once it has predicted again and recorded.
// FitScale's error when the vectors cannot be fitted (empty, of different sizes).
StatusOr<Fit> RefitCpuComputeScale(const std::vector<Fit>& fits, const std::string& model_id,
                                   const std::vector<double>& predicted, const std::vector<double>& measured);

// `fits` with `fit` in place of any fit of the same (kind, key).
std::vector<Fit> WithFit(std::vector<Fit> fits, const Fit& fit);

}  // namespace ditune::calibration

#endif  // DITUNE_CALIBRATION_CPU_LOOP_H_
