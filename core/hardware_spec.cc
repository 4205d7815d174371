#include "core/hardware_spec.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/enum_names.h"
#include "core/json_fields.h"

namespace ditune {

FlopsPerSecond GpuSpec::tensor_peak() const {
  if (fp16_fp32acc_peak.value() > 0) return fp16_fp32acc_peak;
  if (bf16_peak.value() > 0) return bf16_peak;
  if (fp16_peak.value() > 0) return fp16_peak;
  return fp32_peak;
}

constexpr EnumName<LinkTopology> kLinkTopologyNames[] = {
    {LinkTopology::kSwitch, "switch"},
    {LinkTopology::kPcieTwoSocket, "pcie-two-socket"},
    {LinkTopology::kSharedMemory, "shared-memory"},
    {LinkTopology::kNetwork, "network"},
    {LinkTopology::kNone, "none"},
};

std::string_view LinkTopologyName(LinkTopology t) { return NameIn(kLinkTopologyNames, t); }

StatusOr<GpuSpec> ParseGpuSpec(const nlohmann::json& j, const std::string& origin) {
  JsonFields f(j, origin);
  GpuSpec g;
  g.id = f.String("id");
  g.name = f.String("name");
  g.is_cpu = f.Enum("kind", {"gpu", "cpu"}) == "cpu";
  g.bf16_peak = TeraflopsPerSecond(f.Number("bf16_tflops", 0, 1e5));
  g.fp16_peak = TeraflopsPerSecond(f.Number("fp16_tflops", 0, 1e5));
  g.fp16_fp32acc_peak = TeraflopsPerSecond(f.Number("fp16_fp32acc_tflops", 0, 1e5));
  g.fp32_peak = TeraflopsPerSecond(f.Number("fp32_tflops", 0, 1e5));
  g.memory_bandwidth = GigabytesPerSecond(f.Number("memory_bandwidth_gbps", 0.001, 1e6));
  g.memory = Gigabytes(f.Number("memory_gb", 0.001, 1e6));
  // What nvidia-smi reports as memory.total, where a public output gives it (an "80GB"
  // A100 shows 81920 MiB): the capacity the memory model fills, instead of the marketed GB.
  if (f.Has("memory_total_mib")) {
    g.memory = Bytes(f.Number("memory_total_mib", 1, 1e8) * 1024.0 * 1024.0);
    if (f.String("memory_total_source").empty()) {
      f.Fail(origin + ": memory_total_source is empty: every fact cites its source");
    }
  }
  // Optional for hardware files written before it: PCIe 4.0 x16 (31.5 GB/s a direction).
  g.host_link = GigabytesPerSecond(f.Has("host_link_gbps") ? f.Number("host_link_gbps", 0.001, 1e5) : 31.5);
  g.sm_count = static_cast<int>(f.Int("sm_count", 1, 100000));
  if (f.Has("peer_access")) {
    g.peer_access = f.Bool("peer_access");
    if (f.String("peer_access_source").empty()) {
      f.Fail(origin + ": peer_access_source is empty: every fact cites its source");
    }
  }
  g.default_intra = f.String("default_intra");
  g.max_gpus_per_node = static_cast<int>(f.Int("max_gpus_per_node", 1, 4096));
  g.device_names = f.StringArray("device_names");
  g.source = f.String("source");
  g.notes = f.String("notes");
  f.RejectUnknownKeys();
  if (!f.status().ok()) return f.status();
  if (g.tensor_peak().value() <= 0) {
    return Status::InvalidArgument(fmt::format("{}: every peak is 0; at least one must be set", origin));
  }
  return g;
}

StatusOr<LinkSpec> ParseLinkSpec(const nlohmann::json& j, const std::string& origin) {
  JsonFields f(j, origin);
  LinkSpec l;
  l.id = f.String("id");
  l.name = f.String("name");
  l.scope = f.Enum("scope", {"intra", "inter"}) == "inter" ? LinkScope::kInter : LinkScope::kIntra;
  std::string topo =
      f.Enum("topology", {"switch", "pcie-two-socket", "shared-memory", "network", "none"});
  l.topology = topo == "pcie-two-socket" ? LinkTopology::kPcieTwoSocket
               : topo == "shared-memory" ? LinkTopology::kSharedMemory
               : topo == "network"       ? LinkTopology::kNetwork
               : topo == "none"          ? LinkTopology::kNone
                                         : LinkTopology::kSwitch;
  l.line = GigabytesPerSecond(f.Number("line_gbps", 0, 1e5));
  l.busbw = GigabytesPerSecond(f.Number("busbw_gbps", 0, 1e5));
  l.p2p = GigabytesPerSecond(f.Number("p2p_gbps", 0, 1e5));
  l.latency = Microseconds(f.Number("latency_us", 0, 1e6));
  l.sockets = static_cast<int>(f.Int("sockets", 1, 16));
  l.cross_socket = GigabytesPerSecond(f.Number("cross_socket_gbps", 0, 1e5));
  if (f.Has("gpus_per_switch")) l.gpus_per_switch = static_cast<int>(f.Int("gpus_per_switch", 0, 64));
  l.nics_per_node = static_cast<int>(f.Int("nics_per_node", 0, 64));
  l.source = f.String("source");
  l.notes = f.String("notes");
  f.RejectUnknownKeys();
  if (!f.status().ok()) return f.status();
  if (l.topology != LinkTopology::kNone && (l.busbw.value() <= 0 || l.p2p.value() <= 0)) {
    return Status::InvalidArgument(
        fmt::format("{}: busbw_gbps and p2p_gbps must be > 0 for a real link", origin));
  }
  if (l.busbw > l.line || l.p2p > l.line) {
    return Status::InvalidArgument(
        fmt::format("{}: achieved bandwidth cannot exceed the line rate", origin));
  }
  if (l.topology == LinkTopology::kPcieTwoSocket && (l.sockets < 2 || l.cross_socket.value() <= 0)) {
    return Status::InvalidArgument(fmt::format(
        "{}: a pcie-two-socket link needs sockets >= 2 and cross_socket_gbps > 0", origin));
  }
  if (l.gpus_per_switch > 0 && l.topology != LinkTopology::kPcieTwoSocket) {
    return Status::InvalidArgument(fmt::format(
        "{}: gpus_per_switch describes a pcie-two-socket box; this link's topology is {}", origin,
        LinkTopologyName(l.topology)));
  }
  return l;
}

}  // namespace ditune
