// One prediction: a workload, a cluster and a configuration through the calibrated models
// and the simulator.
#ifndef DITUNE_CALIBRATION_PREDICT_H_
#define DITUNE_CALIBRATION_PREDICT_H_

#include <map>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "costmodels/calibration.h"
#include "store/store.h"
#include "simulator/simulate.h"

namespace ditune {

// Calibration that applies to one (GPU, model) beyond the per-op fits: the framework's
// compute scale fitted from end-to-end runs.
inline constexpr const char* kFitKindE2e = "e2e";
std::string E2eFitKey(const std::string& gpu, const std::string& model);

// The fit key of ditune's engine on `backend` kernels on `gpu`: "<gpu>/<backend>/engine",
// the scale measured / modelled DiT time over every one-device engine run recorded there;
// for runs across `ranks` > 1 processes "<gpu>/<backend>/engine@<ranks>", the same over the
// runs of that many ranks (what their transfers and waiting add beyond the models), which
// then prices plans of that size instead.
std::string EngineFitKey(const std::string& gpu, const std::string& backend, int ranks = 1);

// Models for `cluster` with the store's fits. `backend` picks the compute fits
// (MakeCostModels): cuda for GPUs, ref for the engine's reference kernels on the host.
// `runtime` says who runs the kernels:
// - kEager and kCompiled (xDiT and the like): the e2e scales of (cluster GPU, model) apply,
//   if there are any: the framework's compute scale ("<gpu>/<model>") and the text encoding
//   and VAE decode scales ("<gpu>/<model>/text_encode", ".../vae_decode"); and the GPU's
//   efficiency per op class from profiler traces (KernelClassScales), as measured where no
//   compute scale of (GPU, model) applies, normalised to a time-weighted mean of 1 beside one
//   (the scale, fitted with them so, holds the level; they only move time between classes);
// - kEngine (ditune's engine): the engine's measured launch overhead and its scale
//   (EngineFitKey: of the cluster's GPU count where one was fitted, else the one-device
//   one) apply instead of the framework's compute scale, for every model — a scale fitted
//   on some models and sizes predicts the others.
StatusOr<CostModels> ModelsFor(const Cluster& cluster, const std::string& model_id, const std::vector<Fit>& fits,
                               const std::string& backend = "cuda", Runtime runtime = Runtime::kEager);

// The simulator's view of one run of ditune's engine: `config` on `cluster`, DiT only
// (latent output), with the models of ModelsFor(..., backend, kEngine).
StatusOr<SimResult> SimulateEngineRun(const ModelSpec& model, const Workload& workload, const ParallelConfig& config,
                                      const Cluster& cluster, const std::vector<Fit>& fits,
                                      const std::string& backend);

// What prices a run of the engine's `backend` kernels on `gpu`: the kernels themselves where
// they run (the host's kernels on the catalog's "cpu", cuda on a GPU); the host's kernels
// standing in for a GPU (`--gpu` naming one) are priced as the cuda engine there.
std::string EnginePricedAs(const std::string& backend, const GpuSpec& gpu);

// Every valid configuration of `workload` on `cluster`, priced as ditune's engine runs it on
// `backend` (SimulateEngineRun: the DiT loop), fastest first.
struct EngineCandidate {
  ParallelConfig config;
  double dit_s = 0;
};
StatusOr<std::vector<EngineCandidate>> RankEngineConfigs(const Catalog& catalog, const Workload& workload,
                                                         const Cluster& cluster, const std::vector<Fit>& fits,
                                                         const std::string& backend);

// The engine's kernels over rank `rank`'s denoising loop, each priced by its fitted (or
// default) curve on `cluster`'s GPU for `backend` alone, without the engine scale: what
// `ditune run --profile` sets beside the measured kernels (simulator ModelledKernelTimes).
StatusOr<std::map<std::string, Seconds>> EngineKernelTimes(const ModelSpec& model, const Workload& workload,
                                                           const ParallelConfig& config, const Cluster& cluster,
                                                           const std::vector<Fit>& fits, const std::string& backend,
                                                           int rank);

// Fits of the engine scales: every DiT measurement of ditune's engine (source executor, op
// dit, any of its kernels: cpu, ref, cuda) gives measured / modelled, modelled
// from `fits` (the per-op curves and launch overhead) on its GPU count; the median per
// (GPU, backend, ranks) is the fit (EngineFitKey). Multi-rank cuda runs count only over
// NCCL (one GPU per rank; over MPI ranks may share a GPU). `skipped` receives measurements
// that cannot be used.
StatusOr<std::vector<Fit>> FitEngineScales(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                           const std::vector<Fit>& fits, std::vector<std::string>* skipped = nullptr);

// The e2e fit of `key` ("<gpu>/<model>") at compute scale 1: in place of the fitted one while
// a scale is fitted, so that what applies beside a scale (the class efficiencies, normalised)
// is in force in the modelled time the scale divides.
Fit UnitComputeScale(const std::string& key);

// An e2e fit of one scale: `param` (e.g. "compute_scale") = the robust ratio measured /
// modelled (FitScale), with its MAPE after scaling and the measurements it came from.
StatusOr<Fit> ScaleFit(const std::string& key, const std::string& param, const std::vector<double>& modelled,
                       const std::vector<double>& measured, const std::vector<int64_t>& ids);

// Fits of the text-encoding and VAE-decode terms: every e2e measurement whose op is
// text_encode or vae_decode and whose params name the workload (model, height, width,
// frames, batch) gives measured / modelled (the catalog's defaults at scale 1, as the
// prediction then models a measured term: PipelineTermScales); the median per (GPU, model,
// term) is the fit. `skipped` receives measurements that cannot be used, with the reason.
StatusOr<std::vector<Fit>> FitPipelineTerms(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                            std::vector<std::string>* skipped = nullptr);



}  // namespace ditune

#endif  // DITUNE_CALIBRATION_PREDICT_H_
