#include "calibration/op_fits.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "costmodels/calibration.h"
#include "costmodels/comm_model.h"
#include "costmodels/fitting.h"

namespace ditune {
namespace {

// Launches in a host-launch measurement (op "launch"); 0 when params do not say.
double Launches(const Measurement& m) {
  if (!m.params.is_object() || !m.params.contains("launches") || !m.params["launches"].is_number()) return 0;
  return m.params["launches"].get<double>();
}

}  // namespace

Status CheckFittable(const Measurement& m) {
  if (m.kind == MeasurementKind::kCollective) return ParseCollective(m.op).status();
  if (m.kind == MeasurementKind::kOp && m.op == "launch") {
    if (Launches(m) >= 1) return Status::Ok();
    return Status::InvalidArgument("op 'launch' needs params.launches, the kernels issued in the timed span (>= 1)");
  }
  if (m.kind == MeasurementKind::kOp) {
    auto cls = ParseOpClass(m.op == "norm" ? "elementwise" : m.op);
    if (!cls.ok()) return Status::InvalidArgument(cls.status().message() + ", launch");
  }
  return Status::Ok();
}

StatusOr<std::vector<Fit>> BuildFits(const std::vector<Measurement>& measurements,
                                     std::vector<std::string>* skipped) {
  struct Group {
    std::string kind;
    std::vector<FitPoint> points;
    std::vector<int64_t> ids;
    std::string x;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  // Adds the point (x, t) of `m` to a group, or leaves it out, saying why, when it is
  // beyond the physical bounds (a store may hold rows written before ingest checked them):
  // one absurd point would make the whole group's fit non-finite.
  auto add = [&](const std::string& kind, const std::string& key, const std::string& x_name, const Measurement& m,
                 double x, double t) {
    Status st = m.CheckPhysicalBounds();
    if (st.ok() && !(x / t <= kMaxMeasuredRatePerSecond)) {
      st = Status::InvalidArgument(fmt::format("{} / median_s = {} / {} s = {} per second is above the physical "
                                               "bound (valid: at most {} per second)",
                                               x_name, x, t, x / t, kMaxMeasuredRatePerSecond));
    }
    if (!st.ok()) {
      if (skipped != nullptr) {
        skipped->push_back(fmt::format("{} {}: measurement {} left out of the fit: {}", kind, key, m.id, st.message()));
      }
      return;
    }
    Group& g = groups[{kind, key}];
    g.kind = kind;
    g.x = x_name;
    g.points.push_back({x, t});
    g.ids.push_back(m.id);
  };
  for (const auto& m : measurements) {
    if (m.kind == MeasurementKind::kCollective) {
      auto c = ParseCollective(m.op);
      if (!c.ok()) return c.status().WithContext(fmt::format("measurement {}", m.id));
      const double bus = m.bytes.value() * BusFactor(*c, m.ranks);
      if (bus <= 0 || m.link.empty()) continue;
      add(kFitKindComm, CommFitKey(m), "bus_bytes", m, bus, m.median.value());
    } else if (m.kind == MeasurementKind::kOp && m.op == "launch") {
      // Host time of issuing `launches` kernels: the fit's rate is launches per second.
      const double n = Launches(m);
      if (n < 1) continue;
      add(kFitKindCompute, fmt::format("{}/{}/launch", m.device, m.backend), "launches", m, n, m.median.value());
    } else if (m.kind == MeasurementKind::kOp) {
      const std::string op = m.op == "norm" ? "elementwise" : m.op;
      auto cls = ParseOpClass(op);
      if (!cls.ok()) return cls.status().WithContext(fmt::format("measurement {}", m.id));
      const double x = *cls == OpClass::kElementwise ? m.bytes.value() : m.flops.value();
      if (x <= 0) continue;
      for (const std::string& key : ComputeFitKeys(m)) {
        add(kFitKindCompute, key, *cls == OpClass::kElementwise ? "bytes" : "flops", m, x, m.median.value());
      }
    }
  }
  std::vector<Fit> fits;
  for (auto& [k, g] : groups) {
    auto r = FitPiecewiseLatency(g.points);
    if (!r.ok()) {
      if (skipped != nullptr) skipped->push_back(fmt::format("{} {}: {}", k.first, k.second, r.status().message()));
      continue;
    }
    Fit f;
    f.kind = k.first;
    f.key = k.second;
    f.params = r->model.ToJson();
    f.params["x"] = g.x;
    f.points = r->points;
    f.mape = r->mape;
    f.measurement_ids = g.ids;
    fits.push_back(std::move(f));
  }
  return fits;
}

}  // namespace ditune
