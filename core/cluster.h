// The machines a job runs on: GPU type and count, how they are spread over nodes, and the
// links inside and between nodes.
#ifndef DITUNE_CORE_CLUSTER_H_
#define DITUNE_CORE_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/status.h"
#include "core/topology.h"

namespace ditune {

// As the user wrote it; 0 / empty means "derive it".
struct ClusterSpec {
  std::string gpu_id;
  int gpus = 0;
  int gpus_per_node = 0;  // default: min(gpus, the GPU's max_gpus_per_node)
  int nodes = 0;          // default: ceil(gpus / gpus_per_node)
  std::string intra_id;   // default: the GPU's default_intra
  std::string inter_id;   // default: "none" on one node; required on several
  // The user's own box (--topology): its sockets, PCIe switches and NVLinks replace the
  // catalog link's typical layout (LinkForTopology); null: the catalog's.
  std::shared_ptr<const MachineTopology> topology;
};

// A cluster with every default filled in and every id resolved against the catalog.
struct Cluster {
  ClusterSpec spec;  // fully filled in
  const GpuSpec* gpu = nullptr;
  const LinkSpec* intra = nullptr;
  const LinkSpec* inter = nullptr;
  // The link `intra` points to when a topology made it (shared so that copies stay valid).
  std::shared_ptr<const LinkSpec> topology_intra;
  std::vector<std::string> topology_notes;  // what LinkForTopology said about the box

  int gpus() const { return spec.gpus; }
  int gpus_per_node() const { return spec.gpus_per_node; }
  int nodes() const { return spec.nodes; }
  int NodeOf(int rank) const { return rank / spec.gpus_per_node; }
};

// Fills in defaults and checks consistency (gpus = nodes x gpus_per_node when both are
// given, gpus_per_node within what the GPU's boxes hold, an inter-node link for several
// nodes, link scopes). The catalog must outlive the result.
StatusOr<Cluster> ResolveCluster(const ClusterSpec& spec, const Catalog& catalog);

// The intra-node link as a person reads it: "pcie4", or with a user's topology
// "pcie4 as laid out in topo.txt (2 sockets, 4 GPUs a switch)".
std::string IntraLabel(const Cluster& cluster);
// What a user's topology made of the link, for a cache key ("" without one): its layout
// fields, so that two boxes never share a cached plan.
std::string TopologyKey(const Cluster& cluster);

}  // namespace ditune

#endif  // DITUNE_CORE_CLUSTER_H_
