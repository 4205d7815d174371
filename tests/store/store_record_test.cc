// A run and its measurements land together: one transaction, even when the process is
// killed while recording.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "store/store.h"

namespace ditune {
namespace {

namespace fs = std::filesystem;

Measurement RunMeasurement(const std::string& run_id, int i) {
  Measurement m;
  m.source = MeasurementSource::kExecutor;
  m.kind = MeasurementKind::kOp;
  m.op = "gemm";
  m.backend = "cpu";
  m.device = "cpu";
  m.params = {{"i", i}};
  m.ranks = 1;
  m.flops = Flops(1e9 + i);
  m.bytes = Bytes(1e6);
  m.median = Milliseconds(2);
  m.p10 = Milliseconds(1.5);
  m.p90 = Milliseconds(2.5);
  m.samples = 5;
  m.run_id = run_id;
  return m;
}

RunRecord MakeRun(const std::string& run_id) {
  RunRecord r;
  r.run_id = run_id;
  r.plan = {{"config", "ulysses=2"}};
  r.predicted_s = 1.0;
  r.measured_s = 1.25;
  r.per_rank_s = {1.25, 1.2};
  return r;
}

std::string FreshPath(const char* name) {
  const fs::path dir = fs::path(DITUNE_TEST_TMP_DIR) / "store-record";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p.string();
}

// Run ids of the runs, and of the measurements (with their counts).
void Contents(Store* store, std::vector<std::string>* runs, std::map<std::string, int>* per_run) {
  auto r = store->Runs();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& x : *r) runs->push_back(x.run_id);
  auto m = store->Measurements();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const auto& x : *m) (*per_run)[x.run_id]++;
}

TEST(StoreRecordTest, ARunAndItsMeasurementsLandTogetherOrNotAtAll) {
  auto store = Store::Open(FreshPath("together.db"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto ids = (*store)->RecordRuns({MakeRun("a")}, {RunMeasurement("a", 0), RunMeasurement("a", 1)});
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(ids->size(), 2u);

  // A bad measurement: neither the run nor any measurement is stored.
  Measurement bad = RunMeasurement("b", 0);
  bad.median = Seconds(-1);
  EXPECT_EQ((*store)->RecordRuns({MakeRun("b")}, {RunMeasurement("b", 1), bad}).status().ExitCode(), 2);
  RunRecord bad_run = MakeRun("c");
  bad_run.measured_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE((*store)->RecordRuns({bad_run}, {RunMeasurement("c", 0)}).ok());

  std::vector<std::string> runs;
  std::map<std::string, int> per_run;
  Contents(store->get(), &runs, &per_run);
  EXPECT_EQ(runs, std::vector<std::string>{"a"});
  EXPECT_EQ(per_run, (std::map<std::string, int>{{"a", 2}}));
}

TEST(StoreRecordTest, FitsLandWithTheMeasurementsTheyWereMadeFrom) {
  auto store = Store::Open(FreshPath("with-fits.db"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Fit fit;
  fit.kind = "e2e";
  fit.key = "cpu/tiny-pixart";
  fit.params = {{"compute_scale", 1.5}};
  fit.points = 2;
  Fit cited = fit;
  cited.key = "cpu/tiny-sd3";
  cited.measurement_ids = {7};
  auto ids = (*store)->RecordRuns({MakeRun("r1")}, {RunMeasurement("r1", 0), RunMeasurement("r1", 1)}, {fit, cited});
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  auto fits = (*store)->ActiveFits("e2e");
  ASSERT_TRUE(fits.ok());
  ASSERT_EQ(fits->size(), 2u);
  EXPECT_EQ((*fits)[0].key, "cpu/tiny-pixart");
  EXPECT_EQ((*fits)[0].measurement_ids, *ids);  // given the new measurements' ids
  EXPECT_EQ((*fits)[1].measurement_ids, std::vector<int64_t>{7});  // its own kept
  // A bad fit refuses the whole record: no run, no measurement, no fit.
  Fit bad = fit;
  bad.mape = -1;
  auto refused = (*store)->RecordRuns({MakeRun("r2")}, {RunMeasurement("r2", 0)}, {bad});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("mape"), std::string::npos) << refused.status().message();
  EXPECT_EQ((*store)->Runs()->size(), 1u);
  EXPECT_EQ((*store)->Measurements()->size(), 2u);
  EXPECT_EQ((*(*store)->ActiveFits("e2e"))[0].params["compute_scale"], 1.5);
}

TEST(StoreRecordTest, AKilledRecorderLeavesNoRunWithoutItsMeasurements) {
  const std::string path = FreshPath("killed.db");
  constexpr int kPerRun = 40;
  for (int attempt = 0; attempt < 6; ++attempt) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto store = Store::Open(path);
      if (!store.ok()) _exit(3);
      for (int run = 0;; ++run) {
        const std::string id = "p" + std::to_string(attempt) + "-" + std::to_string(run);
        std::vector<Measurement> ms;
        for (int i = 0; i < kPerRun; ++i) ms.push_back(RunMeasurement(id, i));
        if (!(*store)->RecordRuns({MakeRun(id)}, ms).ok()) _exit(4);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(40 + 23 * attempt));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the recorder ended on its own: " << WEXITSTATUS(status);
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<std::string> runs;
  std::map<std::string, int> per_run;
  Contents(store->get(), &runs, &per_run);
  EXPECT_GT(runs.size(), 0u);
  EXPECT_EQ(per_run.size(), runs.size());
  for (const auto& id : runs) EXPECT_EQ(per_run[id], kPerRun) << id;
}

}  // namespace
}  // namespace ditune
