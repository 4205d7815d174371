// The calibration loop's library pieces: records of runs and the CPU scale refit.
#include <gtest/gtest.h>

#include "calibration/cpu_loop.h"
#include "calibration/records.h"
#include "planner/predict.h"

namespace ditune::calibration {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

TEST(CpuLoopTest, TheRefitComposesWithTheScaleAlreadyInForce) {
  Fit old;
  old.kind = kFitKindE2e;
  old.key = E2eFitKey("cpu", "tiny-pixart");
  old.params = {{"compute_scale", 2.0}};
  // Every run measured 1.5x its prediction: the new scale is 1.5 on top of 2.
  auto fit = RefitCpuComputeScale({old}, "tiny-pixart", {1.0, 2.0, 4.0}, {1.5, 3.0, 6.0});
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_EQ(fit->key, old.key);
  EXPECT_DOUBLE_EQ(fit->params["compute_scale"].get<double>(), 3.0);
  EXPECT_EQ(fit->points, 3);
  // With no scale in force it starts from 1; another model's scale is not this one's.
  Fit other = old;
  other.key = E2eFitKey("cpu", "tiny-sd3");
  auto fresh = RefitCpuComputeScale({other}, "tiny-pixart", {1.0}, {0.5});
  ASSERT_TRUE(fresh.ok());
  EXPECT_DOUBLE_EQ(fresh->params["compute_scale"].get<double>(), 0.5);
  EXPECT_FALSE(RefitCpuComputeScale({}, "tiny-pixart", {}, {}).ok());
  const auto merged = WithFit({old, other}, *fit);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[1].params["compute_scale"], 3.0);
}

TEST(CpuLoopTest, ARefittedScaleMovesThePredictionByItsFactor) {
  const Workload w{"tiny-pixart", 256, 256, 1, 2, 1, OutputType::kLatent};
  const ParallelConfig serial;
  auto before = PredictOnCpu(Cat(), w, serial, 1, {});
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  auto fit = RefitCpuComputeScale({}, "tiny-pixart", {*before}, {3 * *before});
  ASSERT_TRUE(fit.ok());
  auto after = PredictOnCpu(Cat(), w, serial, 1, {*fit});
  ASSERT_TRUE(after.ok());
  // The scale applies to compute; the prediction moves by nearly all of it.
  EXPECT_GT(*after, 2.5 * *before);
  EXPECT_LT(*after, 3.05 * *before);
}

TEST(RecordsTest, ACpuRunIsRecordedWithItsPlanAndEveryRank) {
  const ModelSpec& model = **Cat().Model("tiny-pixart");
  const Workload w{"tiny-pixart", 256, 256, 1, 2, 1, OutputType::kLatent};
  exec::RunMeasurement m;
  m.latency_median_s = 0.5;
  m.latency_p10_s = 0.6;  // above the median: clamped
  m.latency_p90_s = 0.7;
  m.iters = 4;
  m.ranks.resize(2);
  m.ranks[0].dit_median_s = 0.45;
  m.ranks[1].dit_median_s = 0.5;
  const ParallelConfig config = *ParseParallelConfig("ulysses=2");
  const std::string id = NewRunId("2");
  EXPECT_NE(id, NewRunId("2"));
  const RunRecord rec = CpuRunRecord(model, w, config, 2, "mpi", 0.4, m, id);
  EXPECT_EQ(rec.plan["config"], "ulysses=2");
  EXPECT_EQ(rec.plan["comm"], "mpi");
  EXPECT_EQ(rec.per_rank_s, (std::vector<double>{0.45, 0.5}));
  const Measurement meas = CpuRunMeasurement(model, w, config, 2, m, id, {{"comm", "mpi"}});
  EXPECT_TRUE(meas.Validate().ok()) << meas.Validate().ToString();
  EXPECT_EQ(meas.p10.value(), 0.5);
  EXPECT_EQ(meas.link, "shm");
  EXPECT_EQ(meas.params["comm"], "mpi");
}

}  // namespace
}  // namespace ditune::calibration
