// The global mechanism constants: how they read, and what each changes in the models, on
// closed-form cases.
#include "costmodels/mechanisms.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "costmodels/comm_model.h"
#include "costmodels/compute_model.h"
#include "costmodels/memory_model.h"
#include "store/store.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

TEST(MechanismsTest, JsonRoundTripsAndRefusesWhatIsNotAConstant) {
  Mechanisms m;
  m.eager_op_us = 22.5;
  m.cross_socket_alltoall_efficiency = 0.3;
  auto back = MechanismsFromJson(MechanismsToJson(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
  auto unknown = MechanismsFromJson({{"eager_op_ms", 1}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown constant 'eager_op_ms'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("eager_op_us"), std::string::npos);  // lists the valid ones
  auto out_of_range = MechanismsFromJson({{"pcie_alltoall_efficiency", 5}});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("outside"), std::string::npos);
  EXPECT_FALSE(MechanismsFromJson({{"eager_op_us", "fast"}}).ok());
  EXPECT_FALSE(MechanismsFromJson(nlohmann::json::array()).ok());
  // A retired constant in a store written before it was retired is read and ignored.
  auto retired = MechanismsFromJson({{"pipefusion_warmup", 0.02}, {"staged_alltoall_gbps", 52}, {"eager_op_us", 22.5}});
  ASSERT_TRUE(retired.ok()) << retired.status().ToString();
  EXPECT_EQ(retired->eager_op_us, 22.5);
  EXPECT_EQ(MechanismsToJson(*retired).count("pipefusion_warmup"), 0u);
  EXPECT_EQ(MechanismsToJson(*retired).count("staged_alltoall_gbps"), 0u);
}

TEST(MechanismsTest, EagerAndCompiledHostTimePerOp) {
  ComputeModel cm = ComputeModel::Defaults(**Cat().Gpu("h100-sxm5-80gb"));
  Mechanisms m;
  m.eager_op_us = 30;
  m.compiled_op_us = 4;
  cm.SetMechanisms(m);
  OpCost op{"x", OpClass::kElementwise, Flops(0), Bytes(1e3), 9};
  EXPECT_NEAR(cm.HostTime(op).value(), 9 * 30e-6, 1e-12);  // eager: every framework op
  cm.SetRuntime(Runtime::kCompiled);
  EXPECT_NEAR(cm.HostTime(op).value(), 4e-6, 1e-12);  // compiled: one kernel
}

Cluster PcieBox(int gpus) {
  auto c = ResolveCluster(ClusterSpec{"l40-48gb", gpus}, Cat());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(MechanismsTest, InSocketAllToAllIsLimitedByEachRanksLinkOrItsSwitchsUplink) {
  const Cluster c = PcieBox(8);
  const LinkSpec& pcie = **Cat().Link("pcie4");
  ASSERT_EQ(pcie.gpus_per_switch, 2);
  CommModel comm(c);
  Mechanisms m;
  m.pcie_alltoall_efficiency = 0.5;
  comm.SetMechanisms(m);
  const double bw = pcie.busbw.value() * 0.5;
  // Two ranks behind one switch: each moves half of its 1 MB over its own link, at half the
  // catalog's bus bandwidth; nothing leaves the switch.
  const double two = pcie.latency.value() + 1e6 * 0.5 / bw;
  EXPECT_NEAR(comm.Time(Collective::kAllToAll, Bytes(1e6), {0, 1}).value(), two, 1e-12);
  // Two ranks behind different switches: each uplink carries the one share, as each link does.
  EXPECT_NEAR(comm.Time(Collective::kAllToAll, Bytes(1e6), {1, 2}).value(), two, 1e-12);
  // Three (two behind one switch, one behind the next): the pair's uplink carries 2 x 1 / 3 of
  // the size each way, as much as each rank's link (2/3): the links still set the time.
  EXPECT_NEAR(comm.SwitchCrossing({0, 1, 2}), 2.0, 0);
  EXPECT_NEAR(comm.Time(Collective::kAllToAll, Bytes(1e6), {0, 1, 2}).value(),
              pcie.latency.value() + 1e6 * 2.0 / 3 / bw, 1e-12);
  // Four (two pairs): each uplink carries 2 x 2 / 4 = the whole size, a third more than each
  // rank's link (3/4): the uplinks set the time.
  EXPECT_NEAR(comm.SwitchCrossing({0, 1, 2, 3}), 4.0, 0);
  EXPECT_NEAR(comm.Time(Collective::kAllToAll, Bytes(1e6), {0, 1, 2, 3}).value(),
              pcie.latency.value() + 1e6 * 1.0 / bw, 1e-12);
}

TEST(MechanismsTest, ASwitchNeverSpansTwoSockets) {
  // A box of four GPUs a socket behind switches of three: {0, 1, 2}, {3} on the first socket,
  // {4, 5, 6}, {7} on the second.
  Cluster c = PcieBox(8);
  LinkSpec wide = *c.intra;
  wide.gpus_per_switch = 3;
  c.intra = &wide;
  CommModel comm(c);
  EXPECT_EQ(comm.SocketOf(3), 0);
  EXPECT_EQ(comm.SocketOf(4), 1);
  // GPUs 3 and 4 are on different sockets, so behind different switches: each crosses once.
  EXPECT_EQ(comm.SwitchCrossing({3, 4}), 1.0);
  // GPUs 4 and 5 share the second socket's first switch: nothing leaves it.
  EXPECT_EQ(comm.SwitchCrossing({4, 5}), 0.0);
  // 0..3: the first switch holds three of the four, and its uplink carries 3 x 1 shares.
  EXPECT_EQ(comm.SwitchCrossing({0, 1, 2, 3}), 3.0);
}

TEST(MechanismsTest, ABoxWithoutSwitchesLimitsAnInSocketAllToAllByEachRanksLink) {
  auto spec = ClusterSpec{"l40-48gb", 8};
  spec.intra_id = "pcie3";
  auto c = ResolveCluster(spec, Cat());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const LinkSpec& pcie = **Cat().Link("pcie3");
  ASSERT_EQ(pcie.gpus_per_switch, 0);
  CommModel comm(*c);
  EXPECT_EQ(comm.SwitchCrossing({0, 1, 2, 3}), 0.0);
  EXPECT_NEAR(comm.Time(Collective::kAllToAll, Bytes(1e6), {0, 1, 2, 3}).value(),
              pcie.latency.value() + 1e6 * 0.75 / pcie.busbw.value(), 1e-12);
}

TEST(MechanismsTest, CrossSocketAllToAllLoadsTheInterSocketPathWithEveryCrossingPair) {
  const Cluster c = PcieBox(8);
  const LinkSpec& pcie = **Cat().Link("pcie4");
  CommModel comm(c);
  Mechanisms m;
  m.cross_socket_alltoall_efficiency = 0.5;
  m.cross_socket_alltoall_latency_us = 400;
  comm.SetMechanisms(m);
  // 4 + 4 ranks: each of the 4 on one socket sends 4/8 of its 1 MB across: 2 MB each way
  // over half the catalog's inter-socket bandwidth, after the staged exchange's 400 µs.
  const double link = 4.0 * 4.0 / 8 * 1e6 / (pcie.cross_socket.value() * 0.5);
  EXPECT_NEAR(comm.Time(Collective::kAllToAll, Bytes(1e6), {0, 1, 2, 3, 4, 5, 6, 7}).value(),
              pcie.latency.value() * 1.5 + 400e-6 + link, 1e-12);
  // Inside one socket the pairs go peer to peer: no staged exchange's fixed time (two pairs
  // of switches: each uplink carries the whole size).
  EXPECT_NEAR(comm.Time(Collective::kAllToAll, Bytes(1e6), {0, 1, 2, 3}).value(),
              pcie.latency.value() + 1e6 * 1.0 / pcie.busbw.value(), 1e-12);
}

TEST(MechanismsTest, EfficienciesScaleTheCatalogLinesOnly) {
  const Cluster c = PcieBox(2);
  const LinkSpec& pcie = **Cat().Link("pcie4");
  CommModel comm(c);
  Mechanisms m;
  m.pcie_p2p_efficiency = 0.5;
  m.pcie_allreduce_efficiency = 0.25;
  comm.SetMechanisms(m);
  EXPECT_NEAR(comm.Time(Collective::kSendRecv, Bytes(1e6), {0, 1}).value(),
              pcie.latency.value() + 1e6 / (pcie.p2p.value() * 0.5), 1e-12);
  EXPECT_NEAR(comm.Time(Collective::kAllReduce, Bytes(1e6), {0, 1}).value(),
              pcie.latency.value() + 1e6 / (pcie.busbw.value() * 0.25), 1e-12);
  // A fitted curve is what was achieved: no efficiency on top.
  comm.SetFit(Collective::kSendRecv, LinkTier::kIntra, PiecewiseLatencyModel({{0, 1e30, 1e-5, 1e9}}));
  EXPECT_NEAR(comm.Time(Collective::kSendRecv, Bytes(1e6), {0, 1}).value(), 1e-5 + 1e6 / 1e9, 1e-12);
}

TEST(MechanismsTest, DistriFusionHoldsOneFullKvPerLayerThroughTheDecode) {
  const ModelSpec& m = **Cat().Model("pixart-alpha");
  Workload w{m.id, 2048, 2048, 1, 20, 1, OutputType::kDecoded};
  const TokenGeometry t = *ComputeTokenGeometry(m, w);
  ParallelConfig c;
  c.distrifusion = 8;
  const MemoryBreakdown mb = RankMemory(m, t, w, c, **Cat().Gpu("l40-48gb"));
  const double seq = static_cast<double>(t.image_tokens() + t.text_tokens) * 2;  // CFG batch of two
  // The communication manager's buffer: every device's slice of every layer's K/V.
  const double full_kv = kElementBytes * seq * 2.0 * m.hidden;
  EXPECT_DOUBLE_EQ(mb.kv_buffers.value(), full_kv * m.num_blocks());
  // While a layer attends, its K/V is concatenated whole once more.
  ParallelConfig one;
  const MemoryBreakdown single = RankMemory(m, t, w, one, **Cat().Gpu("l40-48gb"));
  EXPECT_GE(mb.attention.value(), full_kv);
  EXPECT_LT(single.attention.value(), full_kv);
  // The buffer is never freed: the decode phase holds it beside the decoder's working set.
  const Bytes decode = mb.phases[static_cast<int>(MemoryPhase::kVaeDecode)];
  const Bytes decode_alone = single.phases[static_cast<int>(MemoryPhase::kVaeDecode)];
  EXPECT_NEAR((decode - decode_alone).value(), mb.kv_buffers.value(), 1e6);
}

TEST(MechanismsTest, ANewStoreIsSeededOnceAndAUsedOneNever) {
  const std::string dir = std::string(DITUNE_TEST_TMP_DIR) + "/seed";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Fit seed;
  seed.kind = "e2e";
  seed.key = "h100-sxm5-80gb/flux.1-dev";
  seed.params = {{"compute_scale", 1.5}, {"origin", "published: test"}};
  StoreOptions opt;
  opt.seed_fits = {seed};
  {
    auto s = Store::Open(dir + "/new.db", opt);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto fits = (*s)->ActiveFits();
    ASSERT_TRUE(fits.ok());
    ASSERT_EQ(fits->size(), 1u);
    EXPECT_EQ((*fits)[0].params["origin"], "published: test");
  }
  {
    auto s = Store::Open(dir + "/new.db", opt);  // opened again: not seeded twice
    ASSERT_TRUE(s.ok());
    auto all = (*s)->ActiveFits();
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->size(), 1u);
  }
  {
    auto s = Store::Open(dir + "/used.db");
    ASSERT_TRUE(s.ok());
    Measurement m;
    m.kind = MeasurementKind::kE2e;
    m.op = "total";
    m.backend = "xdit";
    m.device = "h100-sxm5-80gb";
    m.median = m.p10 = m.p90 = Seconds(1);
    ASSERT_TRUE((*s)->AddMeasurements({m}).ok());
  }
  auto s = Store::Open(dir + "/used.db", opt);  // a store in use keeps what it has
  ASSERT_TRUE(s.ok());
  auto fits = (*s)->ActiveFits();
  ASSERT_TRUE(fits.ok());
  EXPECT_TRUE(fits->empty());
}

}  // namespace
}  // namespace ditune
