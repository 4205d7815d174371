#include "costmodels/comm_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/enum_names.h"

namespace ditune {

constexpr EnumName<Collective> kCollectiveNames[] = {
    {Collective::kAllToAll, "all_to_all"},
    {Collective::kAllGather, "all_gather"},
    {Collective::kAllReduce, "all_reduce"},
    {Collective::kSendRecv, "sendrecv"},
    {Collective::kReduceScatter, "reduce_scatter"},
};

std::string_view CollectiveName(Collective c) { return NameIn(kCollectiveNames, c); }

StatusOr<Collective> ParseCollective(std::string_view name) { return ParseIn(kCollectiveNames, name, "collective"); }

double BusFactor(Collective c, int n) {
  if (n <= 1) return c == Collective::kSendRecv ? 1.0 : 0.0;
  switch (c) {
    case Collective::kAllToAll:
    case Collective::kAllGather:
    case Collective::kReduceScatter: return static_cast<double>(n - 1) / n;
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kSendRecv: return 1.0;
  }
  return 1.0;
}

constexpr EnumName<LinkTier> kLinkTierNames[] = {
    {LinkTier::kIntra, "intra"},
    {LinkTier::kCrossSocket, "cross-socket"},
    {LinkTier::kInterNode, "inter-node"},
};

std::string_view LinkTierName(LinkTier t) { return NameIn(kLinkTierNames, t); }

CommModel::CommModel(const Cluster& cluster) : cluster_(&cluster) {}

int CommModel::GpusPerSocket() const {
  const int sockets = cluster_->intra->topology == LinkTopology::kPcieTwoSocket ? cluster_->intra->sockets : 1;
  // Ranks fill a node's GPUs in order; the box splits its GPUs evenly over the sockets, so
  // a job that uses 6 GPUs of an 8-GPU two-socket box has 4 on one socket and 2 on the other.
  // A user's topology says how many GPUs the box has; else the GPU's usual box.
  const int box = cluster_->intra->box_gpus > 0 ? std::max(cluster_->gpus_per_node(), cluster_->intra->box_gpus)
                                                : std::max(cluster_->gpus_per_node(), cluster_->gpu->max_gpus_per_node);
  return std::max(1, (box + sockets - 1) / sockets);
}

int CommModel::SocketOf(int rank) const { return (rank % cluster_->gpus_per_node()) / GpusPerSocket(); }

LinkTier CommModel::TierOf(const std::vector<int>& group) const {
  if (group.empty()) return LinkTier::kIntra;
  for (int r : group) {
    if (cluster_->NodeOf(r) != cluster_->NodeOf(group.front())) return LinkTier::kInterNode;
  }
  for (int r : group) {
    if (SocketOf(r) != SocketOf(group.front())) return LinkTier::kCrossSocket;
  }
  return LinkTier::kIntra;
}

bool CommModel::PeerAccess() const { return cluster_->gpu == nullptr || cluster_->gpu->peer_access; }

std::string CommModel::FitKey(Collective c, LinkTier tier) const {
  switch (tier) {
    case LinkTier::kIntra: return fmt::format("{}/{}", CollectiveName(c), cluster_->intra->id);
    case LinkTier::kCrossSocket: return fmt::format("{}/{}/cross-socket", CollectiveName(c), cluster_->intra->id);
    case LinkTier::kInterNode: return fmt::format("{}/{}", CollectiveName(c), cluster_->inter->id);
  }
  return "";
}

Seconds CommModel::DefaultLatency(LinkTier tier) const {
  switch (tier) {
    case LinkTier::kIntra: return cluster_->intra->latency;
    case LinkTier::kCrossSocket: return cluster_->intra->latency * 1.5;
    case LinkTier::kInterNode: return cluster_->intra->latency + cluster_->inter->latency;
  }
  return Seconds(0);
}

BytesPerSecond CommModel::DefaultBusBandwidth(Collective c, LinkTier tier, const std::vector<int>& group) const {
  const LinkSpec& intra = *cluster_->intra;
  // What the node's fabric achieves for this collective: a PCIe box stages through the
  // host and crosses the sockets; a switched fabric runs all-to-all as concurrent peers.
  double efficiency = 1.0;
  if (intra.topology == LinkTopology::kPcieTwoSocket) {
    efficiency = c == Collective::kAllToAll   ? mechanisms_.pcie_alltoall_efficiency
                 : c == Collective::kSendRecv ? mechanisms_.pcie_p2p_efficiency
                                              : mechanisms_.pcie_allreduce_efficiency;
  } else if (intra.topology == LinkTopology::kSwitch && c == Collective::kAllToAll) {
    efficiency = mechanisms_.switch_alltoall_efficiency;
  }
  const BytesPerSecond intra_bw = (c == Collective::kSendRecv ? intra.p2p : intra.busbw) * efficiency;
  switch (tier) {
    case LinkTier::kIntra: return intra_bw;
    case LinkTier::kCrossSocket: return std::min(intra_bw, intra.cross_socket * mechanisms_.cross_socket_efficiency);
    case LinkTier::kInterNode: {
      // An all-to-all (or a transfer) sends each rank's own remote shares across: the group's
      // ranks on one node share that node's NICs. A ring collective balances its traffic
      // instead: every link of the ring, the node-crossing ones included, carries the same
      // (n-1)/n of the size each way (NVIDIA/nccl #209, sjeaugey: "Rings will balance traffic
      // evenly so that each intra-node and inter-node link transmits and receives (n-1)/n*size"),
      // so its bus bandwidth is the node's NICs', whatever the ranks behind them.
      std::map<int, int> per_node;
      for (int r : group) per_node[cluster_->NodeOf(r)]++;
      int local = 1;
      for (const auto& [node, count] : per_node) local = std::max(local, count);
      const bool ring = c != Collective::kAllToAll && c != Collective::kSendRecv;
      const LinkSpec& inter = *cluster_->inter;
      const BytesPerSecond nic = c == Collective::kSendRecv ? inter.p2p : inter.busbw;
      const BytesPerSecond per_rank =
          nic * (static_cast<double>(std::max(1, inter.nics_per_node)) / (ring ? 1 : local));
      return std::min(intra_bw, per_rank);
    }
  }
  return intra_bw;
}

Seconds CommModel::Time(Collective c, Bytes size, const std::vector<int>& group, double sharing) const {
  const int n = static_cast<int>(group.size());
  if (c != Collective::kSendRecv && n <= 1) return Seconds(0);
  if (size.value() <= 0) return Seconds(0);
  const LinkTier tier = TierOf(group);
  const double bus_bytes = size.value() * BusFactor(c, n) * std::max(1.0, sharing) / bandwidth_scale_;
  auto it = fits_.find(FitKey(c, tier));
  if (it != fits_.end() && !it->second.empty()) return FittedTime(it->second, bus_bytes, group);
  if (c == Collective::kAllToAll && tier != LinkTier::kInterNode &&
      cluster_->intra->topology == LinkTopology::kPcieTwoSocket) {
    // Each rank's shares leave and arrive over its own PCIe link (peer to peer, or through
    // host memory, whose bandwidth is several links'): inside a socket that link or its
    // switch's uplink is the limit; across the sockets, the one path between them that every
    // crossing pair shares.
    return PcieAllToAll(size, group, tier, sharing);
  }
  return DefaultLatency(tier) + Bytes(bus_bytes) / DefaultBusBandwidth(c, tier, group);
}

namespace {

// The most shares that cross out of any one part (socket or switch) each way in an all-to-all
// of n ranks, `per_part` of them in each part: c x (n - c) for the part holding c.
double MostCrossing(const std::map<int, int>& per_part, int n) {
  double crossing = 0;
  for (const auto& [part, count] : per_part) crossing = std::max(crossing, static_cast<double>(count) * (n - count));
  return crossing;
}

}  // namespace

Seconds CommModel::PcieAllToAll(Bytes size, const std::vector<int>& group, LinkTier tier, double sharing) const {
  const int n = static_cast<int>(group.size());
  const Collective c = Collective::kAllToAll;
  const double scale = std::max(1.0, sharing) / bandwidth_scale_;
  const double bus_bytes = size.value() * BusFactor(c, n) * scale;
  // Each PCIe switch's one uplink carries every share between its ranks and the group's ranks
  // behind other switches: c x (n - c) / n of the per-rank size each way, against (n - 1) / n
  // over each rank's own link, which is as wide. The busier of the two sets the time.
  const double uplink_bytes = size.value() * SwitchCrossing(group) / n * scale;
  const Seconds links = Bytes(std::max(bus_bytes, uplink_bytes)) / DefaultBusBandwidth(c, LinkTier::kIntra, group);
  if (tier == LinkTier::kCrossSocket) {
    // Every rank on one socket sends each rank on the other its share at once: the host path
    // between the sockets carries a x b / n of the per-rank size each way (a and b ranks on
    // the two sockets), against one share per rank on a switch.
    std::map<int, int> per_socket;
    for (int r : group) per_socket[SocketOf(r)]++;
    const double host_bytes = size.value() * MostCrossing(per_socket, n) / n * scale;
    const BytesPerSecond host_path = cluster_->intra->cross_socket * mechanisms_.cross_socket_alltoall_efficiency;
    return DefaultLatency(tier) + Microseconds(mechanisms_.cross_socket_alltoall_latency_us) +
           std::max(links, Bytes(host_bytes) / host_path);
  }
  return DefaultLatency(tier) + links;
}

double CommModel::SwitchCrossing(const std::vector<int>& group) const {
  const int per_switch = cluster_->intra->gpus_per_switch;
  if (per_switch <= 0) return 0;
  // A socket's GPUs fill its switches in order; a switch never spans two sockets.
  const int per_socket = GpusPerSocket();
  const int switches_per_socket = (per_socket + per_switch - 1) / per_switch;
  std::map<int, int> per_switch_count;
  for (int r : group) {
    const int local = r % cluster_->gpus_per_node();
    per_switch_count[(local / per_socket) * switches_per_socket + (local % per_socket) / per_switch]++;
  }
  return MostCrossing(per_switch_count, static_cast<int>(group.size()));
}

double CommModel::Sharing(const std::vector<int>& group, const std::vector<std::vector<int>>& concurrent) const {
  const LinkTier tier = TierOf(group);
  if (tier == LinkTier::kIntra) return 1.0;
  const int node = cluster_->NodeOf(group.front());
  if (tier == LinkTier::kCrossSocket) {
    int crossing = 0;
    for (const auto& g : concurrent) {
      if (!g.empty() && cluster_->NodeOf(g.front()) == node && TierOf(g) == LinkTier::kCrossSocket) ++crossing;
    }
    return std::max(1, crossing);
  }
  // Inter-node: ranks of this node in node-crossing groups, over this group's own.
  int mine = 0, all = 0;
  for (int r : group) mine += cluster_->NodeOf(r) == node;
  for (const auto& g : concurrent) {
    if (TierOf(g) != LinkTier::kInterNode) continue;
    for (int r : g) all += cluster_->NodeOf(r) == node;
  }
  return std::max(1.0, static_cast<double>(all) / std::max(1, mine));
}

double CommModel::Sharing(const std::vector<int>& group, const RankLayout& layout, Axis axis) const {
  if (TierOf(group) == LinkTier::kIntra) return 1.0;  // the groups are listed only where needed
  return Sharing(group, layout.world_size(), [&](int r) { return layout.GroupOf(r, axis); });
}

double CommModel::Sharing(const std::vector<int>& group, int world_size,
                          const std::function<std::vector<int>(int)>& concurrent_of) const {
  const LinkTier tier = TierOf(group);
  if (tier == LinkTier::kIntra) return 1.0;
  // As the list form: a node's inter-socket link is shared by the socket-crossing groups that
  // start on it (each lies within the node, so its first rank is there), and a node's NICs
  // by its ranks whose group leaves the node (a rank is in one concurrent group at most).
  const int node = cluster_->NodeOf(group.front());
  const int first = node * cluster_->gpus_per_node();
  const int last = std::min(world_size, first + cluster_->gpus_per_node());
  if (tier == LinkTier::kCrossSocket) {
    int crossing = 0;
    for (int r = first; r < last; ++r) {
      const std::vector<int> g = concurrent_of(r);
      if (!g.empty() && g.front() == r && TierOf(g) == LinkTier::kCrossSocket) ++crossing;
    }
    return std::max(1, crossing);
  }
  int mine = 0, all = 0;
  for (int r : group) mine += cluster_->NodeOf(r) == node;
  for (int r = first; r < last; ++r) {
    const std::vector<int> g = concurrent_of(r);
    if (!g.empty() && TierOf(g) == LinkTier::kInterNode) ++all;
  }
  return std::max(1.0, static_cast<double>(all) / std::max(1, mine));
}

void CommModel::SetFit(Collective c, LinkTier tier, PiecewiseLatencyModel model, int ranks, int nodes) {
  auto& list = fits_[FitKey(c, tier)];
  std::erase_if(list, [&](const SizedFit& f) { return f.ranks == ranks && f.nodes == nodes; });
  list.push_back({ranks, nodes, std::move(model)});
}

Seconds CommModel::FittedTime(const std::vector<SizedFit>& fits, double bus_bytes, const std::vector<int>& group) const {
  const int n = static_cast<int>(group.size());
  std::set<int> nodes;
  for (int r : group) nodes.insert(cluster_->NodeOf(r));
  const int group_nodes = static_cast<int>(nodes.size());
  // Sized curves of the group's node count, else of any node count; unsized ones last.
  std::vector<const SizedFit*> sized;
  for (const auto& f : fits) {
    if (f.ranks > 0 && f.nodes == group_nodes) sized.push_back(&f);
  }
  if (sized.empty()) {
    for (const auto& f : fits) {
      if (f.ranks > 0) sized.push_back(&f);
    }
  }
  if (sized.empty()) return Seconds(fits.back().model.TimeAt(bus_bytes));
  const SizedFit* lo = nullptr;  // the most ranks <= n
  const SizedFit* hi = nullptr;  // the fewest ranks >= n
  for (const SizedFit* f : sized) {
    if (f->ranks <= n && (lo == nullptr || f->ranks > lo->ranks)) lo = f;
    if (f->ranks >= n && (hi == nullptr || f->ranks < hi->ranks)) hi = f;
  }
  if (lo == nullptr) return Seconds(hi->model.TimeAt(bus_bytes));
  if (hi == nullptr || hi->ranks == lo->ranks) return Seconds(lo->model.TimeAt(bus_bytes));
  const double w = std::log(static_cast<double>(n) / lo->ranks) / std::log(static_cast<double>(hi->ranks) / lo->ranks);
  const double t_lo = lo->model.TimeAt(bus_bytes), t_hi = hi->model.TimeAt(bus_bytes);
  return Seconds(t_lo + (t_hi - t_lo) * w);
}

}  // namespace ditune
