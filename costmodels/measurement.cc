#include "costmodels/measurement.h"

#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "core/enum_names.h"

namespace ditune {

constexpr EnumName<MeasurementSource> kMeasurementSourceNames[] = {
    {MeasurementSource::kExecutor, "executor"},
    {MeasurementSource::kMicrobench, "microbench"},
    {MeasurementSource::kImport, "import"},
};

std::string_view ToString(MeasurementSource s) { return NameIn(kMeasurementSourceNames, s); }

constexpr EnumName<MeasurementKind> kMeasurementKindNames[] = {
    {MeasurementKind::kOp, "op"},
    {MeasurementKind::kCollective, "collective"},
    {MeasurementKind::kStep, "step"},
    {MeasurementKind::kE2e, "e2e"},
};

std::string_view ToString(MeasurementKind k) { return NameIn(kMeasurementKindNames, k); }

StatusOr<MeasurementSource> ParseMeasurementSource(std::string_view s) { return ParseIn(kMeasurementSourceNames, s, "source"); }

StatusOr<MeasurementKind> ParseMeasurementKind(std::string_view s) { return ParseIn(kMeasurementKindNames, s, "kind"); }

Status Measurement::Validate() const {
  auto bad = [](std::string msg) { return Status::InvalidArgument(std::move(msg)); };
  if (op.empty()) return bad("measurement: 'op' is empty");
  for (auto [name, t] : {std::pair{"median", median}, {"p10", p10}, {"p90", p90}}) {
    if (!std::isfinite(t.value()) || t.value() <= 0) {
      return bad(fmt::format("measurement {}: {} time must be > 0 seconds, got {}", op, name, t.value()));
    }
  }
  if (p10 > median || median > p90) {
    return bad(fmt::format("measurement {}: need p10 <= median <= p90, got {} / {} / {}", op,
                           p10.value(), median.value(), p90.value()));
  }
  if (ranks < 1) return bad(fmt::format("measurement {}: ranks must be >= 1", op));
  if (samples < 1) return bad(fmt::format("measurement {}: samples must be >= 1", op));
  if (bytes.value() < 0 || flops.value() < 0 || !std::isfinite(bytes.value()) ||
      !std::isfinite(flops.value())) {
    return bad(fmt::format("measurement {}: bytes and flops must be finite and >= 0", op));
  }
  if (!params.is_object()) return bad(fmt::format("measurement {}: params must be a JSON object", op));
  DITUNE_RETURN_IF_ERROR(CheckPhysicalBounds());
  for (auto [name, t] : {std::pair{"p10_s", p10}, {"p90_s", p90}}) {
    if (t.value() < kMinMeasuredSeconds || t.value() > kMaxMeasuredSeconds) {
      return bad(fmt::format("measurement {}: {} = {} s is outside the physical range (valid: {} to {} seconds)",
                             op, name, t.value(), kMinMeasuredSeconds, kMaxMeasuredSeconds));
    }
  }
  return Status::Ok();
}

Status Measurement::CheckPhysicalBounds() const {
  auto bad = [](std::string msg) { return Status::InvalidArgument(std::move(msg)); };
  const double t = median.value();
  if (!(t >= kMinMeasuredSeconds) || !(t <= kMaxMeasuredSeconds)) {
    return bad(fmt::format("measurement {}: median_s = {} s is outside the physical range (valid: {} to {} seconds)",
                           op, t, kMinMeasuredSeconds, kMaxMeasuredSeconds));
  }
  if (!(bytes.value() <= kMaxMeasuredBytes)) {
    return bad(fmt::format("measurement {}: bytes = {} is above the physical bound (valid: 0 to {} bytes)", op,
                           bytes.value(), kMaxMeasuredBytes));
  }
  if (!(flops.value() <= kMaxMeasuredFlops)) {
    return bad(fmt::format("measurement {}: flops = {} is above the physical bound (valid: 0 to {} FLOPs)", op,
                           flops.value(), kMaxMeasuredFlops));
  }
  // Step and e2e measurements may total the work of a whole cluster: no rate bound.
  if (kind != MeasurementKind::kOp && kind != MeasurementKind::kCollective) return Status::Ok();
  for (auto [name, size, unit] : {std::tuple{"bytes", bytes.value(), "B/s"}, {"flops", flops.value(), "FLOP/s"}}) {
    const double rate = size / t;
    if (!(rate <= kMaxMeasuredRatePerSecond)) {
      return bad(fmt::format(
          "measurement {}: {} / median_s = {} / {} s = {} {} is above the physical bound (valid: at most {} per "
          "second; check the units of {} and median_s)",
          op, name, size, t, rate, unit, kMaxMeasuredRatePerSecond, name));
    }
  }
  return Status::Ok();
}

}  // namespace ditune
