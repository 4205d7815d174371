#include "core/rank_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/enum_names.h"

namespace ditune {
namespace {
constexpr int Idx(Axis a) { return static_cast<int>(a); }
}  // namespace

constexpr EnumName<Axis> kAxisNames[] = {
    {Axis::kTp, "tp"},
    {Axis::kUlysses, "ulysses"},
    {Axis::kRing, "ring"},
    {Axis::kDistriFusion, "distrifusion"},
    {Axis::kPipeFusion, "pipefusion"},
    {Axis::kCfg, "cfg"},
    {Axis::kDp, "dp"},
    {Axis::kSp, "sp"},
};

std::string_view AxisName(Axis a) { return NameIn(kAxisNames, a); }

StatusOr<RankLayout> RankLayout::Create(const ParallelConfig& c, int gpus_per_node) {
  if (gpus_per_node < 1) return Status::InvalidArgument("gpus per node must be >= 1");
  for (int d : {c.tp, c.ulysses, c.ring, c.distrifusion, c.pipefusion, c.cfg, c.dp}) {
    if (d < 1) return Status::InvalidArgument(fmt::format("config '{}': degrees must be >= 1", ToString(c)));
  }
  RankLayout l;
  l.gpus_per_node_ = gpus_per_node;
  l.degree_[Idx(Axis::kTp)] = c.tp;
  l.degree_[Idx(Axis::kUlysses)] = c.ulysses;
  l.degree_[Idx(Axis::kRing)] = c.ring;
  l.degree_[Idx(Axis::kDistriFusion)] = c.distrifusion;
  l.degree_[Idx(Axis::kPipeFusion)] = c.pipefusion;
  l.degree_[Idx(Axis::kCfg)] = c.cfg;
  l.degree_[Idx(Axis::kDp)] = c.dp;
  l.degree_[Idx(Axis::kSp)] = c.ulysses * c.ring;
  // Strides in rank order; sp expands to ulysses (fastest), ring, distrifusion.
  int stride = 1;
  auto place = [&](Axis a) {
    l.stride_[Idx(a)] = stride;
    stride *= l.degree_[Idx(a)];
  };
  for (OrderDim d : c.order) {
    switch (d) {
      case OrderDim::kTp: place(Axis::kTp); break;
      case OrderDim::kSp:
        l.stride_[Idx(Axis::kSp)] = stride;
        place(Axis::kUlysses);
        place(Axis::kRing);
        place(Axis::kDistriFusion);
        break;
      case OrderDim::kPp: place(Axis::kPipeFusion); break;
      case OrderDim::kCfg: place(Axis::kCfg); break;
      case OrderDim::kDp: place(Axis::kDp); break;
    }
  }
  l.world_size_ = stride;
  return l;
}

RankCoords RankLayout::CoordsOf(int rank) const {
  RankCoords c;
  for (int a = 0; a < kNumAxes; ++a) {
    if (a == Idx(Axis::kSp)) continue;
    c.index[a] = (rank / stride_[a]) % degree_[a];
  }
  c.index[Idx(Axis::kSp)] = c[Axis::kUlysses] + degree(Axis::kUlysses) * c[Axis::kRing];
  return c;
}

int RankLayout::RankOf(const RankCoords& coords) const {
  int r = 0;
  for (int a = 0; a < kNumAxes; ++a) {
    if (a != Idx(Axis::kSp)) r += coords.index[a] * stride_[a];
  }
  return r;
}

std::vector<int> RankLayout::GroupOf(int rank, Axis a) const {
  RankCoords c = CoordsOf(rank);
  std::vector<int> g;
  if (a == Axis::kSp) {
    for (int r = 0; r < degree(Axis::kRing); ++r) {
      for (int u = 0; u < degree(Axis::kUlysses); ++u) {
        RankCoords m = c;
        m.index[Idx(Axis::kUlysses)] = u;
        m.index[Idx(Axis::kRing)] = r;
        g.push_back(RankOf(m));
      }
    }
    return g;
  }
  for (int i = 0; i < degree(a); ++i) {
    RankCoords m = c;
    m.index[Idx(a)] = i;
    g.push_back(RankOf(m));
  }
  return g;
}

std::vector<std::vector<int>> RankLayout::Groups(Axis a) const {
  // A group's first rank is its member at index 0 along the axis (along kSp: Ulysses and
  // Ring index 0), so the groups come in the order of their first ranks.
  std::vector<std::vector<int>> groups;
  const int size = a == Axis::kSp ? degree(Axis::kUlysses) * degree(Axis::kRing) : degree(a);
  groups.reserve(static_cast<size_t>(world_size_ / std::max(1, size)));
  for (int r = 0; r < world_size_; ++r) {
    if (FirstOfGroup(r, a)) groups.push_back(GroupOf(r, a));
  }
  return groups;
}

bool RankLayout::GroupsWithinNodes(Axis a) const {
  for (const auto& g : Groups(a)) {
    for (int m : g) {
      if (NodeOf(m) != NodeOf(g.front())) return false;
    }
  }
  return true;
}

}  // namespace ditune
