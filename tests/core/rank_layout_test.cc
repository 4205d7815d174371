#include "core/rank_layout.h"

#include <gtest/gtest.h>

#include "core/rank_share.h"
#include "tests/core/test_catalog.h"

namespace ditune {
namespace {

using Groups = std::vector<std::vector<int>>;

// xDiT's documented 16-GPU example: dp = cfg = sp = pp = 2, order tp-sp-pp-cfg-dp.
TEST(RankLayoutTest, XditSixteenGpuExample) {
  auto c = *ParseParallelConfig("ulysses=2,pipefusion=2,cfg=2,dp=2");
  auto l = *RankLayout::Create(c, 8);
  ASSERT_EQ(l.world_size(), 16);
  EXPECT_EQ(l.Groups(Axis::kSp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(l.Groups(Axis::kPipeFusion), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(l.Groups(Axis::kCfg), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(l.Groups(Axis::kDp), (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_TRUE(l.GroupsWithinNodes(Axis::kSp));
  EXPECT_FALSE(l.GroupsWithinNodes(Axis::kDp));
  EXPECT_EQ(l.NodeOf(7), 0);
  EXPECT_EQ(l.NodeOf(8), 1);
}

TEST(RankLayoutTest, UlyssesContiguousRingStrided) {
  auto l = *RankLayout::Create(*ParseParallelConfig("ulysses=2,ring=4"), 8);
  EXPECT_EQ(l.Groups(Axis::kUlysses), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.Groups(Axis::kRing), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(l.Groups(Axis::kSp), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(RankLayoutTest, CoordinatesRoundTripForAnyOrder) {
  for (const char* text : {"ulysses=2,ring=3,pipefusion=2,cfg=2,tp=2",
                           "ulysses=2,ring=3,pipefusion=2,cfg=2,tp=2,order=dp-cfg-pp-sp-tp",
                           "ulysses=2,pipefusion=3,dp=2,order=pp-sp-tp-dp-cfg"}) {
    auto l = *RankLayout::Create(*ParseParallelConfig(text), 8);
    std::vector<bool> seen(l.world_size());
    for (int r = 0; r < l.world_size(); ++r) {
      EXPECT_EQ(l.RankOf(l.CoordsOf(r)), r) << text;
      seen[l.RankOf(l.CoordsOf(r))] = true;
    }
    for (bool s : seen) EXPECT_TRUE(s);
    // Every axis partitions the ranks.
    for (Axis a : {Axis::kTp, Axis::kUlysses, Axis::kRing, Axis::kSp, Axis::kPipeFusion, Axis::kCfg, Axis::kDp}) {
      int total = 0;
      for (const auto& g : l.Groups(a)) {
        EXPECT_EQ(static_cast<int>(g.size()), l.degree(a));
        total += static_cast<int>(g.size());
      }
      EXPECT_EQ(total, l.world_size());
    }
  }
}

TEST(RankLayoutTest, OrderPutsTheFastestDimensionOnAdjacentRanks) {
  auto l = *RankLayout::Create(*ParseParallelConfig("ulysses=2,pipefusion=2,order=pp-sp-tp-cfg-dp"), 8);
  EXPECT_EQ(l.Groups(Axis::kPipeFusion), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(l.Groups(Axis::kUlysses), (Groups{{0, 2}, {1, 3}}));
}

TEST(RankShareTest, SharesOfAHybrid) {
  const ModelSpec& m = testing::TestModel("pixart-alpha");
  Workload w{"pixart-alpha", 2048, 2048, 1, 20, 2, OutputType::kDecoded};
  TokenGeometry t = *ComputeTokenGeometry(m, w);
  ParallelConfig c = *ParseParallelConfig("ulysses=2,pipefusion=2,patches=4,cfg=2,dp=2");
  auto l = *RankLayout::Create(c, 8);
  auto shares = ComputeRankShares(m, t, w, c, l);
  ASSERT_EQ(shares.size(), 16u);
  EXPECT_EQ(shares[0].tokens, 8192);
  EXPECT_EQ(shares[0].tokens_per_patch, 2048);
  EXPECT_EQ(shares[0].heads, 8);
  EXPECT_EQ(shares[0].first_block, 0);
  EXPECT_EQ(shares[0].blocks, 14);
  EXPECT_EQ(shares[2].first_block, 14);  // rank 2 is stage 1
  EXPECT_EQ(shares[4].cfg_branch, 1);
  EXPECT_EQ(shares[0].prompts, 1);
}

TEST(RankShareTest, StageBlocksCoverEveryBlockOnce) {
  for (int n : {1, 7, 28, 57}) {
    for (int s = 1; s <= std::min(n, 8); ++s) {
      int next = 0;
      for (int i = 0; i < s; ++i) {
        int first = 0, count = 0;
        StageBlocks(n, s, i, &first, &count);
        EXPECT_EQ(first, next);
        EXPECT_GE(count, n / s);
        next = first + count;
      }
      EXPECT_EQ(next, n);
    }
  }
}

}  // namespace
}  // namespace ditune
