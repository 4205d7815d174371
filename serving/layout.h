// How a cluster is split into serving replicas: `4x(ulysses=2)` is four replicas of two
// GPUs, `2x(ulysses=2)+4x()` two of two and four of one. Each replica serves one request
// (or one batch) at a time with its parallel configuration.
#ifndef DITUNE_SERVING_LAYOUT_H_
#define DITUNE_SERVING_LAYOUT_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.h"
#include "core/parallel_config.h"
#include "core/status.h"

namespace ditune::serving {

// The most GPUs a layout may take (the CLI's cluster bound).
inline constexpr int kMaxLayoutGpus = 65536;

struct ReplicaGroup {
  int count = 1;
  ParallelConfig config;  // one replica's configuration; its world size is its GPU count
};

struct Layout {
  std::vector<ReplicaGroup> groups;

  int gpus() const;
  int replicas() const;
};

// `COUNTx(CONFIG)[+COUNTx(CONFIG)...]`, CONFIG in config syntax (empty: one GPU); `x(` may
// be left out for one replica (`(ulysses=2)+4x()`). InvalidArgument naming the part and the
// valid form.
StatusOr<Layout> ParseLayout(std::string_view spec);

// Canonical text: ParseLayout(ToString(l)) equals l.
std::string ToString(const Layout& layout);

// One replica as placed on the cluster: its group, configuration and GPUs
// [first_gpu, first_gpu + gpus).
struct PlacedReplica {
  int group = 0;
  ParallelConfig config;
  int first_gpu = 0;
  int gpus = 1;
};

// Places every replica on `cluster`, largest first, each inside one node (or on whole nodes
// when larger than a node). In the layout's order. InvalidArgument when the layout needs more
// GPUs than the cluster has, or a replica cannot be placed (too big for the free part of any
// node, or larger than a node and not a whole number of nodes).
StatusOr<std::vector<PlacedReplica>> PlaceLayout(const Layout& layout, const Cluster& cluster);

// The cluster a replica of `gpus` GPUs sees: `cluster`'s GPU and links, on
// ceil(gpus / gpus_per_node) nodes.
ClusterSpec ReplicaClusterSpec(const Cluster& cluster, int gpus);

}  // namespace ditune::serving

#endif  // DITUNE_SERVING_LAYOUT_H_
