#include "costmodels/compute_model.h"

#include <algorithm>
#include <cmath>

namespace ditune {

ComputeModel ComputeModel::Defaults(const GpuSpec& gpu) {
  ComputeModel m;
  m.peak_ = gpu.tensor_peak();
  m.memory_bandwidth_ = gpu.memory_bandwidth;
  m.defaults_[static_cast<int>(OpClass::kGemm)] = {0.75, 5e-6};
  m.defaults_[static_cast<int>(OpClass::kAttention)] = {0.50, 10e-6};
  m.defaults_[static_cast<int>(OpClass::kLinearAttention)] = {0.30, 10e-6};
  m.defaults_[static_cast<int>(OpClass::kElementwise)] = {0.80, 3e-6};
  m.is_cpu_ = gpu.is_cpu;
  m.SetRuntime(Runtime::kEager);
  return m;
}

void ComputeModel::SetRuntime(Runtime runtime) {
  runtime_ = runtime;
  if (runtime == Runtime::kEngine && measured_launch_) {
    launch_overhead_ = *measured_launch_;
  } else if (is_cpu_) {
    launch_overhead_ = Seconds(0);
  } else {
    launch_overhead_ = runtime == Runtime::kEager ? Microseconds(mechanisms_.eager_op_us)
                       : runtime == Runtime::kCompiled ? Microseconds(mechanisms_.compiled_op_us)
                                                       : Microseconds(5);
  }
}

void ComputeModel::SetMechanisms(const Mechanisms& m) {
  mechanisms_ = m;
  SetRuntime(runtime_);
}

void ComputeModel::SetMeasuredLaunchOverhead(Seconds s) {
  measured_launch_ = s;
  if (runtime_ == Runtime::kEngine) launch_overhead_ = s;
}

Seconds ComputeModel::HostTime(const OpCost& op) const {
  if (runtime_ == Runtime::kEngine) return op.host_only || op.engine_fused ? Seconds(0) : launch_overhead_;
  if (runtime_ == Runtime::kCompiled) return op.host_only ? Seconds(0) : launch_overhead_;
  return launch_overhead_ * op.kernels;
}

double ComputeModel::FitSize(const OpCost& op) {
  return op.cls == OpClass::kElementwise ? op.bytes.value() : op.flops.value();
}

Seconds ComputeModel::DeviceTime(const OpCost& op) const {
  if (op.host_only || (runtime_ == Runtime::kEngine && op.engine_fused)) return Seconds(0);
  return CurveTime(op) * (scale_ * class_scales_[static_cast<int>(op.cls)]);
}

void ComputeModel::SetClassScale(OpClass cls, double k) {
  class_scales_[static_cast<int>(cls)] = std::isfinite(k) ? std::clamp(k, kMinClassScale, kMaxClassScale) : 1.0;
}

Seconds ComputeModel::CurveTime(const OpCost& op) const {
  const int c = static_cast<int>(op.cls);
  if (op.cls == OpClass::kAttention && op.head_dim > 0) {
    auto it = attention_by_head_dim_.find(op.head_dim);
    if (it != attention_by_head_dim_.end()) return Seconds(it->second.TimeAt(FitSize(op)));
  }
  if (!op.kernel.empty() && (op.kernel != kernel_names::kGemmGelu || runtime_ == Runtime::kEngine)) {
    auto it = kernel_fits_.find(op.kernel);
    if (it != kernel_fits_.end()) return Seconds(it->second.TimeAt(FitSize(op)));
  }
  if (fits_[c]) return Seconds(fits_[c]->TimeAt(FitSize(op)));
  const DefaultEfficiency& d = defaults_[c];
  // Memory roofline for every class at the elementwise efficiency, times the learned share of
  // it that eager ops achieve (Mechanisms::memory_efficiency; never past 95% of the HBM's).
  const double mem_rate = memory_bandwidth_.value() *
                          std::min(0.95, defaults_[static_cast<int>(OpClass::kElementwise)].e_max *
                                             mechanisms_.memory_efficiency);
  const double t_mem = op.bytes.value() / mem_rate;
  if (op.cls == OpClass::kElementwise) return Seconds(d.t0_s + t_mem);
  const double t_compute = d.t0_s + op.flops.value() / (peak_.value() * d.e_max);
  return Seconds(std::max(t_compute, t_mem));
}

Seconds ComputeModel::OpTime(const OpCost& op) const { return std::max(DeviceTime(op), HostTime(op)); }

Seconds ComputeModel::OpsTime(const std::vector<OpCost>& ops) const {
  Seconds device, host;
  for (const auto& op : ops) {
    device += DeviceTime(op);
    host += HostTime(op);
  }
  return std::max(device, host);
}

void ComputeModel::SetAttentionFit(int head_dim, PiecewiseLatencyModel model) {
  attention_by_head_dim_[head_dim] = std::move(model);
}

void ComputeModel::SetKernelFit(const std::string& kernel, PiecewiseLatencyModel model) {
  kernel_fits_[kernel] = std::move(model);
}

void ComputeModel::SetFit(OpClass cls, PiecewiseLatencyModel model) {
  fits_[static_cast<int>(cls)] = std::move(model);
}

}  // namespace ditune
