#include "costmodels/calibration.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

namespace ditune {
namespace {

StatusOr<OpClass> ParseOpClass(std::string_view name) {
  for (OpClass c : {OpClass::kGemm, OpClass::kAttention, OpClass::kLinearAttention, OpClass::kElementwise}) {
    if (OpClassName(c) == name) return c;
  }
  return Status::InvalidArgument(fmt::format(
      "op '{}' is not one of: gemm, attention, linear_attention, elementwise", name));
}

std::vector<std::string> SplitKey(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t pos; (pos = key.find('/', start)) != std::string::npos; start = pos + 1) {
    parts.push_back(key.substr(start, pos - start));
  }
  parts.push_back(key.substr(start));
  return parts;
}

// Launches in a host-launch measurement (op "launch"); 0 when params do not say.
double Launches(const Measurement& m) {
  if (!m.params.is_object() || !m.params.contains("launches") || !m.params["launches"].is_number()) return 0;
  return m.params["launches"].get<double>();
}

}  // namespace

std::string FitBackend(const GpuSpec& gpu, const std::string& backend) {
  return gpu.is_cpu && backend != "ref" ? "cpu" : backend;
}

std::string CommFitKey(const Measurement& m) {
  std::string key = fmt::format("{}/{}", m.op, m.link);
  if (m.params.is_object() && m.params.value("tier", "") == "cross-socket") key += "/cross-socket";
  // Keyed by the group's shape: an 80-rank, 10-node all-to-all is not a 2-rank one.
  if (m.ranks >= 2) {
    key += fmt::format("@{}", m.ranks);
    if (m.params.is_object() && m.params.contains("nodes") && m.params["nodes"].is_number_integer() &&
        m.params["nodes"].get<int64_t>() >= 1 && m.params["nodes"].get<int64_t>() <= 1'000'000) {
      key += fmt::format("x{}", m.params["nodes"].get<int64_t>());
    }
  }
  return key;
}

std::vector<std::string> ComputeFitKeys(const Measurement& m) {
  std::string op = m.op == "norm" ? "elementwise" : m.op;
  const auto prefix = fmt::format("{}/{}/", m.device, m.backend);
  const bool has_params = m.params.is_object();
  // Attention kernels are fitted per head dimension when the measurement says it.
  if (op == "attention" && has_params && m.params.contains("head_dim") && m.params["head_dim"].is_number_integer()) {
    return {prefix + fmt::format("attention@{}", m.params["head_dim"].get<int>())};
  }
  const std::string kernel =
      has_params && m.params.contains("kernel") && m.params["kernel"].is_string() ? m.params["kernel"].get<std::string>()
                                                                               : "";
  if (!IsKernelFitName(kernel)) return {prefix + op};
  // A GEMM with an epilogue is its own kernel; an elementwise kernel has its own curve and
  // also joins the class's pooled one (what prices ops whose kernel was not measured).
  if (op == "gemm") return {prefix + kernel};
  if (op == "elementwise") return {prefix + op, prefix + kernel};
  return {prefix + op};
}

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

bool HasComputeFits(const std::vector<Fit>& fits, const std::string& device, const std::string& backend) {
  const std::string prefix = fmt::format("{}/{}/", device, backend);
  return std::any_of(fits.begin(), fits.end(),
                     [&](const Fit& f) { return f.active && f.kind == kFitKindCompute && f.key.starts_with(prefix); });
}

Status ApplyFits(const std::vector<Fit>& fits, const std::string& device, const std::string& backend,
                 ComputeModel* compute, CommModel* comm) {
  for (const auto& f : fits) {
    if (!f.active) continue;
    const std::vector<std::string> key = SplitKey(f.key);
    if (f.kind == kFitKindCompute && compute != nullptr) {
      if (key.size() != 3 || key[0] != device || key[1] != backend) continue;
      if (key[2] == "launch") {
        auto model = PiecewiseLatencyModel::FromJson(f.params);
        if (!model.ok()) return model.status().WithContext(fmt::format("fit {} '{}'", f.id, f.key));
        if (model->empty()) return Status::Corruption(fmt::format("fit {} '{}': no segments", f.id, f.key));
        // The per-launch cost is the inverse rate of the longest runs (the fixed part is the
        // clock reading around them).
        compute->SetMeasuredLaunchOverhead(Seconds(1.0 / model->segments().back().rate));
        continue;
      }
      if (key[2].rfind("attention@", 0) == 0) {
        auto model = PiecewiseLatencyModel::FromJson(f.params);
        if (!model.ok()) return model.status().WithContext(fmt::format("fit {} '{}'", f.id, f.key));
        compute->SetAttentionFit(std::atoi(key[2].c_str() + 10), *model);
        continue;
      }
      if (IsKernelFitName(key[2])) {
        auto model = PiecewiseLatencyModel::FromJson(f.params);
        if (!model.ok()) return model.status().WithContext(fmt::format("fit {} '{}'", f.id, f.key));
        compute->SetKernelFit(key[2], *model);
        continue;
      }
      auto cls = ParseOpClass(key[2]);
      if (!cls.ok()) return Status::Corruption(fmt::format("fit {} '{}': {}", f.id, f.key, cls.status().message()));
      auto model = PiecewiseLatencyModel::FromJson(f.params);
      if (!model.ok()) return model.status().WithContext(fmt::format("fit {} '{}'", f.id, f.key));
      compute->SetFit(*cls, *model);
    } else if (f.kind == kFitKindComm && comm != nullptr) {
      if (key.size() < 2) return Status::Corruption(fmt::format("fit {}: malformed key '{}'", f.id, f.key));
      auto c = ParseCollective(key[0]);
      if (!c.ok()) return Status::Corruption(fmt::format("fit {} '{}': {}", f.id, f.key, c.status().message()));
      auto model = PiecewiseLatencyModel::FromJson(f.params);
      if (!model.ok()) return model.status().WithContext(fmt::format("fit {} '{}'", f.id, f.key));
      // Install for whichever tier of this cluster the key names; "@R[xN]" says the ranks
      // and nodes it was measured on.
      std::string base = f.key;
      int ranks = 0, nodes = 0;
      if (const size_t at = f.key.rfind('@'); at != std::string::npos) {
        base = f.key.substr(0, at);
        if (std::sscanf(f.key.c_str() + at + 1, "%dx%d", &ranks, &nodes) < 1 || ranks < 1 || nodes < 0) {
          return Status::Corruption(fmt::format("fit {}: malformed key '{}' (want <collective>/<link>[@R[xN]])", f.id,
                                                f.key));
        }
      }
      for (LinkTier tier : {LinkTier::kIntra, LinkTier::kCrossSocket, LinkTier::kInterNode}) {
        if (comm->FitKey(*c, tier) == base) comm->SetFit(*c, tier, *model, ranks, nodes);
      }
    }
  }
  return Status::Ok();
}

std::string MechanismsKeyFor(const std::string& gpu) { return fmt::format("{}@{}", kMechanismsKeyXdit, gpu); }

StatusOr<std::optional<Mechanisms>> MechanismsIn(const std::vector<Fit>& fits, const std::string& gpu) {
  const Fit* chosen = nullptr;
  for (const auto& f : fits) {
    if (!f.active || f.kind != kFitKindMechanisms) continue;
    if (!gpu.empty() && f.key == MechanismsKeyFor(gpu)) chosen = &f;
    if (f.key == kMechanismsKeyXdit && chosen == nullptr) chosen = &f;
  }
  if (chosen == nullptr) return std::optional<Mechanisms>();
  nlohmann::json constants = chosen->params;
  if (constants.is_object()) constants.erase("origin");  // where they came from, not a constant
  auto m = MechanismsFromJson(constants);
  if (!m.ok()) {
    return Status::Corruption(fmt::format("fit {} '{}': {}", chosen->id, chosen->key, m.status().message()));
  }
  return std::optional<Mechanisms>(*m);
}

Fit MechanismsFit(const Mechanisms& m) {
  Fit f;
  f.kind = kFitKindMechanisms;
  f.key = kMechanismsKeyXdit;
  f.params = MechanismsToJson(m);
  return f;
}

StatusOr<CostModels> MakeCostModels(const Cluster& cluster, const std::vector<Fit>& fits,
                                    const std::string& backend, Runtime runtime) {
  CostModels m{ComputeModel::Defaults(*cluster.gpu), std::make_unique<CommModel>(cluster)};
  DITUNE_ASSIGN_OR_RETURN(std::optional<Mechanisms> mech, MechanismsIn(fits, cluster.gpu->id));
  if (mech) {
    m.mechanisms = *mech;
    m.mechanisms_fitted = true;
  }
  m.compute.SetMechanisms(m.mechanisms);
  m.comm->SetMechanisms(m.mechanisms);
  m.compute.SetRuntime(runtime);
  DITUNE_RETURN_IF_ERROR(ApplyFits(fits, cluster.gpu->id, FitBackend(*cluster.gpu, backend), &m.compute, m.comm.get()));
  return m;
}

}  // namespace ditune
