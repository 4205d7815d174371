#include "calibration/kernel_classes.h"

#include <map>

#include <fmt/format.h>

namespace ditune {

const std::vector<TraceClass>& TraceClasses() {
  static const std::vector<TraceClass> kClasses = {
      {"gemm", "gemm", {OpClass::kGemm, OpClass::kLinearAttention}},
      {"attention", "attention", {OpClass::kAttention}},
      {"other", "elementwise", {OpClass::kElementwise}}};
  return kClasses;
}


StatusOr<std::optional<std::array<double, kNumOpClasses>>> KernelClassScales(const std::vector<Fit>& fits,
                                                                             const std::string& gpu, bool normalise) {
  const Fit* fit = nullptr;
  for (const auto& f : fits) {
    if (f.active && f.kind == kFitKindKernelClass && f.key == gpu) fit = &f;
  }
  if (fit == nullptr) return std::optional<std::array<double, kNumOpClasses>>();
  const nlohmann::json& p = fit->params;
  auto corrupt = [&](const std::string& what) {
    return Status::Corruption(fmt::format("fit {} '{}' ({}): {}", fit->id, fit->key, fit->kind, what));
  };
  if (!p.is_object()) return corrupt("params are not an object");
  std::map<std::string, double> scale;
  double weighted = 0, total = 0;
  for (const auto& c : TraceClasses()) {
    scale[c.fit] = 1.0;
    if (p.contains(c.fit)) {
      if (!p[c.fit].is_number() || !(p[c.fit].get<double>() > 0)) return corrupt(fmt::format("'{}' is not > 0", c.fit));
      scale[c.fit] = p[c.fit].get<double>();
    }
    const nlohmann::json w = p.contains("weights_s") && p["weights_s"].is_object()
                                 ? p["weights_s"].value(c.fit, nlohmann::json(0.0))
                                 : nlohmann::json(0.0);
    if (!w.is_number() || !(w.get<double>() >= 0)) return corrupt(fmt::format("weights_s '{}' is not >= 0", c.fit));
    weighted += w.get<double>() * scale[c.fit];
    total += w.get<double>();
  }
  const bool relative = p.contains("relative") && p["relative"].is_boolean() && p["relative"].get<bool>();
  const double mean = (normalise || relative) && total > 0 && weighted > 0 ? weighted / total : 1.0;
  std::array<double, kNumOpClasses> out;
  out.fill(1.0);
  for (const auto& c : TraceClasses()) {
    for (OpClass op : c.ops) out[static_cast<int>(op)] = scale[c.fit] / mean;
  }
  return std::optional<std::array<double, kNumOpClasses>>(out);
}

}  // namespace ditune
