#include "costmodels/comm_model.h"

#include <gtest/gtest.h>

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

Cluster Make(const char* gpu, int gpus, const char* inter = "") {
  ClusterSpec s{gpu, gpus};
  s.inter_id = inter;
  auto c = ResolveCluster(s, Cat());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(CommModelTest, BusFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllToAll, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusFactor(Collective::kSendRecv, 2), 1.0);
}

TEST(CommModelTest, GoldenDefaultTimes) {
  Cluster c = Make("h100-sxm5-80gb", 8);
  CommModel m(c);
  const LinkSpec& nv = **Cat().Link("nvlink4");
  // all-to-all of 64 MB over 8 ranks: latency + 64e6 x 7/8 / busbw.
  const double expect = nv.latency.value() + 64e6 * 7.0 / 8 / nv.busbw.value();
  EXPECT_DOUBLE_EQ(m.Time(Collective::kAllToAll, Bytes(64e6), {0, 1, 2, 3, 4, 5, 6, 7}).value(), expect);
  EXPECT_DOUBLE_EQ(m.Time(Collective::kAllToAll, Bytes(64e6), {3}).value(), 0.0);
  // send/recv uses the point-to-point figure.
  EXPECT_DOUBLE_EQ(m.Time(Collective::kSendRecv, Bytes(1e6), {0, 1}).value(),
                   nv.latency.value() + 1e6 / nv.p2p.value());
}

TEST(CommModelTest, PcieBoxTiersAndSharing) {
  Cluster c = Make("l40-48gb", 8);
  CommModel m(c);
  EXPECT_EQ(m.SocketOf(3), 0);
  EXPECT_EQ(m.SocketOf(4), 1);
  EXPECT_EQ(m.TierOf({0, 1, 2, 3}), LinkTier::kIntra);
  EXPECT_EQ(m.TierOf({2, 3, 4, 5}), LinkTier::kCrossSocket);
  EXPECT_EQ(m.FitKey(Collective::kAllToAll, LinkTier::kCrossSocket), "all_to_all/pcie4/cross-socket");
  const double within = m.Time(Collective::kAllToAll, Bytes(32e6), {0, 1, 2, 3}).value();
  const double across = m.Time(Collective::kAllToAll, Bytes(32e6), {0, 2, 4, 6}).value();
  EXPECT_GT(across, within);
  // Two groups that both cross the sockets share the inter-socket link.
  std::vector<std::vector<int>> strided = {{0, 2, 4, 6}, {1, 3, 5, 7}};
  EXPECT_DOUBLE_EQ(m.Sharing(strided[0], strided), 2.0);
  std::vector<std::vector<int>> contiguous = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_DOUBLE_EQ(m.Sharing(contiguous[0], contiguous), 1.0);
  EXPECT_GT(m.Time(Collective::kAllToAll, Bytes(32e6), strided[0], 2.0).value(), across);
}

TEST(CommModelTest, GroupsSpanningNodesPayTheNetwork) {
  Cluster c = Make("l40-48gb", 16, "eth-100g");
  CommModel m(c);
  EXPECT_EQ(m.TierOf({0, 8}), LinkTier::kInterNode);
  EXPECT_EQ(m.FitKey(Collective::kAllGather, LinkTier::kInterNode), "all_gather/eth-100g");
  // One NIC per node: 8 ranks of a node crossing at once get 1/8 of it each.
  std::vector<std::vector<int>> pairs;
  for (int r = 0; r < 8; ++r) pairs.push_back({r, r + 8});
  EXPECT_DOUBLE_EQ(m.Sharing(pairs[0], pairs), 8.0);
  EXPECT_GT(m.Time(Collective::kSendRecv, Bytes(8e6), {0, 8}).value(),
            m.Time(Collective::kSendRecv, Bytes(8e6), {0, 1}).value());
}

// A ring collective over two nodes' sixteen ranks crosses each node boundary on the ring's
// hops, which carry what every other hop carries: its bus bandwidth is the NIC's, not an
// eighth of it per rank. An all-to-all sends every rank's remote shares across: its ranks on
// a node share the NIC.
TEST(CommModelTest, RingCollectivesAcrossNodesRunAtTheNicsBandwidth) {
  Cluster c = Make("l40-48gb", 16, "eth-100g");
  CommModel m(c);
  const LinkSpec& eth = **Cat().Link("eth-100g");
  std::vector<int> all;
  for (int r = 0; r < 16; ++r) all.push_back(r);
  const double size = 64e6;
  const double latency = c.intra->latency.value() + eth.latency.value();
  EXPECT_DOUBLE_EQ(m.Time(Collective::kAllReduce, Bytes(size), all).value(),
                   latency + size * BusFactor(Collective::kAllReduce, 16) / eth.busbw.value());
  EXPECT_DOUBLE_EQ(m.Time(Collective::kAllGather, Bytes(size), all).value(),
                   latency + size * BusFactor(Collective::kAllGather, 16) / eth.busbw.value());
  EXPECT_DOUBLE_EQ(m.Time(Collective::kAllToAll, Bytes(size), all).value(),
                   latency + size * BusFactor(Collective::kAllToAll, 16) / (eth.busbw.value() / 8));
}

// The node-local form asks one node's ranks for their groups; it must agree with the form
// that lists every group, on PCIe boxes (socket crossing) and across nodes, for every axis.
TEST(CommModelTest, NodeLocalSharingAgreesWithTheListedGroups) {
  for (const char* gpu : {"l40-48gb", "h100-sxm5-80gb"}) {
    Cluster c = Make(gpu, 32, "ib-ndr");
    CommModel m(c);
    for (const char* text : {"ulysses=4,ring=2,dp=4", "ring=4,cfg=2,dp=4", "pipefusion=4,ulysses=2,dp=4",
                             "ulysses=2,ring=16", "dp=2,ulysses=16"}) {
      auto config = ParseParallelConfig(text);
      ASSERT_TRUE(config.ok()) << text;
      auto layout = RankLayout::Create(*config, c.gpus_per_node());
      ASSERT_TRUE(layout.ok());
      for (Axis a : {Axis::kUlysses, Axis::kRing, Axis::kPipeFusion, Axis::kCfg, Axis::kDp, Axis::kSp}) {
        const auto groups = layout->Groups(a);
        for (const auto& g : groups) {
          EXPECT_DOUBLE_EQ(m.Sharing(g, *layout, a), m.Sharing(g, groups)) << gpu << " " << text << " " << AxisName(a);
        }
      }
    }
  }
}

TEST(CommModelTest, MonotoneInBandwidthAndSize) {
  Cluster c = Make("a100-sxm4-80gb", 8);
  CommModel m(c);
  double prev = 0;
  for (double b = 1e3; b <= 1e9; b *= 4) {
    double t = m.Time(Collective::kAllReduce, Bytes(b), {0, 1, 2, 3}).value();
    EXPECT_GT(t, prev);
    prev = t;
  }
  CommModel fast(c);
  fast.ScaleBandwidth(2.0);
  EXPECT_LT(fast.Time(Collective::kAllToAll, Bytes(1e8), {0, 1}).value(),
            m.Time(Collective::kAllToAll, Bytes(1e8), {0, 1}).value());
}

TEST(CommModelTest, FitReplacesTheCatalogLine) {
  Cluster c = Make("h100-sxm5-80gb", 8);
  CommModel m(c);
  m.SetFit(Collective::kAllToAll, LinkTier::kIntra, PiecewiseLatencyModel({{1, 1e12, 20e-6, 100e9}}));
  EXPECT_DOUBLE_EQ(m.Time(Collective::kAllToAll, Bytes(8e6), {0, 1}).value(), 20e-6 + 8e6 * 0.5 / 100e9);
  EXPECT_FALSE(ParseCollective("alltoall").ok());
  EXPECT_EQ(*ParseCollective("all_gather"), Collective::kAllGather);
}

}  // namespace
}  // namespace ditune
