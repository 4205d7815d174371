// The calibration wing: the refit of a whole store, and the engine's scale fitted on some
// models predicting the others.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "calibration/predict.h"
#include "calibration/recalibrate.h"
#include "calibration/suite.h"
#include "calibration/validate_suite.h"
#include "core/catalog.h"
#include "store/store.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

// Collectives timed between host-memory ranks never become a GPU link's curves, even where a
// store holds them under that link; over shared memory they fit as before.
TEST(RecalibrateTest, HostTimingsNeverPriceAGpuLink) {
  auto store = std::move(Store::Open(":memory:")).value();
  std::vector<Measurement> ms;
  for (const char* link : {"nvlink4", "shm"}) {
    for (double bytes : {1e4, 1e5, 1e6, 1e7, 1e8}) {
      Measurement m;
      m.source = MeasurementSource::kMicrobench;
      m.kind = MeasurementKind::kCollective;
      m.op = "all_to_all";
      m.backend = "mpi";
      m.device = "cpu";
      m.ranks = 2;
      m.link = link;
      m.bytes = Bytes(bytes);
      m.median = m.p10 = m.p90 = Seconds(2e-6 + bytes / 8e9);
      m.samples = 5;
      ms.push_back(m);
    }
  }
  ASSERT_TRUE(store->AddMeasurements(ms).ok());
  std::vector<std::string> skipped;
  auto fits = RecalibrateAll(store.get(), Cat(), &skipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  bool shm = false;
  for (const auto& f : *fits) {
    EXPECT_EQ(f.key.find("nvlink4"), std::string::npos) << f.key;
    shm |= f.kind == "comm" && f.key.starts_with("all_to_all/shm");
  }
  EXPECT_TRUE(shm);
  int named = 0;
  for (const auto& s : skipped) named += s.find("host-memory ranks measure shared memory, not nvlink4") != std::string::npos;
  EXPECT_EQ(named, 5);
}

// Runs of the engine on some models calibrate its scale for every model on that device and
// backend; the eager framework's scales and the engine's never mix.
TEST(PredictTest, EngineRunsOnSomeModelsCalibrateTheOthers) {
  const Cluster host = *ResolveCluster({"cpu", 1}, Cat());
  std::vector<Fit> fits;
  for (auto [op, rate] : std::vector<std::pair<const char*, double>>{{"gemm", 3e10}, {"attention", 1e10},
                                                                     {"elementwise", 4e9}}) {
    Fit f;
    f.kind = kFitKindCompute;
    f.key = std::string("cpu/ref/") + op;
    f.params = PiecewiseLatencyModel({{1, 1e15, 2e-6, rate}}).ToJson();
    f.active = true;
    fits.push_back(f);
  }
  auto dit = [&](const std::string& model, int size, const std::vector<Fit>& with) {
    Workload w{model, size, size, 1, 3, 1, OutputType::kLatent};
    auto r = SimulateEngineRun(**Cat().Model(model), w, ParallelConfig{}, host, with, "ref");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->dit.value() : 0.0;
  };
  // Recorded runs of three models, 30% slower than the per-op curves say; one run on the cpu
  // kernels, which calibrates their own scale; one two-rank run, which calibrates two-rank
  // plans.
  std::vector<Measurement> runs;
  auto run = [&](const std::string& model, int size, double seconds, const std::string& backend, int ranks,
                 const std::string& config = "") {
    Measurement m;
    m.id = static_cast<int64_t>(runs.size() + 1);
    m.source = MeasurementSource::kExecutor;
    m.kind = MeasurementKind::kE2e;
    m.op = "dit";
    m.backend = backend;
    m.device = "cpu";
    m.ranks = ranks;
    m.params = {{"model", model}, {"height", size}, {"width", size}, {"frames", 1}, {"steps", 3},
                {"batch", 1}, {"config", config}};
    m.median = m.p10 = m.p90 = Seconds(seconds);
    runs.push_back(m);
  };
  run("tiny-pixart", 256, 1.3 * dit("tiny-pixart", 256, fits), "ref", 1);
  run("tiny-flux", 128, 1.3 * dit("tiny-flux", 128, fits), "ref", 1);
  run("tiny-sd3", 128, 1.3 * dit("tiny-sd3", 128, fits), "ref", 1);
  Workload w_cpu{"tiny-sd3", 256, 256, 1, 3, 1, OutputType::kLatent};
  const double cpu_dit = SimulateEngineRun(**Cat().Model("tiny-sd3"), w_cpu, ParallelConfig{}, host, fits, "cpu")->dit.value();
  run("tiny-sd3", 256, 1.5 * cpu_dit, "cpu", 1);
  const Cluster pair = *ResolveCluster({"cpu", 2}, Cat());
  const Workload w2{"tiny-sd3", 256, 256, 1, 3, 1, OutputType::kLatent};
  const double two_rank = SimulateEngineRun(**Cat().Model("tiny-sd3"), w2, *ParseParallelConfig("ulysses=2"), pair,
                                            fits, "ref")
                              ->dit.value();
  run("tiny-sd3", 256, 2.0 * two_rank, "ref", 2, "ulysses=2");
  std::vector<std::string> skipped;
  auto all_scales = *FitEngineScales(runs, Cat(), fits, &skipped);
  EXPECT_TRUE(skipped.empty()) << skipped.front();
  ASSERT_EQ(all_scales.size(), 3u);
  // The cpu kernels' own scale, from their one run (priced by the catalog's CPU figures).
  EXPECT_EQ(all_scales[0].key, "cpu/cpu/engine");
  EXPECT_NEAR(all_scales[0].params["compute_scale"].get<double>(), 1.5, 1e-9);
  EXPECT_EQ(all_scales[0].measurement_ids, (std::vector<int64_t>{4}));
  const std::vector<Fit> scales(all_scales.begin() + 1, all_scales.end());
  EXPECT_EQ(scales[0].key, EngineFitKey("cpu", "ref"));
  EXPECT_EQ(scales[0].key, "cpu/ref/engine");
  EXPECT_NEAR(scales[0].params["compute_scale"].get<double>(), 1.3, 1e-9);
  EXPECT_EQ(scales[0].points, 3);
  EXPECT_EQ(scales[0].measurement_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(scales[1].key, EngineFitKey("cpu", "ref", 2));
  EXPECT_EQ(scales[1].key, "cpu/ref/engine@2");
  EXPECT_NEAR(scales[1].params["compute_scale"].get<double>(), 2.0, 1e-9);
  EXPECT_EQ(scales[1].measurement_ids, (std::vector<int64_t>{5}));
  {
    // Two-rank plans take the two-rank scale; one device and sizes without one of their own
    // take the one-device scale.
    const std::vector<Fit> both = {scales[0], scales[1]};
    EXPECT_EQ((*ModelsFor(pair, "tiny-sd3", both, "ref", Runtime::kEngine)).compute.scale(), 2.0);
    EXPECT_EQ((*ModelsFor(host, "tiny-sd3", both, "ref", Runtime::kEngine)).compute.scale(), 1.3);
    const Cluster four = *ResolveCluster({"cpu", 4}, Cat());
    EXPECT_EQ((*ModelsFor(four, "tiny-sd3", both, "ref", Runtime::kEngine)).compute.scale(), 1.3);
  }
  // A model with no runs of its own is predicted with the scale (the host has no launch
  // overhead, so every time scales).
  std::vector<Fit> with = fits;
  with.push_back(scales[0]);
  EXPECT_NEAR(dit("tiny-video", 256, with), 1.3 * dit("tiny-video", 256, fits), 1e-9);
  // The eager framework's models ignore the engine's scale, and the engine ignores a per-model
  // framework scale.
  auto eager = std::move(ModelsFor(host, "tiny-video", with, "ref", Runtime::kEager)).value();
  EXPECT_EQ(eager.compute.scale(), 1.0);
  Fit framework;
  framework.kind = kFitKindE2e;
  framework.key = E2eFitKey("cpu", "tiny-video");
  framework.params = {{"compute_scale", 2.0}};
  framework.active = true;
  with.push_back(framework);
  EXPECT_EQ((*ModelsFor(host, "tiny-video", with, "ref", Runtime::kEngine)).compute.scale(), 1.3);
  EXPECT_EQ((*ModelsFor(host, "tiny-video", with, "ref", Runtime::kEager)).compute.scale(), 2.0);
  // Two-rank cuda runs calibrate two-GPU plans over NCCL only (over MPI ranks may share a GPU).
  {
    auto mpi = runs.back();
    mpi.backend = "cuda";
    mpi.device = "h100-sxm5-80gb";
    mpi.params["comm"] = "mpi";
    auto nccl = mpi;
    nccl.params["comm"] = "nccl";
    std::vector<std::string> why;
    auto gpu = *FitEngineScales({mpi, nccl}, Cat(), {}, &why);
    ASSERT_EQ(gpu.size(), 1u);
    EXPECT_EQ(gpu[0].key, "h100-sxm5-80gb/cuda/engine@2");
    EXPECT_EQ(gpu[0].points, 1);
    ASSERT_EQ(why.size(), 1u);
    EXPECT_NE(why[0].find("over MPI"), std::string::npos) << why[0];
  }
  // A run naming a model the catalog lacks is skipped with the reason, not fatal.
  run("no-such-model", 256, 1.0, "ref", 1);
  skipped.clear();
  EXPECT_EQ((*FitEngineScales(runs, Cat(), fits, &skipped)).size(), 3u);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("no-such-model"), std::string::npos) << skipped[0];
}

// Who published a row is its source's repository owner, or its first word; suites read
// together keep each row's file, and a group may not span two files.
TEST(SuiteTest, RowsKnowTheirPublisherAndFileAndAGroupIsOneFiles) {
  SuiteRow r;
  r.source = "github:Wan-Video/Wan2.2 README.md 'Computational Efficiency'";
  EXPECT_EQ(PublisherOf(r), "Wan-Video");
  r.source = "github:Wan-Video/Wan2.1 README.md";
  EXPECT_EQ(PublisherOf(r), "Wan-Video");
  r.source = "xDiT docs/performance/flux.md";
  EXPECT_EQ(PublisherOf(r), "xDiT");
  r.source = "  measured/ours.csv";
  EXPECT_EQ(PublisherOf(r), "measured");
  r.source = "";
  EXPECT_EQ(PublisherOf(r), "unknown");
  r.source = "github:";
  EXPECT_EQ(PublisherOf(r), "unknown");

  const std::string dir = ::testing::TempDir() + "/suite-files";
  std::filesystem::create_directories(dir);
  const std::string header =
      "group,model,height,width,frames,steps,scope,gpu,gpus,nodes,gpus_per_node,intra,inter,config,role,latency_s,"
      "source\n";
  auto write = [&](const std::string& name, const std::string& group) {
    std::ofstream(dir + "/" + name) << header << group
                                    << ",flux.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,1,1,8,nvlink4,none,,calibrate,"
                                       "6.71,xDiT docs\n";
  };
  write("a.csv", "one");
  write("b.csv", "two");
  write("c.csv", "one");
  auto both = LoadSuiteFiles({dir + "/a.csv", dir + "/b.csv"}, Cat());
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ(RowPlace((*both)[1]), "b.csv line 2");
  auto clash = LoadSuiteFiles({dir + "/a.csv", dir + "/c.csv"}, Cat());
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("group 'one' is in"), std::string::npos) << clash.status().message();
  EXPECT_FALSE(LoadSuiteFiles({}, Cat()).ok());
  EXPECT_FALSE(LoadSuiteFiles({dir + "/a.csv", dir + "/missing.csv"}, Cat()).ok());
}

}  // namespace
}  // namespace ditune

namespace ditune {
namespace {

// A suite names its runtime and peak memory in optional columns, in any order; a row ditune
// cannot price (a runtime it does not model, a model the catalog lacks, a configuration the
// rules refuse, a group whose calibrate row is refused) is reported as refused with the reason,
// and the other rows are predicted.
TEST(SuiteTest, RowsThatCannotBePricedAreRefusedAndTheRestPredicted) {
  const std::string suite =
      "source,group,model,height,width,frames,steps,scope,gpu,gpus,nodes,gpus_per_node,intra,inter,config,role,"
      "latency_s,runtime,memory_gb\n"
      "s,f,flux.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,1,1,8,nvlink4,none,,calibrate,6.71,,\n"
      "s,f,flux.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,2,1,8,nvlink4,none,ulysses=2,predict,4.38,xdit,41.85 GiB/GPU\n"
      "s,f,flux.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,5,1,8,nvlink4,none,ulysses=5,predict,3.0,,\n"
      "s,f,flux.1-dev,1024,1024,1,28,e2e,h100-sxm5-80gb,2,1,8,nvlink4,none,ulysses=2,predict,4.0,torchtitan,\n"
      "s,w,wan2.1-14b,720,1280,81,50,e2e,h100-sxm5-80gb,1,1,8,nvlink4,none,,calibrate,900,wan-generate,\n"
      "s,w,wan2.1-14b,720,1280,81,50,e2e,h100-sxm5-80gb,2,1,8,nvlink4,none,ulysses=2,predict,450,,\n"
      "s,u,acme/Imaginary-DiT,768,768,129,50,e2e,h100-sxm5-80gb,1,1,8,nvlink4,none,,calibrate,900,,\n"
      "s,g,sd3-medium,1024,1024,1,28,e2e,h100-sxm5-80gb,1,1,8,nvlink4,none,,calibrate,3.0,torchtitan,\n"
      "s,g,sd3-medium,1024,1024,1,28,e2e,h100-sxm5-80gb,2,1,8,nvlink4,none,cfg=2,predict,1.6,,\n";
  auto rows = ParseSuite(suite, "t.csv", Cat());
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 9u);
  EXPECT_EQ((*rows)[1].runtime, "xdit");
  ASSERT_TRUE((*rows)[1].memory_gb.has_value());
  EXPECT_NEAR(*(*rows)[1].memory_gb, 41.85 * 1.073741824, 1e-9);
  EXPECT_NE((*rows)[3].refused.find("unknown runtime 'torchtitan'"), std::string::npos) << (*rows)[3].refused;
  EXPECT_TRUE((*rows)[4].refused.empty()) << (*rows)[4].refused;  // Wan's generate.py is priced
  EXPECT_EQ((*rows)[4].runtime, "wan-generate");
  EXPECT_NE((*rows)[6].refused.find("unknown model"), std::string::npos);
  std::vector<std::string> left_out;
  // Out: the unknown runtimes, the unknown model, and the group whose calibrate row is out.
  EXPECT_EQ(PricedRows(*rows, &left_out).size(), 5u);
  EXPECT_EQ(left_out.size(), 4u);

  auto report = PredictSuite(*rows, Cat(), {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->summary.refused, 5);
  EXPECT_EQ(report->summary.rows, 2);  // the two predict rows that were predicted
  ASSERT_EQ(report->rows.size(), 9u);
  EXPECT_TRUE(report->rows[1].refused.empty());
  EXPECT_TRUE(report->rows[1].predicted_s.has_value());
  EXPECT_NE(report->rows[2].refused.find("heads-divisible-by-ulysses-x-tp"), std::string::npos);
  EXPECT_TRUE(report->rows[5].refused.empty()) << report->rows[5].refused;
  EXPECT_TRUE(report->rows[5].predicted_s.has_value());
  EXPECT_NE(report->rows[8].refused.find("calibrate row (line 9) is refused"), std::string::npos)
      << report->rows[8].refused;

  // What stays an error: a malformed field, an unknown column.
  EXPECT_FALSE(ParseSuite("group,model\n", "t.csv", Cat()).ok());
  const std::string bad_memory = std::string(suite).replace(suite.find("41.85 GiB/GPU"), 13, "lots");
  EXPECT_FALSE(ParseSuite(bad_memory, "t.csv", Cat()).ok());
}

}  // namespace
}  // namespace ditune
