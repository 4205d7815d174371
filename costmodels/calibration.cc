#include "costmodels/calibration.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

namespace ditune {
namespace {

std::vector<std::string> SplitKey(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t pos; (pos = key.find('/', start)) != std::string::npos; start = pos + 1) {
    parts.push_back(key.substr(start, pos - start));
  }
  parts.push_back(key.substr(start));
  return parts;
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
