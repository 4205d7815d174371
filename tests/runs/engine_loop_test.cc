// The closed loop on ditune's engine as library calls: predict, record, autotune.
#include <gtest/gtest.h>

#include <filesystem>

#include "runs/engine_loop.h"
#include "core/catalog.h"
#include "calibration/predict.h"

namespace ditune::calibration {
namespace {

namespace fs = std::filesystem;

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

std::string FreshPath(const char* name) {
  const fs::path dir = fs::temp_directory_path() / "ditune-engine-loop-test";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p.string();
}

const Workload kTiny{"tiny-pixart", 128, 128, 1, 2, 1, OutputType::kLatent};

TEST(EngineLoopTest, APredictionIsTheSimulatedPlanAndRefusesUncalibratedRefKernels) {
  const ModelSpec& m = **Cat().Model("tiny-pixart");
  const Cluster two = *ResolveCluster({"cpu", 2}, Cat());
  const ParallelConfig config = *ParseParallelConfig("ulysses=2");
  auto p = PredictEngineRun(m, kTiny, config, two, {}, "cpu", 1, true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->priced_as, "cpu");
  EXPECT_EQ(p->dit_s, SimulateEngineRun(m, kTiny, config, two, {}, "cpu")->dit.value());
  EXPECT_GT(p->busy_s, 0.0);
  EXPECT_FALSE(p->kernels.empty());
  EXPECT_TRUE(PredictEngineRun(m, kTiny, config, two, {}, "cpu", 1, false)->kernels.empty());
  // The ref kernels are priced by their own sweep only.
  auto ref = PredictEngineRun(m, kTiny, config, two, {}, "ref", 0, false);
  ASSERT_FALSE(ref.ok());
  EXPECT_NE(ref.status().message().find("calibrate compute --backend ref"), std::string::npos);
  // Standing in for a GPU, the host's kernels are priced as the cuda engine there.
  const Cluster gpus = *ResolveCluster({"h100-sxm5-80gb", 2}, Cat());
  EXPECT_EQ(PredictEngineRun(m, kTiny, config, gpus, {}, "ref", 0, false)->priced_as, "cuda");
}

TEST(EngineLoopTest, AWholeRunLandsWithItsMeasurementAndKernelsTogether) {
  auto store = std::move(Store::Open(FreshPath("record.db"))).value();
  const ModelSpec& m = **Cat().Model("tiny-pixart");
  exec::EngineRunOptions ro;
  ro.kernels = "cpu";
  ro.iters = 1;
  ro.profile = true;
  auto r = exec::MeasureEngineRun(m, kTiny, ParallelConfig{}, ro);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->profile_events.empty());
  auto rec = RecordEngineRun(store.get(), m, kTiny, ParallelConfig{}, "cpu", "cpu", "", 0.5, *r, true, 0);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_FALSE(rec->run_id.empty());
  EXPECT_GT(rec->kernel_measurements, 0u);
  const auto runs = *store->Runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].run_id, rec->run_id);
  EXPECT_EQ(runs[0].measured_s, r->median_s);
  const auto all = *store->Measurements();
  EXPECT_EQ(all.size(), 1 + rec->kernel_measurements);
  for (const auto& meas : all) EXPECT_EQ(meas.run_id, rec->run_id);
  // An emulated rank is no whole run: only its kernels land.
  auto part = RecordEngineRun(store.get(), m, kTiny, ParallelConfig{}, "cpu", "cpu", "", 0.5, *r, false, 0);
  ASSERT_TRUE(part.ok());
  EXPECT_TRUE(part->run_id.empty());
  EXPECT_EQ(store->Runs()->size(), 1u);
  EXPECT_EQ(store->Measurements()->size(), all.size() + part->kernel_measurements);
}

// One rank: the only configuration is run, recorded and refitted; with one run the refitted
// engine scale makes the prediction the measurement.
TEST(EngineLoopTest, AutotuneRunsRecordsRefitsAndPricesAgain) {
  auto store = std::move(Store::Open(FreshPath("autotune.db"))).value();
  auto world = exec::CreateComm("local", nullptr, nullptr);
  ASSERT_TRUE(world.ok());
  const ModelSpec& m = **Cat().Model("tiny-pixart");
  const Cluster one = *ResolveCluster({"cpu", 1}, Cat());
  AutotuneOptions ao;
  ao.backend = "cpu";
  ao.candidates = 2;
  ao.iters = 2;
  ao.world = world->get();
  int progress_calls = 0;
  ao.progress = [&](int, int, const ParallelConfig&) { ++progress_calls; };
  auto result = AutotuneEngine(Cat(), store.get(), m, kTiny, one, ao);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->rows.size(), 1u);
  EXPECT_EQ(progress_calls, 1);
  const AutotuneRow& row = result->rows[0];
  EXPECT_TRUE(row.skipped.empty());
  EXPECT_GT(row.measured_s, 0.0);
  EXPECT_EQ(result->scale_key, EngineFitKey("cpu", "cpu", 1));
  EXPECT_GT(result->scale, 0.0);
  EXPECT_NEAR(row.after_s, row.measured_s, 1e-9 + 1e-6 * row.measured_s);
  EXPECT_EQ(store->Runs()->size(), 1u);
  // Without a world there is nothing to run on.
  ao.world = nullptr;
  EXPECT_FALSE(AutotuneEngine(Cat(), store.get(), m, kTiny, one, ao).ok());
}

}  // namespace
}  // namespace ditune::calibration
