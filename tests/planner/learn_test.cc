// Learning the global constants on a suite, leave-one-group-out, and the factory
// calibration that ships from it.
#include "planner/learn.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "costmodels/calibration.h"
#include "planner/factory.h"
#include "planner/measured_runs.h"
#include "simulator/simulate.h"
#include "simulator/stage_costs.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = new Catalog(*Catalog::Load(DITUNE_TEST_DATA_DIR));
  return *c;
}

std::vector<SuiteRow> Suite() {
  auto rows = LoadSuiteFile(std::string(DITUNE_TEST_DATA_DIR) + "/validation/xdit-published-dev.csv", Cat());
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  return *rows;
}

std::vector<SuiteRow> Groups(const std::vector<SuiteRow>& all, const std::vector<std::string>& groups) {
  std::vector<SuiteRow> out;
  for (const auto& r : all) {
    if (std::find(groups.begin(), groups.end(), r.group) != groups.end()) out.push_back(r);
  }
  return out;
}

TEST(LearnTest, LossIsTheMeanAbsoluteLogRatio) {
  SuiteRow a, b, oom;
  a.role = b.role = oom.role = SuiteRole::kPredict;
  a.latency_s = 2.0;
  b.latency_s = 1.0;
  SuiteReport r;
  r.rows = {{&a, "", 4.0, std::nullopt, true}, {&b, "", 0.5, std::nullopt, true}, {&oom, "", 1.0, std::nullopt, true}};
  // ln 2 twice, and a published OOM predicted to fit counts 1.
  EXPECT_NEAR(SuiteLoss(r), (2 * std::log(2.0) + 1.0) / 3, 1e-12);
}

TEST(LearnTest, LearningLowersTheLossAndIsDeterministic) {
  const auto rows = Groups(Suite(), {"flux-dev-1024-h100", "pixart-1024-8xl40-methods", "consisid-h100"});
  LearnOptions opt;
  opt.steps = {2.0, 1.41};
  auto a = LearnMechanisms(rows, Cat(), {}, opt);
  auto b = LearnMechanisms(rows, Cat(), {}, opt);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok());
  EXPECT_LT(a->loss_after, a->loss_before);
  EXPECT_EQ(a->mechanisms, b->mechanisms);
  EXPECT_EQ(a->loss_after, b->loss_after);
  for (const auto& p : MechanismParams()) {  // inside the physical bounds
    EXPECT_GE(a->mechanisms.*p.member, p.lo) << p.name;
    EXPECT_LE(a->mechanisms.*p.member, p.hi) << p.name;
  }
}

// The shipped factory calibration is what `calibrate learn` makes of the shipped suite.
TEST(LearnTest, TheShippedFactoryCalibrationIsReproducedFromTheSuite) {
  std::ifstream in(std::string(DITUNE_TEST_DATA_DIR) + "/" + kFactoryCalibrationPath);
  ASSERT_TRUE(in) << "data/calibration/factory.json is missing";
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json shipped = nlohmann::json::parse(text.str());
  const auto rows = Suite();
  auto learned = LearnMechanisms(rows, Cat(), {});
  ASSERT_TRUE(learned.ok()) << learned.status().ToString();
  const nlohmann::json made = FactoryCalibrationJson(*learned, shipped.value("suite", ""), rows);
  for (const auto& p : MechanismParams()) {
    EXPECT_NEAR(made["mechanisms"][p.name].get<double>(), shipped["mechanisms"][p.name].get<double>(),
                1e-9 * std::abs(shipped["mechanisms"][p.name].get<double>()))
        << p.name << ": re-run `ditune calibrate learn --suite data/validation/xdit-published-dev.csv --out "
                     "data/calibration/factory.json`";
  }
  ASSERT_EQ(made["scales"].size(), shipped["scales"].size());
  for (size_t i = 0; i < made["scales"].size(); ++i) {
    EXPECT_EQ(made["scales"][i]["key"], shipped["scales"][i]["key"]);
    EXPECT_NEAR(made["scales"][i]["compute_scale"].get<double>(), shipped["scales"][i]["compute_scale"].get<double>(),
                1e-9);
  }
  EXPECT_EQ(made["after"]["oom_agree"], shipped["after"]["oom_agree"]);
  // What it seeds: the constants and one scale per (GPU, model), each saying where it came from.
  auto fits = FactoryFits(shipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 1 + shipped["scales"].size());
  auto mech = MechanismsIn(*fits);
  ASSERT_TRUE(mech.ok());
  ASSERT_TRUE(mech->has_value());
  EXPECT_EQ(**mech, learned->mechanisms);
  for (size_t i = 1; i < fits->size(); ++i) EXPECT_NE(FactoryOrigin((*fits)[i]).find("published: "), std::string::npos);
}

TEST(LearnTest, FactoryDocumentErrorsNameTheField) {
  EXPECT_FALSE(FactoryFits(nlohmann::json::object()).ok());
  auto bad = FactoryFits({{"mechanisms", nlohmann::json::object()}, {"scales", {{{"key", "x/y"}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("compute_scale"), std::string::npos);
}

// Cross-validation never sees the held-out group: poisoning its published latencies changes
// nothing in its own predictions.
TEST(LearnTest, CrossValidationNeverSeesTheHeldOutGroup) {
  const auto rows = Groups(Suite(), {"flux-dev-1024-h100", "pixart-1024-8xl40-methods", "consisid-h100"});
  auto poisoned = rows;
  for (auto& r : poisoned) {
    if (r.group == "consisid-h100" && r.role == SuiteRole::kPredict && r.latency_s) *r.latency_s *= 7;
  }
  LearnOptions opt;
  opt.steps = {2.0};
  auto clean = CrossValidate(rows, Cat(), {}, opt);
  auto bad = CrossValidate(poisoned, Cat(), {}, opt);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(clean->rows.size(), bad->rows.size());
  int held = 0;
  for (size_t i = 0; i < clean->rows.size(); ++i) {
    if (clean->rows[i].group != "consisid-h100") continue;
    ++held;
    EXPECT_EQ(clean->rows[i].predicted_s, bad->rows[i].predicted_s) << "line " << clean->rows[i].line;
  }
  EXPECT_GT(held, 5);
  // The poison does reach the other groups' learning, which sees the poisoned rows.
  bool moved = false;
  for (size_t g = 0; g < clean->groups.size(); ++g) {
    if (clean->groups[g].group != "consisid-h100") moved |= !(clean->groups[g].learned == bad->groups[g].learned);
  }
  EXPECT_TRUE(moved);
  EXPECT_EQ(clean->groups.size(), 3u);
}

// A PipeFusion warm-up step costs the learned fraction of a synchronous step.
TEST(LearnTest, PipeFusionWarmupCostsItsExposedFraction) {
  const ModelSpec& m = **Cat().Model("pixart-alpha");
  const Cluster cluster = *ResolveCluster({"a100-sxm4-80gb", 4}, Cat());
  Workload w{m.id, 1024, 1024, 1, 20, 1, OutputType::kLatent};
  ParallelConfig c;
  c.pipefusion = 4;
  c.patches = 4;
  c.warmup = 1;
  auto warmup = [&](double fraction) {
    Mechanisms mech;
    mech.pipefusion_warmup = fraction;
    auto models = MakeCostModels(cluster, {MechanismsFit(mech)});
    EXPECT_TRUE(models.ok());
    auto r = Simulate({&m, w, &cluster, c, &models->compute, models->comm.get()});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r->warmup.value();
  };
  EXPECT_NEAR(warmup(0.5) / warmup(1.0), 0.5, 0.05);
}

// Latte's temporal blocks attend over one position's frames, whole on every rank: no
// all-to-all and no ring for them; the spatial blocks exchange as usual.
TEST(LearnTest, TemporalBlocksNeedNoSequenceExchange) {
  const ModelSpec& m = **Cat().Model("latte-1");
  const Cluster cluster = *ResolveCluster({"l20-48gb", 2}, Cat());
  Workload w{m.id, 512, 512, 16, 50, 1, OutputType::kLatent};
  const TokenGeometry tokens = *ComputeTokenGeometry(m, w);
  auto models = MakeCostModels(cluster, {});
  ASSERT_TRUE(models.ok());
  for (const char* spec : {"ulysses=2", "ring=2"}) {
    const ParallelConfig c = *ParseParallelConfig(spec);
    const RankLayout layout = *RankLayout::Create(c, cluster.gpus_per_node());
    StageCosts costs(m, tokens, w, c, layout, models->compute, *models->comm);
    int temporal = 0, spatial = 0;
    for (int i = 0; i < m.num_blocks(); ++i) {
      const BlockCost& b = costs.Block(i, false);
      if (m.family_of(i) == BlockFamily::kTemporal) {
        ++temporal;
        EXPECT_EQ(b.a2a_in.value() + b.a2a_out.value() + b.ring_exposed.value(), 0.0) << spec << " block " << i;
      } else {
        ++spatial;
        if (c.ulysses > 1) EXPECT_GT(b.a2a_in.value(), 0.0) << spec << " block " << i;
      }
    }
    EXPECT_GT(temporal, 0);
    EXPECT_GT(spatial, 0);
  }
}

Measurement XditRun(int64_t id, int gpus, const std::string& config, double seconds) {
  Measurement m;
  m.id = id;
  m.source = MeasurementSource::kImport;
  m.kind = MeasurementKind::kE2e;
  m.op = "total";
  m.backend = "xdit";
  m.device = "h100-sxm5-80gb";
  m.ranks = gpus;
  m.params = {{"model", "flux.1-dev"}, {"height", 1024}, {"width", 1024}, {"frames", 1}, {"steps", 28},
              {"config", config}};
  m.median = m.p10 = m.p90 = Seconds(seconds);
  return m;
}

// The user's runs move the next prediction; a run far from the prediction moves nothing.
TEST(MeasuredRunsTest, OneGpuRunSetsTheScaleAndAColdRunIsQuarantined) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  std::vector<Measurement> runs = {XditRun(1, 1, "", 8.0), XditRun(2, 4, "ulysses=4", 60.0)};
  std::vector<std::string> skipped;
  auto fits = FitMeasuredRuns(runs, Cat(), *factory, &skipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("measurement 2 (xDiT run): quarantined: 60 s measured"), std::string::npos) << skipped[0];
  const Fit* scale = nullptr;
  for (const auto& f : *fits) {
    if (f.kind == "e2e" && f.key == "h100-sxm5-80gb/flux.1-dev") scale = &f;
    EXPECT_NE(f.kind, kFitKindMechanisms) << "the only multi-GPU run was quarantined";
  }
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->measurement_ids, std::vector<int64_t>{1});
  // With the new scale in force, the 1-GPU run is predicted as measured (within 1%).
  std::vector<Fit> now = *factory;
  std::erase_if(now, [](const Fit& f) { return f.kind == "e2e" && f.key == "h100-sxm5-80gb/flux.1-dev"; });
  now.push_back(*scale);
  auto rows = MeasuredXditRuns(runs, Cat());
  ASSERT_TRUE(rows[0].row.has_value());
  auto predicted = PredictRowLatency(*rows[0].row, Cat(), now);
  ASSERT_TRUE(predicted.ok());
  EXPECT_NEAR(**predicted, 8.0, 0.08);  // a scale of the device time: host time does not scale
}

TEST(MeasuredRunsTest, MultiGpuRunsRefineTheConstantsOfTheirGpuAndPeaksTheMemory) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  std::vector<Measurement> runs = {XditRun(1, 1, "", 6.71), XditRun(2, 4, "ulysses=4", 3.2),
                                   XditRun(3, 4, "ring=4", 5.0)};
  runs[0].params["peak_memory_gb"] = 41.0;
  auto fits = FitMeasuredRuns(runs, Cat(), *factory);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  bool refined = false, memory = false;
  for (const auto& f : *fits) {
    if (f.kind == kFitKindMechanisms) {
      EXPECT_EQ(f.key, "xdit@h100-sxm5-80gb");
      EXPECT_EQ(f.measurement_ids.size(), 3u);
      refined = true;
    }
    if (f.kind == kFitKindMemory) {
      EXPECT_EQ(f.key, "h100-sxm5-80gb/flux.1-dev");
      EXPECT_GT(f.params["runtime_overhead_gb"].get<double>(), 1.0);
      memory = true;
    }
  }
  EXPECT_TRUE(refined);
  EXPECT_TRUE(memory);
  // The refined constants price that GPU only.
  std::vector<Fit> now = *factory;
  now.insert(now.end(), fits->begin(), fits->end());
  auto h100 = MechanismsIn(now, "h100-sxm5-80gb");
  auto a100 = MechanismsIn(now, "a100-sxm4-80gb");
  ASSERT_TRUE(h100.ok() && a100.ok());
  EXPECT_FALSE(**h100 == **a100);
  EXPECT_EQ(**a100, *MechanismsIn(*factory).value());
}

// A profiler trace's host time per launch is that GPU's eager per-op host time.
TEST(MeasuredRunsTest, ATracesLaunchTimeIsTheGpusEagerHostTime) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  auto launch = [](int64_t id, const char* gpu, double seconds) {
    Measurement m;
    m.id = id;
    m.source = MeasurementSource::kImport;
    m.kind = MeasurementKind::kOp;
    m.op = "launch";
    m.backend = "xdit";
    m.device = gpu;
    m.params = {{"launches", 1000}, {"source", "torch-profiler"}};
    m.median = m.p10 = m.p90 = Seconds(seconds);
    return m;
  };
  // 30 µs per launch on the H100; 500 µs per launch on the L40 is the device, not the host.
  std::vector<Measurement> traces = {launch(1, "h100-sxm5-80gb", 0.030), launch(2, "l40-48gb", 0.5)};
  std::vector<std::string> skipped;
  auto fits = FitMeasuredRuns(traces, Cat(), *factory, &skipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(fits->size(), 1u);
  EXPECT_EQ((*fits)[0].key, "xdit@h100-sxm5-80gb");
  EXPECT_EQ((*fits)[0].measurement_ids, std::vector<int64_t>{1});
  auto mech = MechanismsFromJson((*fits)[0].params);
  ASSERT_TRUE(mech.ok());
  EXPECT_NEAR(mech->eager_op_us, 30.0, 1e-9);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("measurement 2 (profiler trace): 500.0 µs per kernel launch"), std::string::npos) << skipped[0];
  // With runs beside it, the runs refine the other constants and leave the measured one.
  std::vector<Measurement> both = {launch(1, "h100-sxm5-80gb", 0.030), XditRun(3, 1, "", 6.71),
                                   XditRun(4, 4, "ulysses=4", 4.24)};
  auto refined = FitMeasuredRuns(both, Cat(), *factory);
  ASSERT_TRUE(refined.ok()) << refined.status().ToString();
  for (const auto& f : *refined) {
    if (f.kind != kFitKindMechanisms) continue;
    auto m = MechanismsFromJson(f.params);
    ASSERT_TRUE(m.ok());
    EXPECT_NEAR(m->eager_op_us, 30.0, 1e-9);
    EXPECT_EQ(f.measurement_ids.size(), 3u);
  }
}

TEST(MeasuredRunsTest, RunsThatCannotBePricedSayWhy) {
  std::vector<Measurement> runs = {XditRun(1, 4, "ulysses=8", 3.0), XditRun(2, 4, "", 3.0)};
  runs.push_back(XditRun(3, 1, "", 3.0));
  runs[2].params.erase("model");
  auto rows = MeasuredXditRuns(runs, Cat());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NE(rows[0].skipped.find("runs on 8 GPUs, the run on 4"), std::string::npos) << rows[0].skipped;
  EXPECT_NE(rows[1].skipped.find("runs on 1 GPUs, the run on 4"), std::string::npos) << rows[1].skipped;
  EXPECT_NE(rows[2].skipped.find("names no model"), std::string::npos) << rows[2].skipped;
}

}  // namespace
}  // namespace ditune
