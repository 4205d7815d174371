#include "costmodels/calibration.h"
#include "store/store.h"
#include "tests/store/fit_store.h"
#include "calibration/op_fits.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

namespace ditune {
namespace {

using ditune::testing::FitStore;


const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

std::vector<Measurement> SyntheticAllToAll(double latency, double busbw, int ranks, const char* link) {
  std::vector<Measurement> out;
  int64_t id = 1;
  for (double size = 1024; size <= 64e6; size *= 4) {
    Measurement m;
    m.id = id++;
    m.kind = MeasurementKind::kCollective;
    m.op = "all_to_all";
    m.backend = "nccl";
    m.device = "h100-sxm5-80gb";
    m.ranks = ranks;
    m.link = link;
    m.bytes = Bytes(size);
    const double t = latency + size * BusFactor(Collective::kAllToAll, ranks) / busbw;
    m.median = m.p10 = m.p90 = Seconds(t);
    out.push_back(m);
  }
  return out;
}

// Fits are keyed by the group's shape (ranks, and nodes where known): a group of n ranks is
// priced by the curve of n ranks, or interpolated in log(ranks) between its neighbours.
TEST(CalibrationTest, CommFitCalibratesTheModel) {
  auto meas = SyntheticAllToAll(12e-6, 300e9, 8, "nvlink4");
  auto more = SyntheticAllToAll(12e-6, 200e9, 2, "nvlink4");
  for (auto& m : more) m.id += 100;
  meas.insert(meas.end(), more.begin(), more.end());
  auto fits = BuildFits(meas);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 2u);
  EXPECT_EQ((*fits)[0].kind, "comm");
  EXPECT_EQ((*fits)[0].key, "all_to_all/nvlink4@2");
  EXPECT_EQ((*fits)[1].key, "all_to_all/nvlink4@8");
  EXPECT_EQ((*fits)[1].points, static_cast<int>(more.size()));
  EXPECT_LT((*fits)[1].mape, 0.01);

  Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 8}, Cat());
  CommModel comm(cluster);
  ASSERT_TRUE(ApplyFits(*fits, "h100-sxm5-80gb", "cuda", nullptr, &comm).ok());
  const double t8 = comm.Time(Collective::kAllToAll, Bytes(16e6), {0, 1, 2, 3, 4, 5, 6, 7}).value();
  EXPECT_NEAR(t8 / (12e-6 + 16e6 * 7 / 8 / 300e9), 1.0, 0.01);
  const double t2 = comm.Time(Collective::kAllToAll, Bytes(16e6), {0, 1}).value();
  EXPECT_NEAR(t2 / (12e-6 + 16e6 * 1 / 2 / 200e9), 1.0, 0.01);
  // Four ranks: halfway in log(ranks) between the 2- and 8-rank curves at the same bus bytes.
  const double bus = 16e6 * 3 / 4;
  const double at2 = 12e-6 + bus / 200e9, at8 = 12e-6 + bus / 300e9;
  EXPECT_NEAR(comm.Time(Collective::kAllToAll, Bytes(16e6), {0, 1, 2, 3}).value() / (0.5 * (at2 + at8)), 1.0, 0.01);
}

TEST(CalibrationTest, CommFitsOfTheGroupsNodeCountComeFirst) {
  auto one_node = SyntheticAllToAll(12e-6, 300e9, 16, "ib-ndr");
  for (auto& m : one_node) m.params = {{"nodes", 1}};
  auto two_nodes = SyntheticAllToAll(30e-6, 40e9, 16, "ib-ndr");
  for (auto& m : two_nodes) {
    m.id += 100;
    m.params = {{"nodes", 2}};
  }
  one_node.insert(one_node.end(), two_nodes.begin(), two_nodes.end());
  auto fits = BuildFits(one_node);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 2u);
  EXPECT_EQ((*fits)[0].key, "all_to_all/ib-ndr@16x1");
  EXPECT_EQ((*fits)[1].key, "all_to_all/ib-ndr@16x2");
  ClusterSpec spec{"h100-sxm5-80gb", 16};
  spec.inter_id = "ib-ndr";
  Cluster cluster = *ResolveCluster(spec, Cat());
  CommModel comm(cluster);
  ASSERT_TRUE(ApplyFits(*fits, "h100-sxm5-80gb", "cuda", nullptr, &comm).ok());
  std::vector<int> all(16);
  for (int i = 0; i < 16; ++i) all[i] = i;
  const double t = comm.Time(Collective::kAllToAll, Bytes(16e6), all).value();
  EXPECT_NEAR(t / (30e-6 + 16e6 * 15 / 16 / 40e9), 1.0, 0.01);  // the 2-node curve, not the 1-node one
}

TEST(CalibrationTest, FitsRebuildFromTheirMeasurements) {
  auto meas = SyntheticAllToAll(8e-6, 20e9, 2, "pcie4");
  std::vector<Measurement> ops;
  for (double f = 1e8; f <= 1e13; f *= 3) {
    Measurement m;
    m.id = static_cast<int64_t>(1000 + ops.size());
    m.kind = MeasurementKind::kOp;
    m.op = "gemm";
    m.backend = "cuda";
    m.device = "l40-48gb";
    m.flops = Flops(f);
    m.median = m.p10 = m.p90 = Seconds(4e-6 + f / 150e12);
    ops.push_back(m);
  }
  meas.insert(meas.end(), ops.begin(), ops.end());
  auto fits = *BuildFits(meas);
  ASSERT_EQ(fits.size(), 2u);
  for (const auto& f : fits) {
    std::vector<Measurement> used;
    for (const auto& m : meas) {
      if (std::find(f.measurement_ids.begin(), f.measurement_ids.end(), m.id) != f.measurement_ids.end()) {
        used.push_back(m);
      }
    }
    auto again = *BuildFits(used);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].params, f.params);
    EXPECT_EQ(again[0].key, f.key);
  }
  ComputeModel compute = ComputeModel::Defaults(**Cat().Gpu("l40-48gb"));
  ASSERT_TRUE(ApplyFits(fits, "l40-48gb", "cuda", &compute, nullptr).ok());
  EXPECT_TRUE(compute.has_fit(OpClass::kGemm));
  OpCost g{"g", OpClass::kGemm, Flops(1e12), Bytes(1e6), 1};
  EXPECT_NEAR(compute.DeviceTime(g).value() / (4e-6 + 1e12 / 150e12), 1.0, 0.01);
  // Another device's fits do not apply.
  ComputeModel other = ComputeModel::Defaults(**Cat().Gpu("h100-sxm5-80gb"));
  ASSERT_TRUE(ApplyFits(fits, "h100-sxm5-80gb", "cuda", &other, nullptr).ok());
  EXPECT_FALSE(other.has_fit(OpClass::kGemm));
}

TEST(CalibrationTest, PointsBeyondPhysicalBoundsAreLeftOutAndReported) {
  // Rows a store may hold from before ingest checked the bounds: each alone would make its
  // group's least-squares sums overflow. The good points still fit, as without them.
  auto meas = SyntheticAllToAll(8e-6, 20e9, 2, "pcie4");
  for (double f = 1e8; f <= 1e13; f *= 3) {
    Measurement m;
    m.id = static_cast<int64_t>(1000 + meas.size());
    m.kind = MeasurementKind::kOp;
    m.op = "gemm";
    m.backend = "cuda";
    m.device = "l40-48gb";
    m.flops = Flops(f);
    m.median = m.p10 = m.p90 = Seconds(4e-6 + f / 150e12);
    meas.push_back(m);
  }
  auto clean = BuildFits(meas);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  ASSERT_EQ(clean->size(), 2u);

  std::vector<Measurement> poisoned = meas;
  Measurement gemm = meas.back();
  gemm.id = 9001;
  gemm.flops = Flops(1e12);
  gemm.median = gemm.p10 = gemm.p90 = Seconds(1e-200);  // 1e212 FLOP/s
  Measurement a2a = meas.front();
  a2a.id = 9002;
  a2a.bytes = Bytes(1e300);
  Measurement fast = meas.back();
  fast.id = 9003;
  fast.flops = Flops(1e20);
  fast.median = fast.p10 = fast.p90 = Seconds(1.0);  // 1e20 FLOP/s: within every size and time bound
  Measurement launch;
  launch.id = 9004;
  launch.op = "launch";
  launch.backend = "cuda";
  launch.device = "l40-48gb";
  launch.params = {{"launches", 1e30}};
  launch.median = launch.p10 = launch.p90 = Seconds(1e-3);
  poisoned.insert(poisoned.begin() + 3, gemm);
  poisoned.insert(poisoned.begin() + 5, a2a);
  poisoned.push_back(fast);
  poisoned.push_back(launch);

  std::vector<std::string> skipped;
  auto fits = BuildFits(poisoned, &skipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 2u);
  for (size_t i = 0; i < fits->size(); ++i) {
    EXPECT_EQ((*fits)[i].key, (*clean)[i].key);
    EXPECT_EQ((*fits)[i].params, (*clean)[i].params);
    EXPECT_EQ((*fits)[i].measurement_ids, (*clean)[i].measurement_ids);
  }
  ASSERT_EQ(skipped.size(), 4u);
  auto reported = [&](const std::string& key, int64_t id, const std::string& why) {
    return std::any_of(skipped.begin(), skipped.end(), [&](const std::string& s) {
      return s.find(key) != std::string::npos &&
             s.find(fmt::format("measurement {} left out", id)) != std::string::npos &&
             s.find(why) != std::string::npos;
    });
  };
  EXPECT_TRUE(reported("compute l40-48gb/cuda/gemm", 9001, "median_s")) << fmt::format("{}", fmt::join(skipped, "\n"));
  EXPECT_TRUE(reported("comm all_to_all/pcie4", 9002, "bytes")) << fmt::format("{}", fmt::join(skipped, "\n"));
  EXPECT_TRUE(reported("compute l40-48gb/cuda/gemm", 9003, "flops / median_s"))
      << fmt::format("{}", fmt::join(skipped, "\n"));
  EXPECT_TRUE(reported("compute l40-48gb/cuda/launch", 9004, "launches / median_s"))
      << fmt::format("{}", fmt::join(skipped, "\n"));
}

TEST(CalibrationTest, LaunchTimingsGiveTheEnginesLaunchOverhead) {
  // Host time of issuing n kernels: 2 us of clock reading and 4 us per launch.
  std::vector<Measurement> meas;
  for (int n : {32, 128, 512}) {
    Measurement m;
    m.id = n;
    m.kind = MeasurementKind::kOp;
    m.op = "launch";
    m.backend = "cuda";
    m.device = "h100-sxm5-80gb";
    m.params = {{"launches", n}};
    m.median = m.p10 = m.p90 = Seconds(2e-6 + n * 4e-6);
    EXPECT_TRUE(CheckFittable(m).ok());
    meas.push_back(m);
  }
  auto fits = *BuildFits(meas);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].key, "h100-sxm5-80gb/cuda/launch");
  EXPECT_EQ(fits[0].params["x"], "launches");
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", 1}, Cat());
  OpCost norm{"n", OpClass::kElementwise, Flops(1e3), Bytes(1e4), 4};
  // The eager framework keeps its own overhead; the engine takes the measured one.
  auto eager = std::move(MakeCostModels(cluster, fits, "cuda", Runtime::kEager)).value();
  EXPECT_NEAR(eager.compute.HostTime(norm).value(), 4 * 15e-6, 1e-12);
  auto engine = std::move(MakeCostModels(cluster, fits, "cuda", Runtime::kEngine)).value();
  EXPECT_NEAR(engine.compute.HostTime(norm).value(), 4e-6, 1e-8);
  // Without the launch count the timing means nothing: refused, naming the field.
  Measurement bad = meas[0];
  bad.params = nlohmann::json::object();
  Status st = CheckFittable(bad);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("params.launches"), std::string::npos) << st.message();
  bad.op = "gemmm";
  EXPECT_NE(CheckFittable(bad).message().find("elementwise, launch"), std::string::npos);
}

// The engine's kernels measured one by one get curves of their own: an elementwise kernel's
// also joins the pooled elementwise curve, a GEMM with the GELU epilogue stays apart from
// the plain GEMMs and prices the MLP's up-projection only where the engine fuses it.
TEST(CalibrationTest, EngineKernelsGetTheirOwnCurves) {
  std::vector<Measurement> meas;
  auto add = [&](const std::string& op, const std::string& kernel, double x, double seconds) {
    Measurement m;
    m.id = static_cast<int64_t>(meas.size()) + 1;
    m.kind = MeasurementKind::kOp;
    m.op = op;
    m.backend = "ref";
    m.device = "cpu";
    m.flops = Flops(op == "gemm" ? x : 0);
    m.bytes = Bytes(op == "gemm" ? 1 : x);
    if (!kernel.empty()) m.params = {{"kernel", kernel}};
    m.median = m.p10 = m.p90 = Seconds(seconds);
    meas.push_back(m);
  };
  for (double x : {1e6, 1e7, 1e8}) {
    add("elementwise", "norm_modulate", x, x / 5e9);  // 5 GB/s
    add("elementwise", "gelu", x, x / 0.2e9);         // 0.2 GB/s
    add("gemm", "", x, x / 40e9);                     // 40 GFLOP/s
    add("gemm", "gemm_gelu", x, x / 10e9);            // 10 GFLOP/s with the epilogue
  }
  EXPECT_EQ(ComputeFitKeys(meas[1]), (std::vector<std::string>{"cpu/ref/elementwise", "cpu/ref/gelu"}));
  EXPECT_EQ(ComputeFitKeys(meas[3]), std::vector<std::string>{"cpu/ref/gemm_gelu"});
  Measurement unnamed = meas[0];
  unnamed.params = {{"kernel", "fancy_norm"}};
  EXPECT_EQ(ComputeFitKeys(unnamed), std::vector<std::string>{"cpu/ref/elementwise"});
  auto fits = BuildFits(meas);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  std::set<std::string> keys;
  for (const auto& f : *fits) keys.insert(f.key);
  EXPECT_EQ(keys, (std::set<std::string>{"cpu/ref/elementwise", "cpu/ref/gelu", "cpu/ref/norm_modulate",
                                         "cpu/ref/gemm", "cpu/ref/gemm_gelu"}));
  const Cluster cluster = *ResolveCluster({"cpu", 1}, Cat());
  auto engine = std::move(MakeCostModels(cluster, *fits, "ref", Runtime::kEngine)).value();
  auto eager = std::move(MakeCostModels(cluster, *fits, "ref", Runtime::kEager)).value();
  OpCost act{"act", OpClass::kElementwise, Flops(0), Bytes(1e7), 1};
  act.kernel = kernel_names::kGelu;
  EXPECT_NEAR(engine.compute.DeviceTime(act).value(), 1e7 / 0.2e9, 1e-3 * 1e7 / 0.2e9);
  OpCost norm = act;
  norm.kernel = kernel_names::kNormModulate;
  EXPECT_NEAR(engine.compute.DeviceTime(norm).value(), 1e7 / 5e9, 1e-3 * 1e7 / 5e9);
  OpCost up{"mlp_up", OpClass::kGemm, Flops(1e7), Bytes(1), 1};
  up.kernel = kernel_names::kGemmGelu;
  EXPECT_NEAR(engine.compute.DeviceTime(up).value(), 1e7 / 10e9, 1e-3 * 1e7 / 10e9);
  EXPECT_NEAR(eager.compute.DeviceTime(up).value(), 1e7 / 40e9, 1e-3 * 1e7 / 40e9);
  // A kernel without a curve of its own falls back to the pooled one.
  OpCost copy = act;
  copy.kernel = kernel_names::kCopy;
  EXPECT_TRUE(engine.compute.has_fit(OpClass::kElementwise));
  EXPECT_GT(engine.compute.DeviceTime(copy).value(), engine.compute.DeviceTime(norm).value());
  EXPECT_LT(engine.compute.DeviceTime(copy).value(), engine.compute.DeviceTime(act).value());
}

TEST(CalibrationTest, RecalibrateReplacesFitsInTheStore) {
  const std::string dir = std::string(DITUNE_TEST_TMP_DIR) + "/calibration";
  std::filesystem::remove_all(dir);
  auto store = Store::Open(dir + "/ditune.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto meas = SyntheticAllToAll(10e-6, 200e9, 8, "nvlink3");
  for (auto& m : meas) m.id = 0;
  ASSERT_TRUE((*store)->AddMeasurements(meas).ok());
  const int64_t v0 = *(*store)->CalibrationVersion();
  auto fits = FitStore(store->get());
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 1u);
  EXPECT_GT(*(*store)->CalibrationVersion(), v0);
  auto active = *(*store)->ActiveFits("comm");
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].points, static_cast<int>(meas.size()));
  ASSERT_TRUE(FitStore(store->get()).ok());
  EXPECT_EQ((*(*store)->ActiveFits("comm")).size(), 1u);  // replaced, not added
}

}  // namespace
}  // namespace ditune
