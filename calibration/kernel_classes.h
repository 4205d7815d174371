// A GPU's efficiency per op class from profiler traces (the kernel_class fit) and how it
// reads: what the trace's kernel classes stand for, and the multipliers a fit sets. The fit is
// made from stored traces by FitMeasuredRuns (measured_runs.h); ModelsFor (predict.h) applies it.
#ifndef DITUNE_CALIBRATION_KERNEL_CLASSES_H_
#define DITUNE_CALIBRATION_KERNEL_CLASSES_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "costmodels/dit_ops.h"
#include "costmodels/fit.h"

namespace ditune {

// A profiler trace's kernel classes, the fit's name for each, and the op classes each stands
// for (PyTorch runs SANA's linear attention as matmuls: GEMM kernels).
struct TraceClass {
  const char* trace;
  const char* fit;
  std::vector<OpClass> ops;
};
const std::vector<TraceClass>& TraceClasses();

// The fit kind of a GPU's efficiency per op class from profiler traces, keyed "<gpu>":
// params {"gemm", "attention", "elementwise"}: measured / modelled device time of the class
// (those measured and within bounds); "weights_s": the modelled device seconds per step of
// each of the three in the traces' workloads (the mean over the traces), which weigh the
// normalisation; "relative": true when no trace had a time per step; "origin".
inline constexpr const char* kFitKindKernelClass = "kernel_class";

// The efficiency multipliers per op class (indexed by OpClass) that the kernel_class fit of
// `gpu` in `fits` sets, or nullopt when there is none: the fitted ratios, linear attention
// taking gemm's and a class the fit does not name 1; divided by their mean weighted by
// "weights_s" when `normalise` (beside a compute scale of the (GPU, model), which already
// holds their level) or when the fit is relative, so that they move time between classes
// without changing the total of the traces' workload. Corruption when the params do not read.
StatusOr<std::optional<std::array<double, kNumOpClasses>>> KernelClassScales(const std::vector<Fit>& fits,
                                                                             const std::string& gpu, bool normalise);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_KERNEL_CLASSES_H_
