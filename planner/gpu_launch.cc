#include "planner/gpu_launch.h"

#include <array>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/text.h"

namespace ditune {
namespace {

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

}  // namespace

CommandRunner SystemCommandRunner() {
  return [](const std::string& command) -> StatusOr<std::string> {
    FILE* p = popen((command + " 2>/dev/null").c_str(), "r");
    if (p == nullptr) return Status::IOError(fmt::format("cannot run '{}'", command));
    std::string out;
    std::array<char, 4096> buf{};
    while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
    const int rc = pclose(p);
    if (rc != 0) return Status::NotFound(fmt::format("'{}' failed or is not installed", command));
    return out;
  };
}

StatusOr<std::string> MapGpuName(const std::string& name, const Catalog& catalog) {
  const std::string n(Trim(name));
  for (const auto& g : catalog.gpus()) {
    for (const auto& d : g.device_names) {
      if (d == n) return g.id;
    }
  }
  std::string best;
  size_t best_len = 0;
  for (const auto& g : catalog.gpus()) {
    for (const auto& d : g.device_names) {
      if (d.size() > best_len && n.find(d) != std::string::npos) {
        // A longer known name that this one merely extends would be another product
        // ("NVIDIA H200" in "NVIDIA H200 NVL" is fine; "NVIDIA H20" in "NVIDIA H200" is not).
        const size_t at = n.find(d) + d.size();
        if (at < n.size() && std::isalnum(static_cast<unsigned char>(n[at]))) continue;
        best = g.id;
        best_len = d.size();
      }
    }
  }
  if (best.empty()) {
    std::vector<std::string> ids;
    for (const auto& g : catalog.gpus()) ids.push_back(g.id);
    return Status::NotFound(fmt::format("GPU '{}' is not in the catalog; pass --gpu with the closest of: {}", n,
                                        fmt::join(ids, ", ")));
  }
  return best;
}

StatusOr<DetectedGpus> DetectGpus(const Catalog& catalog, const CommandRunner& run) {
  auto list = run("nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits");
  if (!list.ok() || Trim(*list).empty()) {
    return Status::InvalidArgument(
        "no NVIDIA GPU detected on this machine (nvidia-smi is missing or lists none); give the cluster with "
        "--gpu ID --gpus N (see `ditune hardware`)");
  }
  DetectedGpus d;
  std::istringstream lines(*list);
  for (std::string line; std::getline(lines, line);) {
    line = std::string(Trim(line));
    if (line.empty()) continue;
    const size_t comma = line.rfind(',');
    if (comma == std::string::npos) return Status::Internal(fmt::format("unexpected nvidia-smi line '{}'", line));
    const std::string name(Trim(line.substr(0, comma)));
    if (d.count > 0 && name != d.name) {
      return Status::InvalidArgument(fmt::format(
          "this machine mixes GPU models ('{}' and '{}'); pick one set with CUDA_VISIBLE_DEVICES and pass --gpu",
          d.name, name));
    }
    d.name = name;
    d.memory_gb = std::strtod(line.substr(comma + 1).c_str(), nullptr) / 1024.0 * 1.073741824;  // MiB -> GB
    ++d.count;
  }
  auto id = MapGpuName(d.name, catalog);
  if (id.ok()) d.gpu_id = *id;
  // Topology: "NV#" between every pair means NVLink; "SYS" means across CPU sockets.
  auto topo = run("nvidia-smi topo -m");
  d.nvlink = false;
  if (topo.ok() && d.count > 1) {
    int pairs = 0, nv = 0;
    std::istringstream t(*topo);
    for (std::string line; std::getline(t, line);) {
      std::vector<std::string> w = Words(line);
      if (w.empty() || w[0].rfind("GPU", 0) != 0 || w[0].size() < 4) continue;
      for (size_t i = 1; i < w.size() && i <= static_cast<size_t>(d.count); ++i) {
        if (w[i] == "X") continue;
        ++pairs;
        if (w[i].rfind("NV", 0) == 0) ++nv;
        if (w[i] == "SYS") d.two_sockets = true;
      }
    }
    d.nvlink = pairs > 0 && nv == pairs;
    auto matrix = ParseTopoMatrix(*topo, "nvidia-smi topo -m");
    if (matrix.ok() && matrix->gpus == d.count) d.topology = std::make_shared<const MachineTopology>(*matrix);
  }
  if (!d.gpu_id.empty()) {
    const GpuSpec& g = **catalog.Gpu(d.gpu_id);
    const bool default_is_nvlink = g.default_intra.rfind("nvlink", 0) == 0;
    if (d.count <= 1 || d.nvlink == default_is_nvlink) {
      d.intra_id = g.default_intra;
    } else {
      d.intra_id = d.nvlink ? "nvlink4" : (g.default_intra.rfind("pcie", 0) == 0 ? g.default_intra : "pcie4");
    }
  }
  return d;
}

StatusOr<std::vector<std::string>> WithParallelFlags(const std::vector<std::string>& command, const Launch& launch) {
  if (command.empty()) return Status::InvalidArgument("no command after '--' to launch");
  std::vector<std::string> out = command;
  for (const auto& w : Words(launch.parallel_flags)) out.push_back(w);
  return out;
}

std::vector<std::string> DituneRunCommand(const std::string& bin, const Workload& w, const ParallelConfig& c,
                                          const Cluster& cluster) {
  std::vector<std::string> out = {"mpirun", "-np", std::to_string(c.world_size())};
  if (cluster.nodes() > 1) {
    out.insert(out.end(), {"--map-by", fmt::format("ppr:{}:node", cluster.gpus_per_node())});
  }
  out.insert(out.end(), {bin, "run"});
  // On GPUs ditune's executor is the DiT engine on CUDA (over NCCL); on CPU ranks the CPU one.
  if (!cluster.gpu->is_cpu) out.insert(out.end(), {"--backend", "cuda"});
  out.insert(out.end(), {"--config", ToString(c), "--model", w.model_id, "--height", std::to_string(w.height),
                         "--width", std::to_string(w.width), "--steps", std::to_string(w.steps), "--batch",
                         std::to_string(w.batch), "--output-type", std::string(OutputTypeName(w.output))});
  if (w.frames > 1) out.insert(out.end(), {"--frames", std::to_string(w.frames)});
  return out;
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) {
    if (!s.empty()) s += ' ';
    const bool plain = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                         "-_./=,:+@%") == std::string::npos;
    if (plain) {
      s += w;
    } else {
      s += '\'';
      for (char ch : w) s += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      s += '\'';
    }
  }
  return s;
}

}  // namespace ditune
