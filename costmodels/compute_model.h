// Time of DiT operations on one device: a roofline with a size-dependent efficiency per
// operation class, catalog defaults when uncalibrated and fitted curves when measured, and
// the host's launch overhead where kernels are too short to hide it.
#ifndef DITUNE_COSTMODELS_COMPUTE_MODEL_H_
#define DITUNE_COSTMODELS_COMPUTE_MODEL_H_

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/hardware_spec.h"
#include "core/units.h"
#include "costmodels/dit_ops.h"
#include "costmodels/fitting.h"
#include "costmodels/mechanisms.h"

namespace ditune {

// The uncalibrated efficiency curve of one class: e(x) = e_max x / (x + x_half), written as
// a fixed cost t0 = x_half / (peak e_max) and a top rate peak e_max.
struct DefaultEfficiency {
  double e_max = 0.7;  // fraction of the peak at large sizes
  double t0_s = 5e-6;  // the fixed cost that halves efficiency at small sizes
};

// Who issues the kernels, which sets the host's share of the time:
// - kEager: an eager framework (xDiT over diffusers): each op is several framework ops
//   (OpCost::kernels) and blocks carry Python glue (host-only ops), each costing the launch
//   overhead; the catalog default is 15 µs an op.
// - kEngine: ditune's own engine: one fused kernel per device op issued from C++, no glue;
//   the overhead is what `calibrate compute` measures for the backend (default 5 µs on a
//   GPU, 0 on the host, whose kernels run on the issuing thread and are timed as device time).
// - kCompiled: the eager framework under torch.compile (xDiT's --use_torch_compile): the
//   graph is traced once, so the Python glue is gone and each op's framework ops run as one
//   generated kernel issued from the compiled wrapper (one launch an op, at the engine's
//   default 5 µs); device time as eager.
enum class Runtime { kEager, kEngine, kCompiled };

// The range of a per-class efficiency multiplier (ComputeModel::SetClassScale): a measured
// class time further from its curve than 4x either way is a trace of another workload, not
// an efficiency.
inline constexpr double kMinClassScale = 0.25;
inline constexpr double kMaxClassScale = 4.0;

class ComputeModel {
 public:
  // Catalog defaults for `gpu`: tensor peak and memory bandwidth with typical efficiencies
  // (GEMM 75%, fused attention 50%, linear attention 30%, elementwise 80% of bandwidth)
  // and, for GPUs, 10 µs of host time per framework op (eager PyTorch: Python, dispatch and
  // launch).
  static ComputeModel Defaults(const GpuSpec& gpu);

  // Device time of one op: the fitted or default curve, times the scale and its class's scale.
  Seconds DeviceTime(const OpCost& op) const;
  // Host time to issue it: launches x launch overhead, where launches are the op's framework
  // ops for kEager and one kernel (none for a host-only op) for kEngine. The host runs ahead
  // of the device, so a sequence of ops takes about max(sum of device, sum of host) time.
  Seconds HostTime(const OpCost& op) const;
  // One op on its own: max(device, host).
  Seconds OpTime(const OpCost& op) const;
  // A sequence of ops: max(sum of device times, sum of host times).
  Seconds OpsTime(const std::vector<OpCost>& ops) const;

  // A fitted curve for one class replaces its default: x is FLOPs for compute classes,
  // bytes for elementwise.
  void SetFit(OpClass cls, PiecewiseLatencyModel model);
  // A fitted curve for attention kernels of one head dimension; it takes precedence over
  // the class's curve for ops with that head_dim.
  void SetAttentionFit(int head_dim, PiecewiseLatencyModel model);
  // A fitted curve for one engine kernel (dit_ops.h kernel_names, IsKernelFitName): it takes
  // precedence over the class's curve for ops that kernel computes (OpCost::kernel; the
  // GEMM with the GELU epilogue only under Runtime::kEngine, where the MLP runs fused).
  void SetKernelFit(const std::string& kernel, PiecewiseLatencyModel model);
  bool has_fit(OpClass cls) const { return fits_[static_cast<int>(cls)].has_value(); }
  void set_launch_overhead(Seconds s) { launch_overhead_ = s; }
  Seconds launch_overhead() const { return launch_overhead_; }
  // Switches to `runtime`: its launch overhead is the measured one (kEngine, once set) or its
  // default for this device.
  void SetRuntime(Runtime runtime);
  // The engine's launch overhead as measured on this device: kEngine uses it instead of
  // the default, now or once it is set.
  void SetMeasuredLaunchOverhead(Seconds s);
  Runtime runtime() const { return runtime_; }
  // The global mechanism constants: the eager and compiled per-op host times (for GPUs; the
  // runtime's overhead is re-derived), and what the simulator reads of the framework (the
  // ops around Ulysses and Ring, the VAE scales).
  void SetMechanisms(const Mechanisms& m);
  const Mechanisms& mechanisms() const { return mechanisms_; }
  // A multiplier on every op time (fitted from end-to-end runs: framework overheads
  // that scale with the work).
  void set_scale(double k) { scale_ = k; }
  double scale() const { return scale_; }
  // A multiplier on the device time of the ops of one class only (measured from a profiler
  // trace's kernels: the class's kernel time over its modelled time), clamped to
  // [kMinClassScale, kMaxClassScale]; 1 (a non-finite `k` too) unless set.
  void SetClassScale(OpClass cls, double k);
  double class_scale(OpClass cls) const { return class_scales_[static_cast<int>(cls)]; }
  FlopsPerSecond peak() const { return peak_; }
  BytesPerSecond memory_bandwidth() const { return memory_bandwidth_; }
  // Scales the peak (what-if: "a GPU with twice the FLOP/s").
  void ScalePeak(double k) { peak_ = peak_ * k; }

  // The size an op class is fitted on: FLOPs, or bytes for elementwise ops.
  static double FitSize(const OpCost& op);

 private:
  Seconds CurveTime(const OpCost& op) const;

  FlopsPerSecond peak_;
  BytesPerSecond memory_bandwidth_;
  std::array<DefaultEfficiency, kNumOpClasses> defaults_{};
  std::array<std::optional<PiecewiseLatencyModel>, kNumOpClasses> fits_{};
  std::map<int, PiecewiseLatencyModel> attention_by_head_dim_;
  std::map<std::string, PiecewiseLatencyModel, std::less<>> kernel_fits_;
  Seconds launch_overhead_;
  Runtime runtime_ = Runtime::kEager;
  bool is_cpu_ = false;
  std::optional<Seconds> measured_launch_;
  double scale_ = 1.0;
  std::array<double, kNumOpClasses> class_scales_{1.0, 1.0, 1.0, 1.0};
  Mechanisms mechanisms_;
};

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_COMPUTE_MODEL_H_
