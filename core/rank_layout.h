// Maps ranks to coordinates in every parallel dimension and back, and lists the groups
// of ranks that communicate in each dimension. Ranks are numbered by the configuration's
// rank order, fastest-varying first (xDiT's tp-sp-pp-cfg-dp by default); inside sp,
// Ulysses is fastest (its groups are contiguous ranks) and Ring strided over it.
#ifndef DITUNE_CORE_RANK_LAYOUT_H_
#define DITUNE_CORE_RANK_LAYOUT_H_

#include <array>
#include <string_view>
#include <vector>

#include "core/parallel_config.h"
#include "core/status.h"

namespace ditune {

enum class Axis { kTp, kUlysses, kRing, kDistriFusion, kPipeFusion, kCfg, kDp, kSp };
inline constexpr int kNumAxes = 8;  // kSp is Ulysses x Ring together
std::string_view AxisName(Axis a);

struct RankCoords {
  std::array<int, kNumAxes> index{};  // by static_cast<int>(Axis); kSp = u + ulysses * r
  int operator[](Axis a) const { return index[static_cast<int>(a)]; }
};

class RankLayout {
 public:
  // `gpus_per_node` assigns ranks to nodes (rank / gpus_per_node); must be >= 1.
  static StatusOr<RankLayout> Create(const ParallelConfig& config, int gpus_per_node);

  int world_size() const { return world_size_; }
  int degree(Axis a) const { return degree_[static_cast<int>(a)]; }
  RankCoords CoordsOf(int rank) const;
  // CoordsOf(rank)[a] for any axis but kSp, without the others.
  int IndexOf(int rank, Axis a) const {
    return (rank / stride_[static_cast<int>(a)]) % degree_[static_cast<int>(a)];
  }
  int RankOf(const RankCoords& coords) const;  // uses every axis but kSp
  int NodeOf(int rank) const { return rank / gpus_per_node_; }

  // All groups of ranks along axis `a`, each in coordinate order; groups ordered by
  // their first rank. A degree-1 axis yields world_size() singleton groups.
  std::vector<std::vector<int>> Groups(Axis a) const;
  // The group along `a` that holds `rank`.
  std::vector<int> GroupOf(int rank, Axis a) const;
  // True iff `rank` is the first of its group along `a` (Groups lists the group there).
  bool FirstOfGroup(int rank, Axis a) const {
    return a == Axis::kSp ? IndexOf(rank, Axis::kUlysses) == 0 && IndexOf(rank, Axis::kRing) == 0
                          : IndexOf(rank, a) == 0;
  }
  // True iff every group along `a` lies within one node.
  bool GroupsWithinNodes(Axis a) const;

 private:
  std::array<int, kNumAxes> degree_{};
  std::array<int, kNumAxes> stride_{};
  int world_size_ = 1;
  int gpus_per_node_ = 1;
};

}  // namespace ditune

#endif  // DITUNE_CORE_RANK_LAYOUT_H_
