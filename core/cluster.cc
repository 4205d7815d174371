#include "core/cluster.h"

#include <fmt/format.h>

namespace ditune {
namespace {

std::string LinkIds(const Catalog& catalog, LinkScope scope, bool real_only) {
  std::string out;
  for (const auto& l : catalog.links()) {
    if (l.scope != scope || (real_only && l.topology == LinkTopology::kNone)) continue;
    out += out.empty() ? l.id : ", " + l.id;
  }
  return out;
}

}  // namespace

StatusOr<Cluster> ResolveCluster(const ClusterSpec& in, const Catalog& catalog) {
  Cluster c;
  c.spec = in;
  ClusterSpec& s = c.spec;
  if (s.gpu_id.empty()) {
    std::vector<std::string> ids;
    for (const auto& g : catalog.gpus()) ids.push_back(g.id);
    return Status::InvalidArgument(UnknownIdMessage("GPU", "", ids) + " (--gpu is required)");
  }
  DITUNE_ASSIGN_OR_RETURN(c.gpu, catalog.Gpu(s.gpu_id));
  if (s.gpus < 1) {
    return Status::InvalidArgument(fmt::format("--gpus must be >= 1, got {}", s.gpus));
  }
  if (s.gpus_per_node < 0 || s.nodes < 0) {
    return Status::InvalidArgument("--gpus-per-node and --nodes must be >= 1");
  }
  // A user's box holds as many GPUs as its topology lists.
  const int box = s.topology != nullptr ? s.topology->gpus : c.gpu->max_gpus_per_node;
  if (s.topology != nullptr && s.gpus_per_node > box) {
    return Status::InvalidArgument(fmt::format("--gpus-per-node {}: the topology file '{}' describes a node of {} GPU{}",
                                               s.gpus_per_node, s.topology->source, box, box == 1 ? "" : "s"));
  }
  if (s.gpus_per_node == 0) {
    s.gpus_per_node = s.nodes > 0 ? (s.gpus + s.nodes - 1) / s.nodes
                                  : std::min(s.gpus, box);
    if (s.topology != nullptr && s.gpus_per_node > box) {
      const int fewest = (s.gpus + box - 1) / box;
      return Status::InvalidArgument(fmt::format(
          "--gpus {} on --nodes {} puts {} GPUs in a node; the topology file '{}' describes a node of {}: use --nodes {} "
          "or more",
          s.gpus, s.nodes, s.gpus_per_node, s.topology->source, box, fewest));
    }
    if (s.gpus_per_node > c.gpu->max_gpus_per_node) {
      const int fewest = (s.gpus + c.gpu->max_gpus_per_node - 1) / c.gpu->max_gpus_per_node;
      return Status::InvalidArgument(fmt::format(
          "--gpus {} on --nodes {} puts {} GPUs in a node; a {} node holds at most {}: use --nodes {} or more",
          s.gpus, s.nodes, s.gpus_per_node, s.gpu_id, c.gpu->max_gpus_per_node, fewest));
    }
  }
  if (s.gpus_per_node > c.gpu->max_gpus_per_node) {
    return Status::InvalidArgument(fmt::format(
        "--gpus-per-node {}: a {} node holds at most {}", s.gpus_per_node, s.gpu_id,
        c.gpu->max_gpus_per_node));
  }
  const int needed_nodes = (s.gpus + s.gpus_per_node - 1) / s.gpus_per_node;
  if (s.nodes == 0) s.nodes = needed_nodes;
  if (s.nodes != needed_nodes || s.gpus % s.gpus_per_node != 0) {
    return Status::InvalidArgument(fmt::format(
        "--gpus {} does not fill --nodes {} x --gpus-per-node {} evenly; use whole nodes "
        "(e.g. --gpus {} or --gpus-per-node {})",
        s.gpus, s.nodes, s.gpus_per_node, s.nodes * s.gpus_per_node,
        s.gpus % s.nodes == 0 ? s.gpus / s.nodes : s.gpus_per_node));
  }
  const bool intra_given = !s.intra_id.empty();
  if (s.intra_id.empty()) s.intra_id = c.gpu->default_intra;
  DITUNE_ASSIGN_OR_RETURN(c.intra, catalog.Link(s.intra_id));
  if (c.intra->scope != LinkScope::kIntra) {
    return Status::InvalidArgument(
        fmt::format("--intra {}: that is an inter-node link; intra-node links: {}", s.intra_id,
                    LinkIds(catalog, LinkScope::kIntra, false)));
  }
  if (s.topology != nullptr) {
    // The user's box replaces the catalog's typical layout.
    DITUNE_ASSIGN_OR_RETURN(LinkSpec mine, LinkForTopology(*s.topology, *c.gpu, catalog, &c.topology_notes,
                                                             intra_given ? std::string_view(s.intra_id) : std::string_view()));
    c.topology_intra = std::make_shared<const LinkSpec>(std::move(mine));
    c.intra = c.topology_intra.get();
    s.intra_id = c.intra->id;
  }
  if (s.inter_id.empty()) {
    if (s.nodes > 1) {
      return Status::InvalidArgument(fmt::format("{} nodes need an inter-node link: --inter {}",
                                                 s.nodes, LinkIds(catalog, LinkScope::kInter, true)));
    }
    s.inter_id = "none";
  }
  DITUNE_ASSIGN_OR_RETURN(c.inter, catalog.Link(s.inter_id));
  if (c.inter->scope != LinkScope::kInter) {
    return Status::InvalidArgument(
        fmt::format("--inter {}: that is an intra-node link; inter-node links: {}", s.inter_id,
                    LinkIds(catalog, LinkScope::kInter, false)));
  }
  if (s.nodes > 1 && c.inter->topology == LinkTopology::kNone) {
    return Status::InvalidArgument(fmt::format("--inter none cannot join {} nodes; choose one of: {}",
                                               s.nodes, LinkIds(catalog, LinkScope::kInter, true)));
  }
  return c;
}

std::string IntraLabel(const Cluster& c) {
  if (c.topology_intra == nullptr) return c.spec.intra_id;
  const LinkSpec& l = *c.topology_intra;
  if (l.topology != LinkTopology::kPcieTwoSocket) return fmt::format("{} as laid out in {}", l.id, l.layout_source);
  return fmt::format("{} as laid out in {} ({} socket{}, {})", l.id, l.layout_source, l.sockets, l.sockets == 1 ? "" : "s",
                     l.gpus_per_switch > 0 ? fmt::format("{} GPUs a switch", l.gpus_per_switch)
                                           : std::string("GPUs on root ports"));
}

std::string TopologyKey(const Cluster& c) {
  if (c.topology_intra == nullptr) return "";
  const LinkSpec& l = *c.topology_intra;
  return fmt::format("topo:{}:{}:s{}:g{}:b{}", l.id, LinkTopologyName(l.topology), l.sockets, l.gpus_per_switch,
                     l.box_gpus);
}

}  // namespace ditune
