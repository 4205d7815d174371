// Time of collectives and point-to-point transfers on a cluster's links.
//
// Sizes follow nccl-tests: `size` is the per-rank buffer (all_to_all: what one rank sends
// in total; all_gather: the gathered output; all_reduce: the buffer; sendrecv: the
// message). time = latency + size x busfactor / busbw, with nccl-tests' bus factors:
// (n-1)/n for all-to-all and all-gather, 2(n-1)/n for all-reduce, 1 for send/recv. A
// fitted piecewise curve over bus bytes replaces the catalog line when measured.
#ifndef DITUNE_COSTMODELS_COMM_MODEL_H_
#define DITUNE_COSTMODELS_COMM_MODEL_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.h"
#include "core/rank_layout.h"
#include "core/status.h"
#include "core/units.h"
#include "costmodels/fitting.h"
#include "costmodels/mechanisms.h"

namespace ditune {

// kReduceScatter: nccl-tests' reduce_scatter_perf, `size` the per-rank input; its bus factor
// is (n-1)/n, as all-gather's.
enum class Collective { kAllToAll, kAllGather, kAllReduce, kSendRecv, kReduceScatter };
std::string_view CollectiveName(Collective c);
StatusOr<Collective> ParseCollective(std::string_view name);

// nccl-tests' bus-bandwidth factor for a group of n ranks.
double BusFactor(Collective c, int n);

// Which link a group's traffic crosses: all on one switch/bus (kIntra), across the two
// sockets of a PCIe box (kCrossSocket), or between nodes (kInterNode).
enum class LinkTier { kIntra, kCrossSocket, kInterNode };
std::string_view LinkTierName(LinkTier t);

class CommModel {
 public:
  // The cluster must outlive the model.
  explicit CommModel(const Cluster& cluster);

  LinkTier TierOf(const std::vector<int>& group) const;
  // Whether transfers between this node's GPUs go peer to peer (GpuSpec::peer_access); false:
  // each is staged through host memory.
  bool PeerAccess() const;
  // The socket of a rank inside its node (0 where the box has one socket).
  int SocketOf(int rank) const;
  // The most shares any one PCIe switch's uplink carries each way in an all-to-all of
  // `group`: c x (n - c) for c of its n ranks behind that switch (consecutive GPUs of a
  // socket share a switch, LinkSpec::gpus_per_switch of them); 0 where the link has no
  // switches.
  double SwitchCrossing(const std::vector<int>& group) const;
  // The fit key of a collective on a tier of this cluster, e.g. "all_to_all/pcie4/cross-socket".
  std::string FitKey(Collective c, LinkTier tier) const;

  // Seconds for one collective of `size` bytes (nccl-tests convention) over `group`, with
  // `sharing` concurrent transfers dividing the bottleneck link's bandwidth.
  Seconds Time(Collective c, Bytes size, const std::vector<int>& group, double sharing = 1.0) const;

  // How many transfers share `group`'s bottleneck when all of `concurrent` (which should
  // include `group`) run at once: groups crossing the sockets of one node share its
  // inter-socket link; ranks crossing nodes share their node's NICs. 1 when none do.
  double Sharing(const std::vector<int>& group, const std::vector<std::vector<int>>& concurrent) const;
  // The same with the concurrent groups those of `layout` along `axis`, listed only where the
  // group leaves its socket (a group inside one shares nothing: 1.0 at once, on any cluster).
  double Sharing(const std::vector<int>& group, const RankLayout& layout, Axis axis) const;
  // The same with the concurrent groups given rank by rank: `concurrent_of(r)` is the group
  // holding rank r (empty where r takes no part), for ranks 0..world_size-1. Only the ranks
  // of `group`'s first node are asked (what shares a node's links is on that node), so the
  // work is one node's, not the world's.
  double Sharing(const std::vector<int>& group, int world_size,
                 const std::function<std::vector<int>(int)>& concurrent_of) const;

  // A fitted curve over bus bytes for (collective, tier) replaces the catalog line. A curve
  // measured on `ranks` ranks over `nodes` nodes (0: not known) prices groups of that shape:
  // a group of n ranks takes the curves of its node count where there are any, the one of
  // n ranks, else the time interpolated in log(ranks) between the nearest rank counts either
  // side, else the nearest; curves of unknown rank count serve when no sized one does.
  void SetFit(Collective c, LinkTier tier, PiecewiseLatencyModel model, int ranks = 0, int nodes = 0);
  // The global mechanism constants: the achieved fraction of the catalog bandwidth per
  // collective on switched fabrics and PCIe boxes (catalog lines only: a fitted curve is
  // already what was achieved).
  void SetMechanisms(const Mechanisms& m) { mechanisms_ = m; }
  // Scales every bandwidth (what-if: "twice the link").
  void ScaleBandwidth(double k) { bandwidth_scale_ *= k; }

  // The catalog's bus bandwidth and latency for a tier (before fits).
  BytesPerSecond DefaultBusBandwidth(Collective c, LinkTier tier, const std::vector<int>& group) const;
  Seconds DefaultLatency(LinkTier tier) const;

 private:
  // All-to-all on a PCIe box's links (each rank's own and each switch's uplink, within a
  // socket; across, with the inter-socket path shared by every crossing pair too).
  Seconds PcieAllToAll(Bytes size, const std::vector<int>& group, LinkTier tier, double sharing) const;
  // GPUs of a node on each socket (the whole node where the box has one socket).
  int GpusPerSocket() const;

  const Cluster* cluster_;
  struct SizedFit {
    int ranks = 0;  // 0: any
    int nodes = 0;  // 0: not known
    PiecewiseLatencyModel model;
  };
  // The fitted time of `bus_bytes` over `group` from `fits` (non-empty).
  Seconds FittedTime(const std::vector<SizedFit>& fits, double bus_bytes, const std::vector<int>& group) const;
  std::map<std::string, std::vector<SizedFit>> fits_;
  double bandwidth_scale_ = 1.0;
  Mechanisms mechanisms_;
};

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_COMM_MODEL_H_
