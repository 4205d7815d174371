#include "store/store.h"
#include "tests/store/fit_store.h"

#include "costmodels/calibration.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ditune {
namespace {

using ditune::testing::FitStore;


namespace fs = std::filesystem;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A raw connection for what the Store API does not expose: building foreign or old
// databases, and peeking at inactive rows.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << path;
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void Exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << sql << ": " << (err != nullptr ? err : "");
    sqlite3_free(err);
  }

  // The first column of the first row of `sql`, or -1 when there is none.
  int64_t Int(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    int64_t v = -1;
    if (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) v = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return v;
  }

  std::string Text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    std::string v;
    if (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
      v = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
};

Measurement MakeMeasurement(std::string op, std::string device = "h100-sxm5-80gb",
                            std::string run_id = "") {
  Measurement m;
  m.source = MeasurementSource::kMicrobench;
  m.kind = MeasurementKind::kOp;
  m.op = std::move(op);
  m.backend = "cuda";
  m.device = std::move(device);
  m.params = {{"m", 4096}, {"n", 3072}, {"k", 1024}, {"dtype", "bf16"}};
  m.ranks = 1;
  m.bytes = Bytes(1.5e8);
  m.flops = Flops(2.0 * 4096 * 3072 * 1024);
  m.median = Milliseconds(1.25);
  m.p10 = Milliseconds(1.125);
  m.p90 = Milliseconds(1.5);
  m.samples = 20;
  m.run_id = std::move(run_id);
  m.unix_time = 1'700'000'000;
  return m;
}

Fit MakeFit(std::string kind, std::string key, double alpha) {
  Fit f;
  f.kind = std::move(kind);
  f.key = std::move(key);
  f.params = {{"alpha_s", alpha}, {"beta_s_per_byte", 2.5e-12}};
  f.points = 3;
  f.mape = 0.0625;
  f.measurement_ids = {1, 2, 3};
  f.unix_time = 1'700'000'123;
  return f;
}

// Runs `body` in a child process that exits with body's result and never returns into the
// test framework. Returns the child's pid.
pid_t Spawn(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = body();
    } catch (...) {
      rc = 98;
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  return pid;
}

// The child's exit status, or 128 + the signal that ended it.
int Wait(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(DITUNE_TEST_TMP_DIR) / "store" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "ditune.db").string();
  }

  std::unique_ptr<Store> OpenStore() {
    StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    return std::move(store).value();
  }

  // Polls the store (from this process) until `ready` holds, waits a little longer so that
  // the writer is likely mid-transaction, then kills it with SIGKILL. False, with a recorded
  // failure, when the writer exited by itself or made no progress.
  bool KillWhen(pid_t child, const std::function<bool(Store&)>& ready) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool reached = false;
    {
      std::unique_ptr<Store> store;
      while (!reached && std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (waitpid(child, &status, WNOHANG) != 0) {
          ADD_FAILURE() << "the writer exited early, status " << status;
          return false;
        }
        if (store == nullptr && fs::exists(path_)) {
          StatusOr<std::unique_ptr<Store>> opened = Store::Open(path_);
          if (opened.ok()) store = std::move(opened).value();
        }
        reached = store != nullptr && ready(*store);
        if (!reached) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }  // the parent's connection is closed before the kill
    if (reached) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    kill(child, SIGKILL);
    const int exit = Wait(child);
    if (!reached) {
      ADD_FAILURE() << "the writer made no progress";
      return false;
    }
    if (exit != 128 + SIGKILL) {
      ADD_FAILURE() << "the writer ended with " << exit << ", not by SIGKILL";
      return false;
    }
    return true;
  }

  // Removes the WAL and shared-memory files a closed store may leave behind, so that damage
  // to the main file is what the next open sees.
  void RemoveSideFiles() {
    fs::remove(path_ + "-wal");
    fs::remove(path_ + "-shm");
  }

  fs::path dir_;
  std::string path_;
};

void ExpectSameMeasurement(const Measurement& got, const Measurement& want) {
  EXPECT_EQ(got.source, want.source);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.op, want.op);
  EXPECT_EQ(got.backend, want.backend);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.ranks, want.ranks);
  EXPECT_EQ(got.link, want.link);
  EXPECT_EQ(got.bytes.value(), want.bytes.value());
  EXPECT_EQ(got.flops.value(), want.flops.value());
  EXPECT_EQ(got.median.value(), want.median.value());
  EXPECT_EQ(got.p10.value(), want.p10.value());
  EXPECT_EQ(got.p90.value(), want.p90.value());
  EXPECT_EQ(got.samples, want.samples);
  EXPECT_EQ(got.run_id, want.run_id);
  EXPECT_EQ(got.unix_time, want.unix_time);
}

// Accepting a run sets its params' "accepted" and keeps the rest; an absent id is NotFound.
TEST_F(StoreTest, AcceptingAMeasurementMarksOnlyIt) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto ids = store->AddMeasurements({MakeMeasurement("gemm"), MakeMeasurement("attention")});
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_TRUE(store->AcceptMeasurement((*ids)[1]).ok());
  auto all = store->Measurements();
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE((*all)[0].params.contains("accepted"));
  EXPECT_EQ((*all)[1].params.value("accepted", false), true);
  EXPECT_EQ((*all)[1].params["m"], 4096);
  const Status absent = store->AcceptMeasurement(12345);
  EXPECT_EQ(absent.code(), Status::Code::kNotFound);
  EXPECT_NE(absent.message().find("no measurement 12345"), std::string::npos) << absent.message();
}

TEST_F(StoreTest, MeasurementsRoundTripWithFilters) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);

  Measurement gemm = MakeMeasurement("gemm", "h100-sxm5-80gb", "run-1");
  Measurement a2a = MakeMeasurement("all_to_all", "h100-sxm5-80gb", "run-1");
  a2a.source = MeasurementSource::kExecutor;
  a2a.kind = MeasurementKind::kCollective;
  a2a.backend = "nccl";
  a2a.params = {{"algo", "ring"}, {"sizes", {1, 2, 3}}, {"nested", {{"x", 0.5}, {"y", nullptr}}}};
  a2a.ranks = 8;
  a2a.link = "nvlink4";
  a2a.bytes = Megabytes(64);
  a2a.flops = Flops(0);
  Measurement l40 = MakeMeasurement("gemm", "l40s-48gb", "run-2");
  l40.source = MeasurementSource::kImport;
  l40.backend = "xdit";
  l40.unix_time = 0;  // the store fills in now

  const int64_t before = std::time(nullptr);
  StatusOr<std::vector<int64_t>> ids = store->AddMeasurements({gemm, a2a, l40});
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 3u);
  EXPECT_LT((*ids)[0], (*ids)[1]);
  EXPECT_LT((*ids)[1], (*ids)[2]);

  StatusOr<std::vector<Measurement>> all = store->Measurements();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, (*ids)[0]);
  ExpectSameMeasurement((*all)[0], gemm);
  ExpectSameMeasurement((*all)[1], a2a);
  EXPECT_GE((*all)[2].unix_time, before);
  EXPECT_LE((*all)[2].unix_time, std::time(nullptr));
  l40.unix_time = (*all)[2].unix_time;
  ExpectSameMeasurement((*all)[2], l40);

  auto count = [&](const MeasurementFilter& f) -> size_t {
    StatusOr<std::vector<Measurement>> r = store->Measurements(f);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->size() : 999;
  };
  EXPECT_EQ(count({.kind = MeasurementKind::kOp}), 2u);
  EXPECT_EQ(count({.kind = MeasurementKind::kCollective}), 1u);
  EXPECT_EQ(count({.kind = MeasurementKind::kE2e}), 0u);
  EXPECT_EQ(count({.op = "gemm"}), 2u);
  EXPECT_EQ(count({.op = "gemm", .device = "l40s-48gb"}), 1u);
  EXPECT_EQ(count({.device = "h100-sxm5-80gb"}), 2u);
  EXPECT_EQ(count({.backend = "nccl"}), 1u);
  EXPECT_EQ(count({.link = "nvlink4"}), 1u);
  EXPECT_EQ(count({.link = ""}), 2u);
  // A value that looks like SQL is only ever a value.
  EXPECT_EQ(count({.op = "gemm' OR '1'='1"}), 0u);

  StatusOr<std::vector<Measurement>> by_id = store->MeasurementsById({(*ids)[2], (*ids)[0]});
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  ASSERT_EQ(by_id->size(), 2u);
  EXPECT_EQ((*by_id)[0].id, (*ids)[2]);
  EXPECT_EQ((*by_id)[1].id, (*ids)[0]);
  ExpectSameMeasurement((*by_id)[1], gemm);

  StatusOr<std::vector<Measurement>> missing = store->MeasurementsById({(*ids)[0], 12345});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_TRUE(Contains(missing.status().message(), "12345")) << missing.status().message();

  // Survives closing and reopening.
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  StatusOr<std::vector<Measurement>> again = store->Measurements();
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 3u);
  ExpectSameMeasurement((*again)[1], a2a);
}

TEST_F(StoreTest, InvalidMeasurementInsertsNothingAndIsNamed) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<Measurement> batch = {MakeMeasurement("gemm"), MakeMeasurement("attention"),
                                    MakeMeasurement("norm")};
  batch[1].p10 = Milliseconds(5);  // p10 > median
  StatusOr<std::vector<int64_t>> ids = store->AddMeasurements(batch);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(ids.status().message(), "#1")) << ids.status().message();
  EXPECT_TRUE(Contains(ids.status().message(), "p10")) << ids.status().message();

  StatusOr<std::vector<Measurement>> all = store->Measurements();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());

  StatusOr<std::vector<int64_t>> none = store->AddMeasurements({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(StoreTest, PhysicallyAbsurdMeasurementIsRefusedByName) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Measurement poison = MakeMeasurement("gemm");
  poison.flops = Flops(1e12);
  poison.median = poison.p10 = poison.p90 = Seconds(1e-200);
  StatusOr<std::vector<int64_t>> ids = store->AddMeasurements({MakeMeasurement("gemm"), poison});
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(ids.status().message(), "#1")) << ids.status().message();
  EXPECT_TRUE(Contains(ids.status().message(), "median_s")) << ids.status().message();
  EXPECT_TRUE(store->Measurements()->empty());
}

// A store written before the bounds existed may hold a row no fit can take; fitting the
// store still fits the others and names the row it left out.
TEST_F(StoreTest, APoisonedRowDoesNotDisableFitting) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<Measurement> sweep;
  for (double f = 1e9; f <= 1e13; f *= 2) {
    Measurement m = MakeMeasurement("gemm");
    m.flops = Flops(f);
    m.median = m.p10 = m.p90 = Seconds(5e-6 + f / 400e12);
    sweep.push_back(m);
  }
  Measurement a2a = MakeMeasurement("all_to_all");
  a2a.kind = MeasurementKind::kCollective;
  a2a.backend = "nccl";
  a2a.ranks = 8;
  a2a.link = "nvlink4";
  for (double b = 1024; b <= 64e6; b *= 4) {
    a2a.bytes = Bytes(b);
    a2a.median = a2a.p10 = a2a.p90 = Seconds(10e-6 + b / 300e9);
    sweep.push_back(a2a);
  }
  StatusOr<std::vector<int64_t>> ids = store->AddMeasurements(sweep);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  std::vector<std::string> clean_skipped;
  StatusOr<std::vector<Fit>> clean = FitStore(store.get(), &clean_skipped);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  ASSERT_EQ(clean->size(), 2u);
  EXPECT_TRUE(clean_skipped.empty());

  const int64_t gemm_id = (*ids)[3];
  const int64_t a2a_id = ids->back();
  {
    RawDb raw(path_);
    raw.Exec("UPDATE measurements SET flops = 1e12, median_s = 1e-200, p10_s = 1e-200, p90_s = 1e-200 WHERE id = " +
             std::to_string(gemm_id));
    raw.Exec("UPDATE measurements SET bytes = 1e300 WHERE id = " + std::to_string(a2a_id));
  }
  std::vector<std::string> skipped;
  StatusOr<std::vector<Fit>> fits = FitStore(store.get(), &skipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 2u);
  for (const Fit& f : *fits) {
    EXPECT_EQ(std::count(f.measurement_ids.begin(), f.measurement_ids.end(), gemm_id), 0);
    EXPECT_EQ(std::count(f.measurement_ids.begin(), f.measurement_ids.end(), a2a_id), 0);
    EXPECT_LT(f.mape, 0.01) << f.key;
  }
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_TRUE(Contains(skipped[0] + skipped[1], "measurement " + std::to_string(gemm_id) + " left out"));
  EXPECT_TRUE(Contains(skipped[0] + skipped[1], "measurement " + std::to_string(a2a_id) + " left out"));
  EXPECT_EQ(store->ActiveFits("compute")->size(), 1u);
  EXPECT_EQ(store->ActiveFits("comm")->size(), 1u);
}

TEST_F(StoreTest, DamagedColumnIsCorruptionNamingTableAndRow) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  StatusOr<std::vector<int64_t>> ids = store->AddMeasurements({MakeMeasurement("gemm")});
  ASSERT_TRUE(ids.ok());
  {
    RawDb raw(path_);
    raw.Exec("UPDATE measurements SET params = '{\"m\": ' WHERE id = " + std::to_string((*ids)[0]));
  }
  StatusOr<std::vector<Measurement>> all = store->Measurements();
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(all.status().message(), "measurements")) << all.status().message();
  EXPECT_TRUE(Contains(all.status().message(), "row " + std::to_string((*ids)[0])))
      << all.status().message();
}

TEST_F(StoreTest, ReplaceFitKeepsOneActivePerKey) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  StatusOr<int64_t> v0 = store->CalibrationVersion();
  ASSERT_TRUE(v0.ok()) << v0.status().ToString();
  EXPECT_EQ(*v0, 0);

  StatusOr<int64_t> first = store->ReplaceFit(MakeFit("comm", "all_to_all/nvlink4/intra", 1e-5));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  StatusOr<int64_t> v1 = store->CalibrationVersion();
  ASSERT_TRUE(v1.ok());
  EXPECT_GT(*v1, *v0);

  Fit newer = MakeFit("comm", "all_to_all/nvlink4/intra", 2e-5);
  newer.unix_time = 0;  // filled with now
  StatusOr<int64_t> second = store->ReplaceFit(newer);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_NE(*second, *first);
  StatusOr<int64_t> v2 = store->CalibrationVersion();
  ASSERT_TRUE(v2.ok());
  EXPECT_GT(*v2, *v1);

  StatusOr<std::vector<Fit>> active = store->ActiveFits();
  ASSERT_TRUE(active.ok()) << active.status().ToString();
  ASSERT_EQ(active->size(), 1u);
  const Fit& f = (*active)[0];
  EXPECT_EQ(f.id, *second);
  EXPECT_EQ(f.kind, "comm");
  EXPECT_EQ(f.key, "all_to_all/nvlink4/intra");
  EXPECT_EQ(f.params, newer.params);
  EXPECT_EQ(f.points, 3);
  EXPECT_EQ(f.mape, 0.0625);
  EXPECT_EQ(f.measurement_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(f.active);
  EXPECT_GT(f.unix_time, 1'700'000'123);
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.Int("SELECT active FROM fits WHERE id = " + std::to_string(*first)), 0);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM fits"), 2);
  }

  // Several fits: one transaction, one version bump; later entries win over earlier ones.
  ASSERT_TRUE(store
                  ->ReplaceFits({MakeFit("compute", "gemm/h100-sxm5-80gb", 1.0),
                                 MakeFit("comm", "all_gather/nvlink4/intra", 2.0),
                                 MakeFit("comm", "all_gather/nvlink4/intra", 3.0)})
                  .ok());
  StatusOr<int64_t> v3 = store->CalibrationVersion();
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(*v3, *v2 + 1);

  active = store->ActiveFits();
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 3u);
  EXPECT_EQ((*active)[0].key, "all_gather/nvlink4/intra");
  EXPECT_EQ((*active)[0].params["alpha_s"], 3.0);
  EXPECT_EQ((*active)[1].key, "all_to_all/nvlink4/intra");
  EXPECT_EQ((*active)[2].kind, "compute");

  StatusOr<std::vector<Fit>> compute = store->ActiveFits("compute");
  ASSERT_TRUE(compute.ok());
  ASSERT_EQ(compute->size(), 1u);
  EXPECT_EQ((*compute)[0].key, "gemm/h100-sxm5-80gb");
  StatusOr<std::vector<Fit>> none = store->ActiveFits("e2e");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  // A bad fit changes nothing.
  StatusOr<int64_t> bad = store->ReplaceFit(MakeFit("comm", "", 1.0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  Status bad_many = store->ReplaceFits({MakeFit("comm", "x", 1.0), MakeFit("", "y", 1.0)});
  EXPECT_EQ(bad_many.code(), Status::Code::kInvalidArgument);
  StatusOr<int64_t> v4 = store->CalibrationVersion();
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(*v4, *v3);
  EXPECT_EQ(store->ActiveFits()->size(), 3u);
}

TEST_F(StoreTest, PlanCacheHitsOnlyForItsCalibrationVersion) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const nlohmann::json plan = {{"config", "ulysses=4,ring=2"}, {"predicted_s", 12.5}};
  StatusOr<int64_t> v = store->CalibrationVersion();
  ASSERT_TRUE(v.ok());

  auto miss = store->GetCachedPlan("flux/8xh100", *v);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());

  ASSERT_TRUE(store->PutCachedPlan("flux/8xh100", *v, plan).ok());
  auto hit = store->GetCachedPlan("flux/8xh100", *v);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ(**hit, plan);
  EXPECT_FALSE(store->GetCachedPlan("pixart/4xl40s", *v)->has_value());

  ASSERT_TRUE(store->ReplaceFit(MakeFit("comm", "all_to_all/nvlink4/intra", 1e-5)).ok());
  StatusOr<int64_t> v2 = store->CalibrationVersion();
  ASSERT_TRUE(v2.ok());
  ASSERT_NE(*v2, *v);
  auto stale = store->GetCachedPlan("flux/8xh100", *v2);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->has_value());

  const nlohmann::json plan2 = {{"config", "ulysses=8"}};
  ASSERT_TRUE(store->PutCachedPlan("flux/8xh100", *v2, plan2).ok());
  EXPECT_EQ(store->GetCachedPlan("flux/8xh100", *v2)->value(), plan2);
  EXPECT_FALSE(store->GetCachedPlan("flux/8xh100", *v)->has_value());
}

TEST_F(StoreTest, RunsRoundTrip) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RunRecord a;
  a.run_id = "run-a";
  a.plan = {{"config", "ulysses=2"}, {"gpus", 2}};
  a.predicted_s = 3.25;
  a.measured_s = 3.5;
  a.per_rank_s = {3.5, 3.375};
  a.unix_time = 1'700'000'000;
  RunRecord b = a;
  b.run_id = "run-b";
  b.per_rank_s = {};
  b.unix_time = 1'700'000'100;
  ASSERT_TRUE(store->AddRun(b).ok());
  ASSERT_TRUE(store->AddRun(a).ok());

  StatusOr<std::vector<RunRecord>> runs = store->Runs();
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].run_id, "run-a");  // oldest first
  EXPECT_EQ((*runs)[0].plan, a.plan);
  EXPECT_EQ((*runs)[0].predicted_s, 3.25);
  EXPECT_EQ((*runs)[0].measured_s, 3.5);
  EXPECT_EQ((*runs)[0].per_rank_s, a.per_rank_s);
  EXPECT_EQ((*runs)[0].unix_time, a.unix_time);
  EXPECT_EQ((*runs)[1].run_id, "run-b");
  EXPECT_TRUE((*runs)[1].per_rank_s.empty());

  // The same run_id again replaces the record.
  a.measured_s = 4.0;
  ASSERT_TRUE(store->AddRun(a).ok());
  runs = store->Runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].measured_s, 4.0);

  RunRecord nameless;
  EXPECT_EQ(store->AddRun(nameless).code(), Status::Code::kInvalidArgument);
  RunRecord nan = a;
  nan.per_rank_s = {std::nan("")};
  EXPECT_EQ(store->AddRun(nan).code(), Status::Code::kInvalidArgument);
}

TEST_F(StoreTest, KilledWriterLeavesOnlyWholeBatches) {
  pid_t child = Spawn([&] {
    StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
    if (!store.ok()) {
      std::fprintf(stderr, "writer: %s\n", store.status().ToString().c_str());
      return 2;
    }
    for (int n = 0;; ++n) {
      std::vector<Measurement> batch(
          50, MakeMeasurement("gemm", "h100-sxm5-80gb", "batch-" + std::to_string(n)));
      StatusOr<std::vector<int64_t>> ids = (*store)->AddMeasurements(batch);
      if (!ids.ok()) {
        std::fprintf(stderr, "writer: %s\n", ids.status().ToString().c_str());
        return 3;
      }
    }
  });
  ASSERT_GT(child, 0);
  ASSERT_TRUE(KillWhen(child, [](Store& s) {
    StatusOr<std::vector<Measurement>> m = s.Measurements({.op = "gemm"});
    return m.ok() && m->size() >= 200;
  }));

  auto store = OpenStore();  // recovers the WAL; the integrity check passes
  ASSERT_NE(store, nullptr);
  StatusOr<std::vector<Measurement>> all = store->Measurements();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::map<std::string, int> per_batch;
  for (const Measurement& m : *all) ++per_batch[m.run_id];
  ASSERT_GE(per_batch.size(), 4u);
  for (const auto& [run_id, rows] : per_batch) EXPECT_EQ(rows, 50) << run_id;
  // Batches land in order: exactly batch-0 .. batch-(n-1).
  for (size_t n = 0; n < per_batch.size(); ++n) {
    EXPECT_EQ(per_batch.count("batch-" + std::to_string(n)), 1u) << n;
  }
  // The store still takes writes.
  EXPECT_TRUE(store->AddMeasurements({MakeMeasurement("norm")}).ok());
}

TEST_F(StoreTest, KilledFitterLeavesOneWholeCalibration) {
  pid_t child = Spawn([&] {
    StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
    if (!store.ok()) return 2;
    for (int n = 0;; ++n) {
      std::vector<Fit> fits;
      for (int k = 0; k < 10; ++k) {
        Fit f = MakeFit("comm", "key-" + std::to_string(k), 1e-6 * k);
        f.params["pass"] = n;
        fits.push_back(f);
      }
      if (!(*store)->ReplaceFits(fits).ok()) return 3;
    }
  });
  ASSERT_GT(child, 0);
  ASSERT_TRUE(KillWhen(child, [](Store& s) {
    StatusOr<int64_t> v = s.CalibrationVersion();
    return v.ok() && *v >= 5;
  }));

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  StatusOr<std::vector<Fit>> active = store->ActiveFits();
  ASSERT_TRUE(active.ok()) << active.status().ToString();
  ASSERT_EQ(active->size(), 10u);
  // All ten from the same (last committed) pass.
  for (const Fit& f : *active) EXPECT_EQ(f.params["pass"], (*active)[0].params["pass"]);
  StatusOr<int64_t> version = store->CalibrationVersion();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ((*active)[0].params["pass"].get<int64_t>() + 1, *version);
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM fits"), 10 * *version);
}

TEST_F(StoreTest, TwoProcessesWritingAtOnceLoseNothing) {
  auto writer = [&](const std::string& name) {
    return [this, name] {
      StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
      if (!store.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), store.status().ToString().c_str());
        return 2;
      }
      for (int i = 0; i < 200; ++i) {
        StatusOr<std::vector<int64_t>> ids =
            (*store)->AddMeasurements({MakeMeasurement("gemm", "h100-sxm5-80gb", name)});
        if (!ids.ok()) {
          std::fprintf(stderr, "%s: %s\n", name.c_str(), ids.status().ToString().c_str());
          return 3;
        }
      }
      return 0;
    };
  };
  // Both start on a file that does not exist yet: creation and migration race too.
  pid_t a = Spawn(writer("writer-a"));
  pid_t b = Spawn(writer("writer-b"));
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_EQ(Wait(a), 0);
  EXPECT_EQ(Wait(b), 0);

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  StatusOr<std::vector<Measurement>> all = store->Measurements();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 400u);
  std::map<std::string, int> per_writer;
  for (const Measurement& m : *all) ++per_writer[m.run_id];
  EXPECT_EQ(per_writer["writer-a"], 200);
  EXPECT_EQ(per_writer["writer-b"], 200);
}

// Opens the store at `path` with `options` from `processes` processes at once; each one's
// exit status (0: opened; the error is printed), -1 where a process could not be started.
std::vector<int> OpenAtOnce(const std::string& path, const StoreOptions& options, int processes) {
  std::vector<pid_t> kids;
  for (int k = 0; k < processes; ++k) {
    kids.push_back(Spawn([&path, &options, k] {
      StatusOr<std::unique_ptr<Store>> store = Store::Open(path, options);
      if (!store.ok()) {
        std::fprintf(stderr, "opener %d: %s\n", k, store.status().ToString().c_str());
        return 2;
      }
      return 0;
    }));
  }
  std::vector<int> statuses;
  for (pid_t kid : kids) statuses.push_back(kid > 0 ? Wait(kid) : -1);
  return statuses;
}

// Every rank of an MPI job opens the same new store with the factory fits at once: each must
// open it, and the fits are seeded once.
TEST_F(StoreTest, ProcessesSeedingANewStoreAtOnceAllOpenItAndSeedItOnce) {
  StoreOptions options;
  for (int i = 0; i < 14; ++i) options.seed_fits.push_back(MakeFit("comm", "seed/" + std::to_string(i), 1e-5));
  for (int trial = 0; trial < 12; ++trial) {
    const std::string path = (dir_ / ("seeded-" + std::to_string(trial) + ".db")).string();
    for (int status : OpenAtOnce(path, options, 3)) EXPECT_EQ(status, 0) << "trial " << trial;
    RawDb raw(path);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM fits"), 14) << "trial " << trial;
    EXPECT_EQ(raw.Int("SELECT count(*) FROM fits WHERE active = 1"), 14) << "trial " << trial;
  }
}

// A factory release's fits.
std::vector<Fit> Release(uint64_t release, const std::vector<std::pair<std::string, double>>& keys) {
  std::vector<Fit> fits;
  for (const auto& [key, alpha] : keys) {
    Fit f = MakeFit("e2e", key, alpha);
    f.measurement_ids.clear();
    f.factory_release = release;
    fits.push_back(std::move(f));
  }
  return fits;
}

// The active fits' (key -> alpha_s, release: 0 for the user's own). Their params are the
// seed fits' as they were: any ditune reads them.
std::map<std::string, std::pair<double, uint64_t>> ActiveByKey(Store& store) {
  std::map<std::string, std::pair<double, uint64_t>> out;
  auto fits = store.ActiveFits();
  EXPECT_TRUE(fits.ok()) << fits.status().ToString();
  if (!fits.ok()) return out;
  for (const auto& f : *fits) {
    EXPECT_EQ(f.params, MakeFit("e2e", f.key, f.params["alpha_s"].get<double>()).params) << f.key;
    out[f.key] = {f.params["alpha_s"].get<double>(), f.factory_release};
  }
  return out;
}

TEST_F(StoreTest, AStoreSeededByAnotherReleaseIsBroughtToThisOneAndTheUsersFitsStay) {
  StoreOptions old_release;
  old_release.seed_fits = Release(0xaaaa, {{"k1", 1e-5}, {"k2", 2e-5}, {"k5", 5e-5}});
  {
    auto store = Store::Open(path_, old_release);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    // The user's own fits: one replaces the factory's k2, one has a key of its own.
    ASSERT_TRUE((*store)->ReplaceFit(MakeFit("e2e", "k2", 2.5e-5)).ok());
    ASSERT_TRUE((*store)->ReplaceFit(MakeFit("e2e", "k3", 3e-5)).ok());
  }
  int64_t before = 0;
  {
    auto store = Store::Open(path_, old_release);  // the same release again: nothing to do
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    before = *(*store)->CalibrationVersion();
  }
  StoreOptions new_release;
  new_release.seed_fits = Release(0xbbbb, {{"k1", 1.1e-5}, {"k2", 2.2e-5}, {"k4", 4.4e-5}});
  auto store = Store::Open(path_, new_release);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  using Entry = std::pair<double, uint64_t>;
  const std::map<std::string, Entry> expect = {
      {"k1", {1.1e-5, 0xbbbb}},  // the factory's, brought to the new release
      {"k2", {2.5e-5, 0}},       // the user's fit stays active over the factory's
      {"k3", {3e-5, 0}},         // the user's own key stays
      {"k4", {4.4e-5, 0xbbbb}},  // a key new in this release is added
  };                             // k5, in the old release only, is retired
  EXPECT_EQ(ActiveByKey(**store), expect);
  const int64_t after = *(*store)->CalibrationVersion();
  EXPECT_GT(after, before);
  store->reset();
  // Opened again with the same release, nothing changes.
  auto again = Store::Open(path_, new_release);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ActiveByKey(**again), expect);
  EXPECT_EQ(*(*again)->CalibrationVersion(), after);
  // The measurements and the retired fits' rows are kept: history is not rewritten.
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM fits WHERE key = 'k5' AND active = 0"), 1);
}

TEST_F(StoreTest, AStoreWhoseFitsCarryNoReleaseIsLeftAsItIs) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->ReplaceFit(MakeFit("e2e", "k1", 1e-5)).ok());
  }
  StoreOptions release;
  release.seed_fits = Release(0xbbbb, {{"k1", 1.1e-5}, {"k4", 4.4e-5}});
  auto store = Store::Open(path_, release);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  using Entry = std::pair<double, uint64_t>;
  EXPECT_EQ(ActiveByKey(**store), (std::map<std::string, Entry>{{"k1", {1e-5, 0}}}));
}

// Deciding whether a store needs the shipped release reads no fit's params: a damaged one
// does not stop the store from opening (the commands that read it name it).
TEST_F(StoreTest, ADamagedFitDoesNotStopAStoreOfAnEarlierReleaseFromOpening) {
  StoreOptions old_release, new_release;
  old_release.seed_fits = Release(0xaaaa, {{"k1", 1e-5}});
  new_release.seed_fits = Release(0xbbbb, {{"k1", 1.1e-5}});
  {
    auto store = Store::Open(path_, old_release);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->ReplaceFit(MakeFit("e2e", "k3", 3e-5)).ok());
  }
  {
    RawDb raw(path_);
    raw.Exec("UPDATE fits SET params = '{not json' WHERE key = 'k3'");
  }
  auto store = Store::Open(path_, new_release);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM fits WHERE key = 'k1' AND active = 1 AND params LIKE '%1.1e-05%'"), 1);
  auto fits = (*store)->ActiveFits();
  ASSERT_FALSE(fits.ok());
  EXPECT_TRUE(Contains(fits.status().message(), "params")) << fits.status().ToString();
}

// Every rank of an MPI job opens a store seeded by an earlier release at once: each opens it,
// and the release is brought in once.
TEST_F(StoreTest, ProcessesOpeningAStoreOfAnEarlierReleaseAtOnceBringItInOnce) {
  StoreOptions old_release, new_release;
  for (int i = 0; i < 14; ++i) {
    old_release.seed_fits.push_back(Release(0xaaaa, {{"seed/" + std::to_string(i), 1e-5}}).front());
    new_release.seed_fits.push_back(Release(0xbbbb, {{"seed/" + std::to_string(i), 2e-5}}).front());
  }
  for (int trial = 0; trial < 8; ++trial) {
    const std::string path = (dir_ / ("release-" + std::to_string(trial) + ".db")).string();
    ASSERT_TRUE(Store::Open(path, old_release).ok());
    for (int status : OpenAtOnce(path, new_release, 3)) EXPECT_EQ(status, 0) << "trial " << trial;
    RawDb raw(path);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM fits"), 28) << "trial " << trial;
    EXPECT_EQ(raw.Int("SELECT count(*) FROM fits JOIN meta ON meta.name = 'factory_release/' || fits.id "
                      "WHERE fits.active = 1 AND meta.value = 48059"),  // 0xbbbb
              14)
        << "trial " << trial;
  }
}

TEST_F(StoreTest, DamagedFileIsRefusedNamingThePath) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    std::vector<Measurement> many;
    many.reserve(2000);
    for (int i = 0; i < 2000; ++i) many.push_back(MakeMeasurement("gemm-" + std::to_string(i)));
    ASSERT_TRUE(store->AddMeasurements(many).ok());
  }
  RemoveSideFiles();
  ASSERT_GT(fs::file_size(path_), 4u * 4096);
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekp(4096);
    const std::string junk(4096, '\xAB');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    ASSERT_TRUE(f.good());
  }
  StatusOr<std::unique_ptr<Store>> damaged = Store::Open(path_);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.status().code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(damaged.status().message(), path_)) << damaged.status().message();
  EXPECT_TRUE(Contains(damaged.status().message(), "move it aside")) << damaged.status().message();
}

TEST_F(StoreTest, GarbageFileIsRefusedNamingThePath) {
  {
    std::ofstream f(path_);
    for (int i = 0; i < 200; ++i) f << "this is a text file, not a database\n";
  }
  StatusOr<std::unique_ptr<Store>> garbage = Store::Open(path_);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(garbage.status().message(), path_)) << garbage.status().message();
  // Refusing did not touch the file.
  std::ifstream in(path_);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "this is a text file, not a database");
}

TEST_F(StoreTest, ForeignDatabaseIsRefused) {
  {
    RawDb raw(path_);
    raw.Exec("CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('x');");
  }
  StatusOr<std::unique_ptr<Store>> foreign = Store::Open(path_);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(foreign.status().message(), "not a ditune")) << foreign.status().message();
  EXPECT_TRUE(Contains(foreign.status().message(), path_)) << foreign.status().message();
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), 0);  // untouched
}

TEST_F(StoreTest, NewerSchemaIsRefused) {
  {
    RawDb raw(path_);
    raw.Exec("CREATE TABLE measurements (id INTEGER PRIMARY KEY); PRAGMA user_version = 99;");
  }
  StatusOr<std::unique_ptr<Store>> newer = Store::Open(path_);
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(newer.status().message(), "newer ditune")) << newer.status().message();
  EXPECT_TRUE(Contains(newer.status().message(), path_)) << newer.status().message();
}

TEST_F(StoreTest, MigratesVersionOneForward) {
  {
    RawDb raw(path_);
    raw.Exec(R"sql(
      CREATE TABLE measurements (
        id INTEGER PRIMARY KEY, source TEXT NOT NULL, kind TEXT NOT NULL, op TEXT NOT NULL,
        backend TEXT NOT NULL, device TEXT NOT NULL, params TEXT NOT NULL,
        ranks INTEGER NOT NULL, link TEXT NOT NULL, bytes REAL NOT NULL, flops REAL NOT NULL,
        median_s REAL NOT NULL, p10_s REAL NOT NULL, p90_s REAL NOT NULL,
        samples INTEGER NOT NULL, run_id TEXT NOT NULL, unix_time INTEGER NOT NULL);
      CREATE INDEX measurements_kind_op_device ON measurements(kind, op, device);
      CREATE TABLE fits (
        id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, params TEXT NOT NULL,
        points INTEGER NOT NULL, mape REAL NOT NULL, measurement_ids TEXT NOT NULL,
        active INTEGER NOT NULL CHECK (active IN (0, 1)), unix_time INTEGER NOT NULL);
      CREATE UNIQUE INDEX fits_one_active ON fits(kind, key) WHERE active = 1;
      CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, plan TEXT NOT NULL, predicted_s REAL NOT NULL,
        measured_s REAL NOT NULL, per_rank_s TEXT NOT NULL, unix_time INTEGER NOT NULL);
      CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
      INSERT INTO meta(name, value) VALUES ('calibration_version', 7);
      INSERT INTO measurements VALUES (1, 'import', 'step', 'dit', 'xdit', 'l40s-48gb',
        '{"height": 1024}', 4, 'pcie4', 0, 0, 2.5, 2.25, 2.75, 5, 'old-run', 1600000000);
      PRAGMA user_version = 1;
    )sql");
    EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "delete");
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.Int("PRAGMA user_version"), Store::kSchemaVersion);
    EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "wal");
  }
  StatusOr<std::vector<Measurement>> all = store->Measurements();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 1u);
  const Measurement& m = (*all)[0];
  EXPECT_EQ(m.kind, MeasurementKind::kStep);
  EXPECT_EQ(m.op, "dit");
  EXPECT_EQ(m.params, nlohmann::json({{"height", 1024}}));
  EXPECT_EQ(m.ranks, 4);
  EXPECT_EQ(m.median.value(), 2.5);
  EXPECT_EQ(m.run_id, "old-run");

  StatusOr<int64_t> v = store->CalibrationVersion();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  ASSERT_TRUE(store->PutCachedPlan("k", *v, {{"config", "ring=2"}}).ok());
  auto hit = store->GetCachedPlan("k", *v);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((**hit)["config"], "ring=2");

  // Opening again is a no-op.
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Measurements()->size(), 1u);
}

TEST_F(StoreTest, DamagedSchemaOfKnownVersionIsRefused) {
  {
    RawDb raw(path_);
    raw.Exec("CREATE TABLE measurements (id INTEGER PRIMARY KEY); PRAGMA user_version = 1;");
  }
  StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(store.status().message(), "fits")) << store.status().message();
}

TEST_F(StoreTest, OpenCreatesMissingDirectories) {
  path_ = (dir_ / "a" / "b" / "c" / "ditune.db").string();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->path(), path_);
  EXPECT_TRUE(fs::exists(path_));

  // A directory that cannot be made is bad input (the user's path), named with the reason.
  { std::ofstream(dir_ / "plain-file") << "x"; }
  StatusOr<std::unique_ptr<Store>> blocked =
      Store::Open((dir_ / "plain-file" / "sub" / "ditune.db").string());
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(blocked.status().message(), "plain-file")) << blocked.status().message();
  EXPECT_TRUE(Contains(blocked.status().message(), "Not a directory")) << blocked.status().message();

  // A directory where the file should be.
  fs::create_directories(dir_ / "is-a-dir");
  StatusOr<std::unique_ptr<Store>> dir = Store::Open((dir_ / "is-a-dir").string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), Status::Code::kInvalidArgument) << dir.status().ToString();
  EXPECT_TRUE(Contains(dir.status().message(), "is a directory")) << dir.status().message();
}

// A store edited by hand that lost a column is refused as damaged before any query meets the
// gap, and the file is left as it was.
TEST_F(StoreTest, AMissingColumnIsDamageNotAnInternalError) {
  ASSERT_NE(OpenStore(), nullptr);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "ALTER TABLE measurements DROP COLUMN median_s", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const auto before = fs::file_size(path_);
  StatusOr<std::unique_ptr<Store>> store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kCorruption);
  EXPECT_TRUE(Contains(store.status().message(), "table 'measurements' has no column 'median_s'"))
      << store.status().message();
  EXPECT_EQ(fs::file_size(path_), before);
}

// A read-only store serves every read and refuses every write by name, leaving the file as
// it was; it is never created and never migrated.
TEST_F(StoreTest, ReadOnlyStoreReadsAndRefusesWritesByName) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->AddMeasurements({MakeMeasurement("gemm")}).ok());
    ASSERT_TRUE(store->ReplaceFits({MakeFit("compute", "h100-sxm5-80gb/cuda/gemm", 1e-6)}).ok());
  }
  const auto size = fs::file_size(path_);
  StoreOptions ro;
  ro.read_only = true;
  auto opened = Store::Open(path_, ro);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Store& store = **opened;
  EXPECT_TRUE(store.read_only());
  EXPECT_EQ(store.Measurements()->size(), 1u);
  EXPECT_EQ(store.ActiveFits()->size(), 1u);
  EXPECT_TRUE(store.CalibrationVersion().ok());
  EXPECT_TRUE(store.Runs().ok());
  RunRecord run;
  run.run_id = "run-ro";
  for (const Status& st : {store.AddMeasurements({MakeMeasurement("attention")}).status(),
                           store.ReplaceFits({MakeFit("compute", "h100-sxm5-80gb/cuda/attention", 2e-6)}),
                           store.ReplaceFit(MakeFit("compute", "h100-sxm5-80gb/cuda/attention", 2e-6)).status(),
                           store.AddRun(run), store.PutCachedPlan("k", 1, nlohmann::json::object())}) {
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(path_ + " is open read-only"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("give a writable store with --db or DITUNE_DB"), std::string::npos);
  }
  opened->reset();
  auto again = OpenStore();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->Measurements()->size(), 1u);
  EXPECT_EQ(again->ActiveFits()->size(), 1u);
  again.reset();
  EXPECT_EQ(fs::file_size(path_), size);

  const std::string missing = (dir_ / "missing.db").string();
  auto none = Store::Open(missing, ro);
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(none.status().message().find("does not exist, and a read-only store is never created"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(StoreTest, ReadOnlyStoreOfAnOlderSchemaIsRefusedNotMigrated) {
  {
    RawDb raw(path_);
    raw.Exec(R"sql(
      CREATE TABLE measurements (id INTEGER PRIMARY KEY);
      CREATE TABLE fits (id INTEGER PRIMARY KEY);
      CREATE TABLE runs (run_id TEXT PRIMARY KEY);
      CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
      PRAGMA user_version = 1;
    )sql");
  }
  StoreOptions ro;
  ro.read_only = true;
  auto store = Store::Open(path_, ro);
  EXPECT_EQ(store.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(store.status().message().find("schema version 1 and this ditune reads version"), std::string::npos)
      << store.status().message();
  RawDb raw(path_);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), 1);  // untouched
}

TEST_F(StoreTest, TheEnvironmentOpensStoresReadOnly) {
  const char* before = std::getenv("DITUNE_DB_READ_ONLY");
  const std::optional<std::string> saved = before != nullptr ? std::optional<std::string>(before) : std::nullopt;
  { ASSERT_NE(OpenStore(), nullptr); }
  setenv("DITUNE_DB_READ_ONLY", "1", 1);
  auto ro = Store::Open(path_);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_TRUE((*ro)->read_only());
  auto scratch = Store::Open(":memory:");  // a process's own scratch store stays writable
  ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
  EXPECT_FALSE((*scratch)->read_only());
  setenv("DITUNE_DB_READ_ONLY", "yes", 1);
  auto bad = Store::Open(path_);
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("DITUNE_DB_READ_ONLY='yes': valid: 0, 1"), std::string::npos);
  setenv("DITUNE_DB_READ_ONLY", "0", 1);
  auto rw = Store::Open(path_);
  ASSERT_TRUE(rw.ok());
  EXPECT_FALSE((*rw)->read_only());
  if (saved) {
    setenv("DITUNE_DB_READ_ONLY", saved->c_str(), 1);
  } else {
    unsetenv("DITUNE_DB_READ_ONLY");
  }
}

TEST(StoreDefaultPathTest, EnvironmentDecides) {
  auto save = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
  };
  auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v) {
      setenv(name, v->c_str(), 1);
    } else {
      unsetenv(name);
    }
  };
  const auto db = save("DITUNE_DB");
  const auto home = save("HOME");

  setenv("DITUNE_DB", "/somewhere/calib.db", 1);
  EXPECT_EQ(Store::DefaultPath(), "/somewhere/calib.db");
  setenv("DITUNE_DB", "", 1);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(Store::DefaultPath(), "/home/someone/.local/share/ditune/ditune.db");
  unsetenv("DITUNE_DB");
  EXPECT_EQ(Store::DefaultPath(), "/home/someone/.local/share/ditune/ditune.db");

  restore("DITUNE_DB", db);
  restore("HOME", home);
}

}  // namespace
}  // namespace ditune
