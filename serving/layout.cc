#include "serving/layout.h"

#include <algorithm>
#include <charconv>
#include <numeric>

#include <fmt/format.h>

namespace ditune::serving {
namespace {

constexpr std::string_view kLayoutForm =
    "COUNTx(CONFIG)[+COUNTx(CONFIG)...], e.g. 4x(ulysses=2) or 2x(ulysses=2)+4x() (CONFIG in config syntax; "
    "empty for one GPU)";

}  // namespace

int Layout::gpus() const {
  int n = 0;
  for (const auto& g : groups) n += g.count * g.config.world_size();
  return n;
}

int Layout::replicas() const {
  int n = 0;
  for (const auto& g : groups) n += g.count;
  return n;
}

StatusOr<Layout> ParseLayout(std::string_view spec) {
  Layout layout;
  int64_t total_gpus = 0;
  size_t pos = 0;
  if (spec.empty()) return Status::InvalidArgument(fmt::format("--layout is empty; give {}", kLayoutForm));
  while (pos <= spec.size()) {
    // One part: up to the '+' after its closing parenthesis.
    const size_t open = spec.find('(', pos);
    const size_t close = open == spec.npos ? spec.npos : spec.find(')', open);
    if (open == spec.npos || close == spec.npos) {
      return Status::InvalidArgument(
          fmt::format("--layout '{}': '{}' has no (CONFIG); give {}", spec, spec.substr(pos), kLayoutForm));
    }
    std::string_view count_text = spec.substr(pos, open - pos);
    while (!count_text.empty() && count_text.front() == ' ') count_text.remove_prefix(1);
    while (!count_text.empty() && count_text.back() == ' ') count_text.remove_suffix(1);
    ReplicaGroup g;
    if (!count_text.empty()) {
      if (count_text.back() != 'x' && count_text.back() != 'X') {
        return Status::InvalidArgument(fmt::format("--layout '{}': '{}' before '(' is not COUNTx; give {}", spec,
                                                   count_text, kLayoutForm));
      }
      count_text.remove_suffix(1);
      int n = 0;
      auto [end, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), n);
      if (ec != std::errc() || end != count_text.data() + count_text.size() || n < 1 || n > kMaxLayoutGpus) {
        return Status::InvalidArgument(fmt::format("--layout '{}': the replica count '{}' is not an integer from 1 "
                                                   "to {}; give {}",
                                                   spec, count_text, kMaxLayoutGpus, kLayoutForm));
      }
      g.count = n;
    }
    const std::string_view config_text = spec.substr(open + 1, close - open - 1);
    auto config = ParseParallelConfig(config_text);
    if (!config.ok()) {
      return Status::InvalidArgument(
          fmt::format("--layout '{}': replica configuration '{}': {}; give {}", spec, config_text,
                      config.status().message(), kLayoutForm));
    }
    g.config = *config;
    // Counted in 64 bits: a count times a world size can pass what an int holds.
    total_gpus += static_cast<int64_t>(g.count) * g.config.world_size();
    if (total_gpus > kMaxLayoutGpus) {
      return Status::InvalidArgument(
          fmt::format("--layout '{}' takes more than {} GPUs; at most {} are planned", spec, kMaxLayoutGpus,
                      kMaxLayoutGpus));
    }
    layout.groups.push_back(g);
    pos = close + 1;
    while (pos < spec.size() && spec[pos] == ' ') ++pos;
    if (pos == spec.size()) break;
    if (spec[pos] != '+') {
      return Status::InvalidArgument(
          fmt::format("--layout '{}': '{}' after ')' should be '+' and the next part; give {}", spec,
                      spec.substr(pos), kLayoutForm));
    }
    ++pos;
  }
  return layout;
}

std::string ToString(const Layout& layout) {
  std::string out;
  for (const auto& g : layout.groups) {
    if (!out.empty()) out += "+";
    out += fmt::format("{}x({})", g.count, ditune::ToString(g.config));
  }
  return out;
}

StatusOr<std::vector<PlacedReplica>> PlaceLayout(const Layout& layout, const Cluster& cluster) {
  if (layout.gpus() > cluster.gpus()) {
    return Status::InvalidArgument(fmt::format("layout {} takes {} GPUs; the cluster has {}", ToString(layout),
                                               layout.gpus(), cluster.gpus()));
  }
  std::vector<PlacedReplica> replicas;
  for (int gi = 0; gi < static_cast<int>(layout.groups.size()); ++gi) {
    for (int k = 0; k < layout.groups[gi].count; ++k) {
      replicas.push_back({gi, layout.groups[gi].config, 0, layout.groups[gi].config.world_size()});
    }
  }
  const int per_node = cluster.gpus_per_node();
  std::vector<int> used(cluster.nodes(), 0);  // GPUs taken on each node, from its first
  std::vector<int> order(replicas.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return replicas[a].gpus > replicas[b].gpus; });
  for (int i : order) {
    PlacedReplica& r = replicas[i];
    bool placed = false;
    if (r.gpus <= per_node) {
      for (int n = 0; n < cluster.nodes() && !placed; ++n) {
        if (per_node - used[n] >= r.gpus) {
          r.first_gpu = n * per_node + used[n];
          used[n] += r.gpus;
          placed = true;
        }
      }
    } else if (r.gpus % per_node == 0) {
      const int need = r.gpus / per_node;
      for (int n = 0; n + need <= cluster.nodes() && !placed; ++n) {
        if (std::all_of(used.begin() + n, used.begin() + n + need, [](int u) { return u == 0; })) {
          std::fill(used.begin() + n, used.begin() + n + need, per_node);
          r.first_gpu = n * per_node;
          placed = true;
        }
      }
    } else {
      return Status::InvalidArgument(fmt::format(
          "layout {}: a replica of {} GPUs is larger than a node ({} GPUs) and not a whole number of nodes",
          ToString(layout), r.gpus, per_node));
    }
    if (!placed) {
      return Status::InvalidArgument(fmt::format(
          "layout {}: no room for a replica of {} GPUs ({}) on {} nodes of {} GPUs once the larger replicas are "
          "placed; each replica must sit inside one node or on whole nodes",
          ToString(layout), r.gpus, Label(r.config), cluster.nodes(), per_node));
    }
  }
  return replicas;
}

ClusterSpec ReplicaClusterSpec(const Cluster& cluster, int gpus) {
  ClusterSpec spec = cluster.spec;
  spec.gpus = gpus;
  spec.gpus_per_node = std::min(gpus, cluster.gpus_per_node());
  spec.nodes = (gpus + spec.gpus_per_node - 1) / spec.gpus_per_node;
  if (spec.nodes == 1) spec.inter_id = "none";
  return spec;
}

}  // namespace ditune::serving
