// What ditune's runs leave in the store: the run's record and its DiT measurement.
#include <gtest/gtest.h>

#include "runs/records.h"
#include "core/catalog.h"

namespace ditune::calibration {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

TEST(RecordsTest, AnEngineRunIsRecordedWithItsPlanAndEveryRank) {
  const ModelSpec& model = **Cat().Model("tiny-pixart");
  const Workload w{"tiny-pixart", 256, 256, 1, 2, 1, OutputType::kLatent};
  exec::EngineRunResult r;
  r.median_s = 0.5;
  r.p10_s = 0.6;  // above the median: clamped
  r.p90_s = 0.7;
  r.iters = 4;
  r.rank_median_s = {0.45, 0.5};
  const ParallelConfig config = *ParseParallelConfig("ulysses=2");
  const std::string id = NewRunId("2");
  EXPECT_NE(id, NewRunId("2"));
  const RunRecord rec = EngineRunRecord(model, w, config, "cpu", "cpu", "mpi", 0.4, r, id);
  EXPECT_EQ(rec.plan["config"], "ulysses=2");
  EXPECT_EQ(rec.plan["comm"], "mpi");
  EXPECT_EQ(rec.plan["backend"], "cpu");
  EXPECT_EQ(rec.per_rank_s, (std::vector<double>{0.45, 0.5}));
  EXPECT_EQ(rec.measured_s, 0.5);
  EXPECT_EQ(rec.predicted_s, 0.4);
  // One rank alone: its own median.
  exec::EngineRunResult one = r;
  one.rank_median_s.clear();
  EXPECT_EQ(EngineRunRecord(model, w, ParallelConfig{}, "cpu", "cpu", "", 0.4, one, id).per_rank_s,
            (std::vector<double>{0.5}));
  const Measurement meas = DitMeasurement(model, w, config, 2, "cpu", "cpu", r.median_s, r.p10_s, r.p90_s, r.iters, id,
                                          {{"comm", "mpi"}});
  EXPECT_TRUE(meas.Validate().ok()) << meas.Validate().ToString();
  EXPECT_EQ(meas.p10.value(), 0.5);
  EXPECT_EQ(meas.p90.value(), 0.7);
  EXPECT_EQ(meas.link, "shm");
  EXPECT_EQ(meas.params["comm"], "mpi");
  EXPECT_EQ(meas.run_id, id);
}

}  // namespace
}  // namespace ditune::calibration
