#include "calibration/link_check.h"

#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodels/comm_model.h"

namespace ditune {
namespace {

// What makes each kind of link fall far short, most likely first, with the published case.
std::vector<std::string> Causes(const LinkSpec& link) {
  switch (link.topology) {
    case LinkTopology::kSwitch:
      return {
          "NCCL's peer-to-peer path is off (NCCL_P2P_DISABLE=1 in the environment): every transfer goes through "
          "host memory (xDiT #526: Ulysses-2 on 2 A800s gave 1.6x until NCCL_P2P_DISABLE=0 gave 1.9x; a DGX A100's "
          "all_reduce falls from 222 to 5.2 GB/s bus bandwidth with it)",
          "the ranks are not the NVLink-connected GPUs (CUDA_VISIBLE_DEVICES, or NVLink bridges joining pairs only: "
          "nvidia-smi topo -m shows SYS/NODE between them)",
      };
    case LinkTopology::kPcieTwoSocket:
      return {
          "peer-to-peer is unavailable: ACS or the IOMMU is on (disable VT-d or boot with iommu=pt: NVIDIA/nccl #631), "
          "or GeForce cards, which have no GPU Direct P2P (NVIDIA/nccl #1309); NCCL then stages through host memory",
          "the ranks straddle the two sockets (nvidia-smi topo -m: SYS between them)",
          "a slot running below PCIe 4.0 x16 (nvidia-smi -q: 'PCIe Generation' and 'Link Width' under load)",
      };
    case LinkTopology::kNetwork:
      return {
          "NCCL is not using InfiniBand/RoCE and fell back to TCP sockets (NCCL_IB_DISABLE=1, no RDMA driver or "
          "device; NCCL_DEBUG=INFO prints 'NET/Socket')",
          "fewer NICs than GPUs per node, or NICs on the other socket than their GPUs",
      };
    case LinkTopology::kSharedMemory:
    case LinkTopology::kNone:
      return {};
  }
  return {};
}

}  // namespace

std::vector<LinkShortfall> FindLinkShortfalls(const std::vector<Measurement>& measurements, const Catalog& catalog,
                                              double fraction) {
  // The largest message per (link, collective, ranks).
  std::map<std::tuple<std::string, std::string, int>, const Measurement*> largest;
  for (const Measurement& m : measurements) {
    if (m.kind != MeasurementKind::kCollective || m.link.empty() || m.ranks < 2 || !(m.median.value() > 0)) continue;
    // Small messages are latency-bound on any link: only a run that reaches large ones is judged.
    if (m.bytes.value() < kLinkCheckMinBytes) continue;
    const Measurement*& slot = largest[{m.link, m.op, m.ranks}];
    if (slot == nullptr || m.bytes.value() > slot->bytes.value()) slot = &m;
  }
  std::vector<LinkShortfall> out;
  for (const auto& [key, m] : largest) {
    auto link = catalog.Link(m->link);
    auto collective = ParseCollective(m->op);
    if (!link.ok() || !collective.ok()) continue;
    const LinkSpec& l = **link;
    const bool p2p = *collective == Collective::kSendRecv;
    const double expected = (p2p ? l.p2p : l.busbw).value();
    if (!(expected > 0) || Causes(l).empty()) continue;
    const double measured = m->bytes.value() * BusFactor(*collective, m->ranks) / m->median.value();
    if (measured >= fraction * expected) continue;
    LinkShortfall s;
    s.link = m->link;
    s.collective = m->op;
    s.ranks = m->ranks;
    s.measured_gbps = measured / 1e9;
    s.expected_gbps = expected / 1e9;
    s.causes = Causes(l);
    out.push_back(std::move(s));
  }
  return out;
}

std::string LinkShortfallText(const LinkShortfall& s) {
  return fmt::format("{} over {} ({} ranks): {:.1f} GB/s bus bandwidth at its largest message, {:.0f}% of the link's "
                     "{:.0f} GB/s; likely: {}",
                     s.collective, s.link, s.ranks, s.measured_gbps, 100 * s.measured_gbps / s.expected_gbps,
                     s.expected_gbps, fmt::join(s.causes, "; or "));
}

}  // namespace ditune
