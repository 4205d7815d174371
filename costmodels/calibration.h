// Turns stored measurements into fits and fits into calibrated models.
//
// Fit kinds and keys (stable; `ditune calibrate show` prints them):
//   comm     "<collective>/<link>[/cross-socket]"   piecewise over bus bytes
//            (nccl-tests' size x bus factor), so group sizes pool into one curve
//   compute  "<device>/<backend>/<op class>"        piecewise over FLOPs (bytes for
//            elementwise ops); "<device>/<backend>/launch": the host's time to issue
//            kernels, piecewise over launches (ditune's engine on that backend);
//            "<device>/<backend>/attention@<head_dim>" and "<device>/<backend>/<kernel>"
//            (gemm_gelu, norm_modulate, gelu, ...: the engine's kernels, IsKernelFitName)
// Every fit records the measurements it came from and is rebuilt identically from them.
#ifndef DITUNE_COSTMODELS_CALIBRATION_H_
#define DITUNE_COSTMODELS_CALIBRATION_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "costmodels/comm_model.h"
#include "costmodels/compute_model.h"
#include "costmodels/fit.h"
#include "costmodels/measurement.h"
#include "costmodels/mechanisms.h"
#include "costmodels/pipeline_terms.h"

namespace ditune {

inline constexpr const char* kFitKindComm = "comm";
inline constexpr const char* kFitKindCompute = "compute";

// Loads the fits that apply: compute fits of (device, backend) into `compute`, comm fits
// of the cluster's links into `comm` (either may be null).
Status ApplyFits(const std::vector<Fit>& fits, const std::string& device, const std::string& backend,
                 ComputeModel* compute, CommModel* comm);

// Calibrated models for a cluster: catalog defaults, then every applicable fit in `fits`.
// The cluster must outlive the result.
struct CostModels {
  ComputeModel compute;
  std::unique_ptr<CommModel> comm;
  PipelineTermScales terms;  // text encoding and VAE decode, fitted per (GPU, model)
  Mechanisms mechanisms;     // the global constants in use (MechanismsIn)
  bool mechanisms_fitted = false;  // from a fit (learned or shipped), not the code's defaults
};

// The global mechanism constants of `fits`: the active fit of kind "mechanisms" keyed
// "xdit@<gpu>" (refined on that GPU's measured runs) when `gpu` is given and there is one,
// else the one keyed "xdit", else nullopt (the defaults). Corruption when its parameters do
// not read (MechanismsFromJson).
StatusOr<std::optional<Mechanisms>> MechanismsIn(const std::vector<Fit>& fits, const std::string& gpu = "");
std::string MechanismsKeyFor(const std::string& gpu);  // "xdit@<gpu>"
// The fit that carries `m` (kind "mechanisms", key "xdit").
Fit MechanismsFit(const Mechanisms& m);
// The backend whose compute fits describe `backend` on `gpu`: the CPU "GPU" is measured by
// the cpu backend whatever the caller's default, unless the caller asks for the engine's
// reference kernels on it.
std::string FitBackend(const GpuSpec& gpu, const std::string& backend);

// `backend` picks the compute fits ("<gpu>/<FitBackend>/..."), `runtime` who issues the
// kernels: an eager framework such as xDiT, or ditune's engine (whose measured launch
// overhead, fit "<gpu>/<backend>/launch", then applies). The mechanisms fit of `fits`, if
// any, sets the global constants of both models.
StatusOr<CostModels> MakeCostModels(const Cluster& cluster, const std::vector<Fit>& fits,
                                    const std::string& backend = "cuda", Runtime runtime = Runtime::kEager);

// Whether `fits` holds an active compute fit of `backend` on `device` ("<device>/<backend>/...").
bool HasComputeFits(const std::vector<Fit>& fits, const std::string& device, const std::string& backend);

// The fit key of a collective measurement, and the keys of an op measurement: its class
// ("<device>/<backend>/gemm"), attention per head dimension ("attention@128"), and for the
// engine's own kernels (params.kernel, IsKernelFitName) the kernel's ("gemm_gelu" alone;
// an elementwise kernel both its own and the pooled "elementwise").
std::string CommFitKey(const Measurement& m);
std::vector<std::string> ComputeFitKeys(const Measurement& m);

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_CALIBRATION_H_
