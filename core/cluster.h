// The machines a job runs on: GPU type and count, how they are spread over nodes, and the
// links inside and between nodes.
#ifndef DITUNE_CORE_CLUSTER_H_
#define DITUNE_CORE_CLUSTER_H_

#include <string>

#include "core/catalog.h"
#include "core/status.h"

namespace ditune {

// As the user wrote it; 0 / empty means "derive it".
struct ClusterSpec {
  std::string gpu_id;
  int gpus = 0;
  int gpus_per_node = 0;  // default: min(gpus, the GPU's max_gpus_per_node)
  int nodes = 0;          // default: ceil(gpus / gpus_per_node)
  std::string intra_id;   // default: the GPU's default_intra
  std::string inter_id;   // default: "none" on one node; required on several
};

// A cluster with every default filled in and every id resolved against the catalog.
struct Cluster {
  ClusterSpec spec;  // fully filled in
  const GpuSpec* gpu = nullptr;
  const LinkSpec* intra = nullptr;
  const LinkSpec* inter = nullptr;

  int gpus() const { return spec.gpus; }
  int gpus_per_node() const { return spec.gpus_per_node; }
  int nodes() const { return spec.nodes; }
  int NodeOf(int rank) const { return rank / spec.gpus_per_node; }
};

// Fills in defaults and checks consistency (gpus = nodes x gpus_per_node when both are
// given, gpus_per_node within what the GPU's boxes hold, an inter-node link for several
// nodes, link scopes). The catalog must outlive the result.
StatusOr<Cluster> ResolveCluster(const ClusterSpec& spec, const Catalog& catalog);

}  // namespace ditune

#endif  // DITUNE_CORE_CLUSTER_H_
