#include "costmodels/measurement.h"

#include <cmath>

#include <fmt/format.h>

namespace ditune {

std::string_view ToString(MeasurementSource s) {
  switch (s) {
    case MeasurementSource::kExecutor: return "executor";
    case MeasurementSource::kMicrobench: return "microbench";
    case MeasurementSource::kImport: return "import";
  }
  return "?";
}

std::string_view ToString(MeasurementKind k) {
  switch (k) {
    case MeasurementKind::kOp: return "op";
    case MeasurementKind::kCollective: return "collective";
    case MeasurementKind::kStep: return "step";
    case MeasurementKind::kE2e: return "e2e";
  }
  return "?";
}

StatusOr<MeasurementSource> ParseMeasurementSource(std::string_view s) {
  for (auto v : {MeasurementSource::kExecutor, MeasurementSource::kMicrobench, MeasurementSource::kImport}) {
    if (ToString(v) == s) return v;
  }
  return Status::InvalidArgument(
      fmt::format("source '{}' is not one of: executor, microbench, import", s));
}

StatusOr<MeasurementKind> ParseMeasurementKind(std::string_view s) {
  for (auto v : {MeasurementKind::kOp, MeasurementKind::kCollective, MeasurementKind::kStep,
                 MeasurementKind::kE2e}) {
    if (ToString(v) == s) return v;
  }
  return Status::InvalidArgument(fmt::format("kind '{}' is not one of: op, collective, step, e2e", s));
}

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
  return Status::Ok();
}

}  // namespace ditune
