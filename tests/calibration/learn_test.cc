// Learning the global constants on a suite, leave-one-group-out, and the factory
// calibration that ships from it.
#include "calibration/learn.h"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "costmodels/calibration.h"
#include "calibration/factory.h"
#include "calibration/measured_runs.h"
#include "calibration/predict.h"
#include "calibration/validate_suite.h"
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

// A set passes where ditune's pick measured within 10% of the fastest; one that does not is
// listed with what was picked and what was fastest.
TEST(LearnTest, ChoiceMissesNameThePickAndTheFastest) {
  auto row = [](std::string group, int gpus, std::string config, double published, double predicted) {
    ScoredRow r;
    r.group = std::move(group);
    r.gpus = gpus;
    r.config = std::move(config);
    r.published_s = published;
    r.predicted_s = predicted;
    r.ape = std::abs(predicted - published) / published;
    return r;
  };
  const std::vector<ScoredRow> rows = {
      row("a", 4, "ulysses=4", 1.00, 0.90), row("a", 4, "ring=4", 1.05, 1.00),  // pick 1.00 s: passes
      row("b", 8, "tp=8", 2.00, 0.50), row("b", 8, "ring=8", 1.00, 0.60),       // pick 2.00 s: misses
      row("b", 4, "ulysses=4", 3.00, 1.00)};                                    // a set of one: not a set
  const SuiteSummary s = Summarize(rows);
  EXPECT_EQ(s.choice_sets, 2);
  EXPECT_EQ(s.choice_pass, 1);
  ASSERT_EQ(s.choice_misses.size(), 1u);
  const ChoiceMiss& m = s.choice_misses[0];
  EXPECT_EQ(m.group, "b");
  EXPECT_EQ(m.gpus, 8);
  EXPECT_EQ(m.chosen, "tp=8");
  EXPECT_EQ(m.fastest, "ring=8");
  EXPECT_DOUBLE_EQ(m.chosen_published_s, 2.0);
  EXPECT_DOUBLE_EQ(m.fastest_predicted_s, 0.6);
  const nlohmann::json j = SuiteSummaryJson(s);
  ASSERT_TRUE(j.contains("choice_misses"));
  EXPECT_EQ(j["choice_misses"][0]["fastest"], "ring=8");
  EXPECT_FALSE(SuiteSummaryJson(Summarize({rows[0], rows[1]})).contains("choice_misses"));
}

// A chart's compiled bars are a set of their own beside its eager ones: compiling is how the
// runtime runs, not a configuration the eager set chooses among.
TEST(LearnTest, CompiledRunsAreAChoiceSetOfTheirOwn) {
  auto row = [](std::string config, bool compiled, double published, double predicted) {
    ScoredRow r;
    r.group = "g";
    r.gpus = 2;
    r.config = std::move(config);
    r.compiled = compiled;
    r.published_s = published;
    r.predicted_s = predicted;
    r.ape = std::abs(predicted - published) / published;
    return r;
  };
  // Two sets: the eager one's pick (Ulysses-2) is its fastest; the compiled one's (Ring-2,
  // predicted 0.90 s) ran 1.30 s against the compiled Ulysses-2's 1.00 s.
  const std::vector<ScoredRow> rows = {row("ulysses=2", false, 2.00, 2.10), row("ring=2", false, 2.50, 2.60),
                                       row("ulysses=2,compile=1", true, 1.00, 1.10),
                                       row("ring=2,compile=1", true, 1.30, 0.90)};
  const SuiteSummary s = Summarize(rows);
  EXPECT_EQ(s.choice_sets, 2);
  EXPECT_EQ(s.choice_pass, 1);
  ASSERT_EQ(s.choice_misses.size(), 1u);
  EXPECT_EQ(s.choice_misses[0].chosen, "ring=2,compile=1");
  EXPECT_EQ(s.choice_misses[0].fastest, "ulysses=2,compile=1");
  // A compiled run alone beside an eager set is no set of its own, and not in theirs: the
  // eager pick (2.00 s) is not judged against its 1.00 s.
  const SuiteSummary eager = Summarize({rows[1], rows[0], row("ulysses=2,compile=1", true, 1.00, 3.00)});
  EXPECT_EQ(eager.choice_sets, 1);
  EXPECT_EQ(eager.choice_pass, 1);
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

// The eager per-op host time is measured (a profiler trace) or the catalog's, never learned:
// beside the family host scales and the methods' op counts it is redundant, and learned with
// them it wandered between leave-one-group-out folds. Started far from what the rows want, it
// stays there unless the options free it.
TEST(LearnTest, TheEagerOpHostTimeIsNotLearned) {
  const auto rows = Groups(Suite(), {"flux-dev-1024-h100"});
  LearnOptions opt;
  opt.steps = {2.0};
  opt.passes = 2;
  opt.start.eager_op_us = 60;
  auto kept = LearnMechanisms(rows, Cat(), {}, opt);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->mechanisms.eager_op_us, 60);
  opt.fixed.clear();
  auto freed = LearnMechanisms(rows, Cat(), {}, opt);
  ASSERT_TRUE(freed.ok());
  EXPECT_LT(freed->mechanisms.eager_op_us, 60);
}

// The shipped factory calibration is what `calibrate learn` makes of the shipped suite.
TEST(LearnTest, TheShippedFactoryCalibrationIsReproducedFromTheSuite) {
  std::ifstream in(std::string(DITUNE_TEST_DATA_DIR) + "/" + kFactoryCalibrationPath);
  ASSERT_TRUE(in) << "data/calibration/factory.json is missing";
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json shipped = nlohmann::json::parse(text.str());
  // The suites it names ("a.csv + b.csv"), read as one, without the rows ditune cannot price.
  std::vector<std::string> paths;
  const std::string suite = shipped.value("suite", "");
  for (size_t at = 0, end; at <= suite.size(); at = end + 3) {
    end = suite.find(" + ", at);
    if (end == std::string::npos) end = suite.size();
    paths.push_back(std::string(DITUNE_TEST_DATA_DIR) + "/validation/" + suite.substr(at, end - at));
  }
  auto read = LoadSuiteFiles(paths, Cat());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const auto rows = PricedRows(*read);
  auto learned = LearnMechanisms(rows, Cat(), {});
  ASSERT_TRUE(learned.ok()) << learned.status().ToString();
  const nlohmann::json made = FactoryCalibrationJson(*learned, shipped.value("suite", ""), rows);
  for (const auto& p : MechanismParams()) {
    EXPECT_NEAR(made["mechanisms"][p.name].get<double>(), shipped["mechanisms"][p.name].get<double>(),
                1e-9 * std::abs(shipped["mechanisms"][p.name].get<double>()))
        << p.name << ": re-run `" << shipped.value("about", "") << "` with --out data/calibration/factory.json";
  }
  ASSERT_EQ(made["scales"].size(), shipped["scales"].size());
  for (size_t i = 0; i < made["scales"].size(); ++i) {
    EXPECT_EQ(made["scales"][i]["key"], shipped["scales"][i]["key"]);
    EXPECT_NEAR(made["scales"][i]["compute_scale"].get<double>(), shipped["scales"][i]["compute_scale"].get<double>(),
                1e-9);
  }
  EXPECT_EQ(made["after"]["oom_agree"], shipped["after"]["oom_agree"]);
  EXPECT_EQ(made["min_gain"], shipped["min_gain"]);
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

// A store seeded by an earlier release of the factory file predicts with the shipped one once
// opened again; the user's own measured scale stays.
TEST(LearnTest, AStoreOfAnEarlierFactoryReleaseIsBroughtToTheShippedOne) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(DITUNE_TEST_TMP_DIR) / "earlier-factory";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(DITUNE_TEST_DATA_DIR, dir / "data", fs::copy_options::recursive);
  const fs::path file = dir / "data" / kFactoryCalibrationPath;
  nlohmann::json earlier = nlohmann::json::parse(std::ifstream(file));
  earlier["mechanisms"]["ring_call_ops"] = 7.0;
  std::ofstream(file, std::ios::trunc) << earlier.dump(2) << "\n";
  auto earlier_catalog = Catalog::Load(dir / "data");
  ASSERT_TRUE(earlier_catalog.ok()) << earlier_catalog.status().ToString();
  const std::string db = (dir / "store.db").string();
  {
    auto store = OpenCalibrationStore(*earlier_catalog, db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto mech = MechanismsIn(*(*store)->ActiveFits());
    ASSERT_TRUE(mech.ok() && mech->has_value());
    EXPECT_EQ((*mech)->ring_call_ops, 7.0);
    // The user's own scale for one (GPU, model), fitted from a measurement.
    Fit own;
    own.kind = kFitKindE2e;
    own.key = E2eFitKey("h100-sxm5-80gb", "flux.1-dev");
    own.params = {{"compute_scale", 2.5}};
    own.points = 1;
    ASSERT_TRUE((*store)->ReplaceFit(own).ok());
  }
  auto store = OpenCalibrationStore(Cat(), db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto fits = (*store)->ActiveFits();
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  auto shipped = LoadFactoryFits(Cat());
  ASSERT_TRUE(shipped.ok());
  auto mech = MechanismsIn(*fits);
  ASSERT_TRUE(mech.ok() && mech->has_value());
  EXPECT_EQ(**mech, **MechanismsIn(*shipped));
  for (const auto& f : *fits) {
    if (f.kind != kFitKindE2e) continue;
    if (f.key == E2eFitKey("h100-sxm5-80gb", "flux.1-dev")) {
      EXPECT_EQ(f.params["compute_scale"].get<double>(), 2.5);
      EXPECT_EQ(f.factory_release, 0u);
    } else {
      EXPECT_EQ(f.factory_release, shipped->front().factory_release) << f.key;
    }
  }
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

// Leave-one-source-out holds out every group of one publisher at once: poisoning one
// publisher's rows moves none of its own predictions, and its entry counts its groups.
TEST(LearnTest, LeaveOneSourceOutHoldsOutEveryGroupOfAPublisher) {
  auto beyond = LoadSuiteFile(std::string(DITUNE_TEST_DATA_DIR) + "/validation/published-beyond-xdit.csv", Cat());
  ASSERT_TRUE(beyond.ok()) << beyond.status().ToString();
  auto rows = Groups(Suite(), {"flux-dev-1024-h100", "consisid-h100"});
  for (const auto& r : Groups(*beyond, {"cd-flux-1024-l20", "cd-flux-1008-l20", "vo-qwenimage-2048-h800"})) {
    rows.push_back(r);
  }
  auto poisoned = rows;
  for (auto& r : poisoned) {
    if (PublisherOf(r) == "vipshop" && r.role == SuiteRole::kPredict && r.latency_s) *r.latency_s *= 5;
  }
  LearnOptions opt;
  opt.steps = {2.0};
  auto clean = CrossValidate(rows, Cat(), {}, opt, {}, HoldOutUnit::kSource);
  auto bad = CrossValidate(poisoned, Cat(), {}, opt, {}, HoldOutUnit::kSource);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(clean->groups.size(), 3u);
  std::map<std::string, int> groups;
  for (const auto& g : clean->groups) groups[g.group] = g.groups;
  EXPECT_EQ(groups, (std::map<std::string, int>{{"xDiT", 2}, {"vipshop", 2}, {"vllm-project", 1}}));
  int held = 0;
  for (size_t i = 0; i < clean->rows.size(); ++i) {
    if (clean->rows[i].publisher != "vipshop") continue;
    ++held;
    EXPECT_EQ(clean->rows[i].predicted_s, bad->rows[i].predicted_s) << "line " << clean->rows[i].line;
  }
  EXPECT_GT(held, 10);
  // By group, vipshop's other group teaches the one held out: the poison reaches it.
  auto by_group = CrossValidate(poisoned, Cat(), {}, opt, {"cd-flux-1008-l20"}, HoldOutUnit::kGroup);
  auto by_group_clean = CrossValidate(rows, Cat(), {}, opt, {"cd-flux-1008-l20"}, HoldOutUnit::kGroup);
  ASSERT_TRUE(by_group.ok() && by_group_clean.ok());
  EXPECT_FALSE(by_group->groups[0].learned == by_group_clean->groups[0].learned);
  // One publisher alone cannot be held out from itself.
  auto alone = CrossValidate(Groups(Suite(), {"flux-dev-1024-h100", "consisid-h100"}), Cat(), {}, opt, {},
                             HoldOutUnit::kSource);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("two publishers"), std::string::npos) << alone.status().message();
}

// --hold-out: only the named groups are held out, each in turn; a name the suite lacks is
// an error that lists its groups.
TEST(LearnTest, CrossValidationHoldsOutOnlyTheNamedGroups) {
  const auto rows = Groups(Suite(), {"flux-dev-1024-h100", "pixart-1024-8xl40-methods", "consisid-h100"});
  LearnOptions opt;
  opt.steps = {2.0};
  auto one = CrossValidate(rows, Cat(), {}, opt, {"consisid-h100"});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->groups.size(), 1u);
  EXPECT_EQ(one->groups[0].group, "consisid-h100");
  for (const auto& r : one->rows) EXPECT_EQ(r.group, "consisid-h100");
  // The same as that group's part of the full leave-one-group-out.
  auto all = CrossValidate(rows, Cat(), {}, opt);
  ASSERT_TRUE(all.ok());
  std::vector<std::optional<double>> full;
  for (const auto& r : all->rows) {
    if (r.group == "consisid-h100") full.push_back(r.predicted_s);
  }
  ASSERT_EQ(full.size(), one->rows.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(full[i], one->rows[i].predicted_s);
  auto bad = CrossValidate(rows, Cat(), {}, opt, {"no-such-group"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no-such-group"), std::string::npos);
  EXPECT_NE(bad.status().message().find("flux-dev-1024-h100"), std::string::npos);
}

// Rows are predicted on several threads; what comes out does not depend on how many.
TEST(LearnTest, SuitePredictionsDoNotDependOnTheThreadCount) {
  const auto rows = Suite();
  ::setenv("DITUNE_THREADS", "1", 1);
  auto serial = PredictSuite(rows, Cat(), {});
  ::setenv("DITUNE_THREADS", "3", 1);
  auto threaded = PredictSuite(rows, Cat(), {});
  ::unsetenv("DITUNE_THREADS");
  ASSERT_TRUE(serial.ok()) << serial.status().ToString();
  ASSERT_TRUE(threaded.ok());
  ASSERT_EQ(serial->rows.size(), threaded->rows.size());
  for (size_t i = 0; i < serial->rows.size(); ++i) {
    EXPECT_EQ(serial->rows[i].predicted_s, threaded->rows[i].predicted_s) << "line " << serial->rows[i].row->line;
    EXPECT_EQ(serial->rows[i].config, threaded->rows[i].config);
  }
}

// A calibrate row's latency is not proportional to the compute scale (host time, text
// encoding and the methods' own ops stay): the scale is refined until the row is reproduced.
// Flux.1-dev eager on one H100 with a heavy host (the host issues 2.5 ms a block) is off by
// about 3% with the first ratio alone.
TEST(LearnTest, ACalibrateRowIsReproducedThoughPartOfItsTimeDoesNotScale) {
  Mechanisms m;
  m.joint_host_scale = 1.5;
  m.single_host_scale = 3;
  auto report = PredictSuite(Groups(Suite(), {"flux-dev-1024-h100"}), Cat(), {MechanismsFit(m)});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const SuiteRowResult& calibrate = report->rows.front();
  ASSERT_EQ(calibrate.row->role, SuiteRole::kCalibrate);
  ASSERT_TRUE(calibrate.predicted_s.has_value());
  EXPECT_NEAR(*calibrate.predicted_s, 6.71, 0.002 * 6.71);
}

// torch.compile: the eager compute scale times the compiled device scale, whose default is
// xDiT's published one-GPU pair (Flux.1-dev 1024² on H100: 6.71 s eager, 4.30 s compiled).
// Its published four-GPU Ulysses run under torch.compile, 1.63 s, is not used: within the
// held-out p90 goal (25%). It is 22% over: with the host time gone the all-to-all is a third
// of the run, and the suite pins the NVLink all-to-all efficiency only loosely.
TEST(LearnTest, TorchCompileScalesTheEagerDeviceTime) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  const ModelSpec& m = **Cat().Model("flux.1-dev");
  const Workload w{m.id, 1024, 1024, 1, 28, 1, OutputType::kDecoded};
  auto run = [&](int gpus, const char* config, Runtime runtime) {
    const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", gpus}, Cat());
    auto models = ModelsFor(cluster, m.id, *factory, "cuda", runtime);
    EXPECT_TRUE(models.ok()) << models.status().ToString();
    SimOptions opt;
    opt.terms = models->terms;
    auto r = Simulate({&m, w, &cluster, *ParseParallelConfig(config), &models->compute, models->comm.get()}, opt);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r->total.value();
  };
  // One H100's FLUX.1-dev scale is fitted on two publishers' single-GPU runs (xDiT's 6.71 s,
  // diffusers-torchao's 6.573 s).
  EXPECT_NEAR(run(1, "", Runtime::kEager), 6.71, 0.02 * 6.71);
  // The DiT's device time scaled by the learned constant; text encoding, the VAE decode and
  // the host's share are not, and on one H100 they are a few percent of FLUX.1-dev's 28 steps.
  double scale = 0;
  for (const auto& f : *factory) {
    if (f.kind == kFitKindMechanisms) scale = f.params["compiled_device_scale"].get<double>();
  }
  ASSERT_GT(scale, 0);
  ASSERT_LT(scale, 1);
  EXPECT_NEAR(run(1, "", Runtime::kCompiled) / run(1, "", Runtime::kEager), scale, 0.03);
  EXPECT_LT(run(4, "ulysses=4", Runtime::kCompiled), run(1, "", Runtime::kCompiled) / 2);
}

// The constants only compiled runs are priced with are judged on those runs' loss where there
// are ten of them or more: beside a suite of eager rows no move of theirs clears the floor,
// and with the compiled rows of four publishers the scale moves to where they agree.
TEST(LearnTest, CompiledConstantsAreJudgedOnTheCompiledRows) {
  auto compiled = LoadSuiteFile(std::string(DITUNE_TEST_DATA_DIR) + "/validation/compile-published.csv", Cat());
  auto beyond = LoadSuiteFile(std::string(DITUNE_TEST_DATA_DIR) + "/validation/published-beyond-xdit.csv", Cat());
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  ASSERT_TRUE(beyond.ok());
  std::vector<SuiteRow> rows = Suite();
  for (const auto& r : *compiled) rows.push_back(r);
  for (const auto& r : Groups(*beyond, {"cd-flux-1024-l20", "cd-zimageturbo-1024-l20-compile"})) rows.push_back(r);
  int compiled_rows = 0;
  for (const auto& r : rows) compiled_rows += r.role == SuiteRole::kPredict && r.latency_s && r.config && r.config->compile;
  ASSERT_GE(compiled_rows, kMinRowsToLearnApart);
  LearnOptions opt;
  opt.steps = {1.19, 1.09};
  opt.passes = 3;
  for (const auto& p : MechanismParams()) {
    if (std::string(p.name) != "compiled_device_scale") opt.fixed.push_back(p.name);
  }
  opt.start.compiled_device_scale = 0.5;
  auto apart = LearnMechanisms(rows, Cat(), {}, opt);
  ASSERT_TRUE(apart.ok()) << apart.status().ToString();
  EXPECT_GT(apart->mechanisms.compiled_device_scale, 0.6);
  EXPECT_LT(apart->loss_after, apart->loss_before);
  // Two compiled groups only: judged on the whole suite, the scale stays where it starts.
  std::vector<SuiteRow> few = Suite();
  for (const auto& r : Groups(*compiled, {"tao-flux-1024-h100", "tao-cogvideox5b-480p-a100"})) few.push_back(r);
  auto pooled = LearnMechanisms(few, Cat(), {}, opt);
  ASSERT_TRUE(pooled.ok());
  EXPECT_EQ(pooled->mechanisms.compiled_device_scale, 0.5);
}

// A PipeFusion warm-up step is the whole image through every stage in turn: it costs a
// synchronous step of the whole model (plus the hand-offs), whatever the stage count.
TEST(LearnTest, PipeFusionWarmupStepsCostAWholeSynchronousStep) {
  const ModelSpec& m = **Cat().Model("pixart-alpha");
  const Cluster one = *ResolveCluster({"a100-sxm4-80gb", 1}, Cat());
  const Cluster four = *ResolveCluster({"a100-sxm4-80gb", 4}, Cat());
  Workload w{m.id, 1024, 1024, 1, 20, 1, OutputType::kLatent};
  auto run = [&](const Cluster& cluster, const char* config) {
    auto models = MakeCostModels(cluster, {});
    EXPECT_TRUE(models.ok());
    auto r = Simulate({&m, w, &cluster, *ParseParallelConfig(config), &models->compute, models->comm.get()});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return *r;
  };
  const double serial_step = run(one, "").step.value();
  const double w1 = run(four, "pipefusion=4,patches=4,warmup=1").warmup.value();
  const double w2 = run(four, "pipefusion=4,patches=4,warmup=2").warmup.value();
  EXPECT_GT(w1, serial_step);         // every stage's blocks, in turn, and the hand-offs
  EXPECT_LT(w1, 1.1 * serial_step);   // the hand-offs of one image are small beside it
  EXPECT_NEAR(w2 / w1, 2.0, 0.05);  // the first warm-up step also starts the pipeline
}

// A published PipeFusion point whose config names neither patches nor warm-up is the best of
// xDiT's benchmark grid (warm-up 0, 1, 2; patches pp/2, pp, 2pp); a config naming either is
// itself.
TEST(LearnTest, PublishedPipeFusionPointsAreTheBestOfXditsGrid) {
  SuiteRow row;
  row.line = 1;
  row.group = "g";
  row.workload = Workload{"pixart-alpha", 1024, 1024, 1, 20, 1, OutputType::kLatent};
  row.scope = SuiteScope::kDit;
  row.cluster = ClusterSpec{"l40-48gb", 4};
  row.cluster.intra_id = "pcie4";
  auto latency = [&](const std::string& text) {
    row.config_text = text;
    row.config = *ParseParallelConfig(text);
    auto p = PredictRowLatency(row, Cat(), {});
    EXPECT_TRUE(p.ok() && p->has_value()) << text;
    return p.ok() && p->has_value() ? **p : 0.0;
  };
  const double grid = latency("pipefusion=4");
  double best = 1e30;
  for (int warmup : {0, 1, 2}) {
    for (int patches : {2, 4, 8}) {
      best = std::min(best, latency(fmt::format("pipefusion=4,patches={},warmup={}", patches, warmup)));
    }
  }
  EXPECT_DOUBLE_EQ(grid, best);
  EXPECT_LT(grid, latency("pipefusion=4,warmup=1"));
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
        if (c.ulysses > 1) {
          EXPECT_GT(b.a2a_in.value(), 0.0) << spec << " block " << i;
        }
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

// A multi-GPU run refines its GPU's constants only beside another that agrees: one 20%-slow
// run alone (a regression the user is reporting) moves nothing for everyone using the store;
// a second run as slow does; an accepted run counts alone.
TEST(MeasuredRunsTest, ALoneRunRefinesNothingUntilAnotherAgreesOrItIsAccepted) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  auto predicted = [&](const Measurement& m) {
    auto rows = MeasuredXditRuns({m}, Cat());
    EXPECT_TRUE(rows[0].row.has_value()) << rows[0].skipped;
    auto p = PredictRowLatency(*rows[0].row, Cat(), *factory);
    EXPECT_TRUE(p.ok() && p->has_value());
    return **p;
  };
  Measurement slow_u4 = XditRun(2, 4, "ulysses=4", 1.0);
  slow_u4.median = slow_u4.p10 = slow_u4.p90 = Seconds(1.2 * predicted(slow_u4));
  Measurement slow_ring = XditRun(3, 4, "ring=4", 1.0);
  slow_ring.median = slow_ring.p10 = slow_ring.p90 = Seconds(1.2 * predicted(slow_ring));
  auto mechanisms_ids = [&](const std::vector<Measurement>& runs, std::vector<std::string>* skipped) {
    auto fits = FitMeasuredRuns(runs, Cat(), *factory, skipped);
    EXPECT_TRUE(fits.ok()) << fits.status().ToString();
    std::vector<int64_t> ids;
    for (const auto& f : *fits) {
      if (f.kind == kFitKindMechanisms) ids = f.measurement_ids;
    }
    return ids;
  };
  std::vector<std::string> skipped;
  EXPECT_TRUE(mechanisms_ids({XditRun(1, 1, "", 6.71), slow_u4}, &skipped).empty());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("measurement 2 (xDiT run): held: "), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("+20% from its prediction"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("ditune calibrate accept 2"), std::string::npos) << skipped[0];
  // A second run as slow agrees: both count.
  const auto both = mechanisms_ids({XditRun(1, 1, "", 6.71), slow_u4, slow_ring}, nullptr);
  EXPECT_NE(std::find(both.begin(), both.end(), 2), both.end());
  EXPECT_NE(std::find(both.begin(), both.end(), 3), both.end());
  // Accepted, the lone run counts.
  Measurement accepted = slow_u4;
  accepted.params["accepted"] = true;
  const auto alone = mechanisms_ids({XditRun(1, 1, "", 6.71), accepted}, nullptr);
  EXPECT_NE(std::find(alone.begin(), alone.end(), 2), alone.end());
}

// Far outside the interval is quarantined; the likely cause names the part of the pipeline
// the timing left out where the other scope's prediction explains it.
TEST(MeasuredRunsTest, FarOutsideTheIntervalIsQuarantinedWithItsLikelyCause) {
  IntervalTable bands;
  bands.bands = {{"all", 100, std::log(0.9), std::log(1.25)}};
  SuiteRow row;
  row.runtime = "xdit";
  EXPECT_EQ(CheckAgainstPrediction(row, 10.0, 10.0, &bands).verdict, QuarantineCheck::kInside);
  EXPECT_EQ(CheckAgainstPrediction(row, 13.0, 10.0, &bands).verdict, QuarantineCheck::kOutside);
  const QuarantineCheck far = CheckAgainstPrediction(row, 16.0, 10.0, &bands);  // beyond 1.25^2
  EXPECT_EQ(far.verdict, QuarantineCheck::kQuarantined);
  EXPECT_NE(far.why.find("+60%, beyond twice its 80% interval's -10% .. +25%"), std::string::npos) << far.why;
  EXPECT_EQ(CheckAgainstPrediction(row, 7.0, 10.0, &bands).verdict, QuarantineCheck::kQuarantined);  // below 0.81
  EXPECT_EQ(CheckAgainstPrediction(row, 31.0, 10.0, nullptr).verdict, QuarantineCheck::kQuarantined);
  EXPECT_EQ(CheckAgainstPrediction(row, 20.0, 10.0, nullptr).verdict, QuarantineCheck::kInside);

  // HunyuanVideo 720p on 8 H100s timed without its VAE decode: the DiT alone explains it.
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  Measurement m = XditRun(5, 8, "ulysses=8", 1.0);
  m.params["model"] = "hunyuanvideo";
  m.params["height"] = 720;
  m.params["width"] = 1280;
  m.params["frames"] = 129;
  m.params["steps"] = 50;
  auto runs = MeasuredXditRuns({m}, Cat());
  ASSERT_TRUE(runs[0].row.has_value()) << runs[0].skipped;
  SuiteRow dit = *runs[0].row;
  dit.scope = SuiteScope::kDit;
  auto e2e_s = PredictRowLatency(*runs[0].row, Cat(), *factory);
  auto dit_s = PredictRowLatency(dit, Cat(), *factory);
  ASSERT_TRUE(e2e_s.ok() && e2e_s->has_value() && dit_s.ok() && dit_s->has_value());
  ASSERT_LT(**dit_s, 0.95 * **e2e_s);  // the decode is a part worth naming
  auto cause = LikelyCause(*runs[0].row, **dit_s, **e2e_s, Cat(), *factory);
  ASSERT_TRUE(cause.ok()) << cause.status().ToString();
  EXPECT_NE(cause->find("the text encoding and VAE decode are not in the timing"), std::string::npos) << *cause;
  auto slow = LikelyCause(*runs[0].row, 3 * **e2e_s, **e2e_s, Cat(), *factory);
  ASSERT_TRUE(slow.ok());
  EXPECT_NE(slow->find("without warm-up"), std::string::npos) << *slow;
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
  // Two multi-GPU runs that agree: a run alone refines nothing.
  std::vector<Measurement> both = {launch(1, "h100-sxm5-80gb", 0.030), XditRun(3, 1, "", 6.71),
                                   XditRun(4, 4, "ulysses=4", 4.24), XditRun(5, 2, "ulysses=2", 4.38)};
  auto refined = FitMeasuredRuns(both, Cat(), *factory);
  ASSERT_TRUE(refined.ok()) << refined.status().ToString();
  for (const auto& f : *refined) {
    if (f.kind != kFitKindMechanisms) continue;
    auto m = MechanismsFromJson(f.params);
    ASSERT_TRUE(m.ok());
    EXPECT_NEAR(m->eager_op_us, 30.0, 1e-9);
    EXPECT_EQ(f.measurement_ids.size(), 4u);
  }
}

// A profiler trace's GPU time by class, as ParseTorchTrace stores it for a run of `model` at
// 1024x1024 over `steps` steps on one H100 ingested with --model and --steps: per step where
// `per_step`, else over the whole trace only.
Measurement ProfileTrace(int64_t id, const std::string& model, int steps, const std::map<std::string, double>& s,
                         bool per_step = true) {
  Measurement m;
  m.id = id;
  m.source = MeasurementSource::kImport;
  m.kind = MeasurementKind::kE2e;
  m.op = "profile";
  m.backend = "xdit";
  m.device = "h100-sxm5-80gb";
  nlohmann::json classes = {{"gemm", s.at("gemm")}, {"attention", s.at("attention")}, {"other", s.at("other")},
                            {"nccl", 0.0}};
  m.params = {{"model", model},        {"height", 1024}, {"width", 1024},
              {"steps", steps},        {"config", ""},   {"gpus", 1},
              {"source", "torch-profiler"}, {"gpu_kernel_s", classes}};
  if (per_step) {
    m.params["windows"] = 1;
    m.params["gpu_kernel_s_per_step"] = classes;
  }
  m.median = m.p10 = m.p90 = Seconds(1.0);
  return m;
}

// The device time per step of one H100 running `model` at 1024x1024 by op class, as the
// models of `fits` price xDiT's kernels (compute scale and class scales included).
std::array<double, kNumOpClasses> ClassSecondsPerStep(const std::string& model_id, int steps,
                                                       const std::vector<Fit>& fits) {
  const ModelSpec* model = *Cat().Model(model_id);
  const Cluster cluster = *ResolveCluster(ClusterSpec{"h100-sxm5-80gb", 1}, Cat());
  auto models = ModelsFor(cluster, model_id, fits);
  EXPECT_TRUE(models.ok()) << models.status().ToString();
  const Workload w{model_id, 1024, 1024, 1, steps, 1, OutputType::kLatent};
  SimInput in{model, w, &cluster, ParallelConfig{}, &models->compute, models->comm.get()};
  auto loop = ModelledClassTimes(in, 0);
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  std::array<double, kNumOpClasses> out{};
  for (int c = 0; c < kNumOpClasses; ++c) out[c] = (*loop)[c].value() / steps;
  return out;
}

const Fit* FitOf(const std::vector<Fit>& fits, const std::string& kind, const std::string& key) {
  const Fit* found = nullptr;
  for (const auto& f : fits) {
    if (f.kind == kind && f.key == key) found = &f;
  }
  return found;
}

std::vector<Fit> With(std::vector<Fit> base, const std::vector<Fit>& fits) {
  for (const auto& f : fits) {
    std::erase_if(base, [&](const Fit& g) { return g.kind == f.kind && g.key == f.key; });
    base.push_back(f);
  }
  return base;
}

// A trace whose attention kernels took twice their modelled time makes every attention op of
// that GPU twice as slow (no compute scale of the GPU and model: the ratio applies as measured).
TEST(MeasuredRunsTest, ATracesClassTimesScaleThatClassOnItsGpu) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  ASSERT_EQ(FitOf(*factory, kFitKindE2e, "h100-sxm5-80gb/pixart-alpha"), nullptr);
  // The modelled device time per step, from the ops of one forward: PixArt's 28 blocks and
  // the work around them, on catalog curves with the factory's constants.
  const ModelSpec* model = *Cat().Model("pixart-alpha");
  const Workload w{"pixart-alpha", 1024, 1024, 1, 20, 1, OutputType::kLatent};
  ComputeModel defaults = ComputeModel::Defaults(**Cat().Gpu("h100-sxm5-80gb"));
  auto mechanisms = MechanismsIn(*factory, "h100-sxm5-80gb");
  ASSERT_TRUE(mechanisms.ok() && mechanisms->has_value());
  defaults.SetMechanisms(**mechanisms);
  const RankWork work = ComputeRankWork(*model, *ComputeTokenGeometry(*model, w), w, ParallelConfig{});
  std::map<OpClass, double> per_step;
  std::vector<OpCost> ops = StepOverheadOps(*model, work);
  for (int b = 0; b < model->num_blocks(); ++b) {
    for (const auto& op : BlockOps(*model, model->family_of(b), work)) ops.push_back(op);
  }
  for (const auto& op : ops) per_step[op.cls] += defaults.DeviceTime(op).value();
  ASSERT_GT(per_step[OpClass::kAttention], 0);
  const Measurement trace = ProfileTrace(7, "pixart-alpha", 20,
                                         {{"gemm", per_step[OpClass::kGemm]},
                                          {"attention", 2 * per_step[OpClass::kAttention]},
                                          {"other", per_step[OpClass::kElementwise]}});
  std::vector<std::string> skipped;
  auto fits = FitMeasuredRuns({trace}, Cat(), *factory, &skipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_TRUE(skipped.empty()) << skipped[0];
  const Fit* classes = FitOf(*fits, kFitKindKernelClass, "h100-sxm5-80gb");
  ASSERT_NE(classes, nullptr);
  EXPECT_NEAR(classes->params.at("attention").get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(classes->params.at("gemm").get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(classes->params.at("elementwise").get<double>(), 1.0, 1e-9);
  EXPECT_EQ(classes->params.at("relative"), false);
  EXPECT_EQ(classes->measurement_ids, std::vector<int64_t>{7});

  // Every attention op on the H100 now takes twice its time; the other classes as before.
  const std::vector<Fit> now = With(*factory, *fits);
  const Cluster h100 = *ResolveCluster(ClusterSpec{"h100-sxm5-80gb", 1}, Cat());
  auto before = ModelsFor(h100, "pixart-alpha", *factory);
  auto after = ModelsFor(h100, "pixart-alpha", now);
  ASSERT_TRUE(before.ok() && after.ok()) << after.status().ToString();
  for (const auto& op : ops) {
    const double k = op.cls == OpClass::kAttention ? 2.0 : 1.0;
    EXPECT_NEAR(after->compute.DeviceTime(op).value(), k * before->compute.DeviceTime(op).value(),
                1e-12 * before->compute.DeviceTime(op).value())
        << op.name;
  }
  const auto loop_before = ClassSecondsPerStep("pixart-alpha", 20, *factory);
  const auto loop_after = ClassSecondsPerStep("pixart-alpha", 20, now);
  EXPECT_NEAR(loop_after[static_cast<int>(OpClass::kAttention)], 2 * per_step[OpClass::kAttention],
              1e-9 * per_step[OpClass::kAttention]);
  EXPECT_NEAR(loop_before[static_cast<int>(OpClass::kAttention)], per_step[OpClass::kAttention],
              1e-9 * per_step[OpClass::kAttention]);
  EXPECT_NEAR(loop_after[static_cast<int>(OpClass::kGemm)], loop_before[static_cast<int>(OpClass::kGemm)],
              1e-9 * loop_before[static_cast<int>(OpClass::kGemm)]);
  // Another GPU is untouched; ditune's engine runs its own kernels.
  const Cluster a100 = *ResolveCluster(ClusterSpec{"a100-sxm4-80gb", 1}, Cat());
  auto other = ModelsFor(a100, "pixart-alpha", now);
  auto engine = ModelsFor(h100, "pixart-alpha", now, "cuda", Runtime::kEngine);
  ASSERT_TRUE(other.ok() && engine.ok());
  EXPECT_EQ(other->compute.class_scale(OpClass::kAttention), 1.0);
  EXPECT_EQ(engine->compute.class_scale(OpClass::kAttention), 1.0);
  // plan --explain says where they came from.
  bool said = false;
  for (const auto& line : CalibrationSources(now, h100, "pixart-alpha")) {
    said = said || (line.find("attention 2.00x") != std::string::npos &&
                    line.find("profiler trace (measurement 7)") != std::string::npos);
  }
  EXPECT_TRUE(said);
}

// Beside a compute scale of the GPU and model, the class scales only move time between the
// classes (their mean weighted by the trace's modelled class times is 1), and the scale a
// one-GPU run fits is measured over the model with them so: that run is still predicted as
// measured, and the attention / gemm proportion is the trace's.
TEST(MeasuredRunsTest, BesideAComputeScaleTheClassScalesRedistributeTime) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  ASSERT_NE(FitOf(*factory, kFitKindE2e, "h100-sxm5-80gb/flux.1-dev"), nullptr);
  const auto modelled = ClassSecondsPerStep("flux.1-dev", 28, *factory);
  const double gemm = modelled[static_cast<int>(OpClass::kGemm)];
  const double attn = modelled[static_cast<int>(OpClass::kAttention)];
  const double ew = modelled[static_cast<int>(OpClass::kElementwise)];
  // Modelled with the factory scale in force: the fit divides by the model at scale 1.
  const double k = FitOf(*factory, kFitKindE2e, "h100-sxm5-80gb/flux.1-dev")->params.at("compute_scale").get<double>();
  const Measurement trace =
      ProfileTrace(5, "flux.1-dev", 28, {{"gemm", gemm / k}, {"attention", 2 * attn / k}, {"other", ew / k}});
  std::vector<Measurement> all = {trace, XditRun(3, 1, "", 8.0)};
  auto fits = FitMeasuredRuns(all, Cat(), *factory);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  const Fit* classes = FitOf(*fits, kFitKindKernelClass, "h100-sxm5-80gb");
  ASSERT_NE(classes, nullptr);
  EXPECT_NEAR(classes->params.at("attention").get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(classes->params.at("gemm").get<double>(), 1.0, 1e-9);
  const std::vector<Fit> now = With(*factory, *fits);
  const Cluster h100 = *ResolveCluster(ClusterSpec{"h100-sxm5-80gb", 1}, Cat());
  auto models = ModelsFor(h100, "flux.1-dev", now);
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  const double n_gemm = models->compute.class_scale(OpClass::kGemm);
  const double n_attn = models->compute.class_scale(OpClass::kAttention);
  const double n_ew = models->compute.class_scale(OpClass::kElementwise);
  EXPECT_NEAR(n_attn / n_gemm, 2.0, 1e-9);
  EXPECT_NEAR(n_ew / n_gemm, 1.0, 1e-9);
  EXPECT_LT(n_gemm, 1.0);
  EXPECT_NEAR((gemm * n_gemm + attn * n_attn + ew * n_ew) / (gemm + attn + ew), 1.0, 1e-9);
  // The one-GPU run sets the level: predicted as measured (host time does not scale).
  auto rows = MeasuredXditRuns(all, Cat());  // the run; a trace is no run
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_TRUE(rows[0].row.has_value());
  auto predicted = PredictRowLatency(*rows[0].row, Cat(), now);
  ASSERT_TRUE(predicted.ok());
  EXPECT_NEAR(**predicted, 8.0, 0.08);
  // Without the class scales the same run fits another scale: they are not counted twice.
  auto plain = FitMeasuredRuns({XditRun(3, 1, "", 8.0)}, Cat(), *factory);
  ASSERT_TRUE(plain.ok());
  const double with_classes = FitOf(*fits, kFitKindE2e, "h100-sxm5-80gb/flux.1-dev")->params.at("compute_scale");
  const double without = FitOf(*plain, kFitKindE2e, "h100-sxm5-80gb/flux.1-dev")->params.at("compute_scale");
  EXPECT_NEAR(with_classes / without, 1.0, 0.05);
  bool said = false;
  for (const auto& line : CalibrationSources(now, h100, "flux.1-dev")) {
    said = said || (line.find("profiler trace") != std::string::npos && line.find("normalised") != std::string::npos);
  }
  EXPECT_TRUE(said);
}

// A class far from its model is quarantined with the reason; the others still count. A trace
// without its workload, or no trace, changes nothing.
TEST(MeasuredRunsTest, ClassTimesOutOfBoundsAreQuarantinedAndNoTraceChangesNothing) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  const auto modelled = ClassSecondsPerStep("pixart-alpha", 20, *factory);
  const double gemm = modelled[static_cast<int>(OpClass::kGemm)];
  const double attn = modelled[static_cast<int>(OpClass::kAttention)];
  const double ew = modelled[static_cast<int>(OpClass::kElementwise)];
  std::vector<std::string> skipped;
  const Measurement far =
      ProfileTrace(9, "pixart-alpha", 20, {{"gemm", 1.5 * gemm}, {"attention", 5 * attn}, {"other", ew}});
  auto fits = FitMeasuredRuns({far}, Cat(), *factory, &skipped);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("measurement 9 (profiler trace): attention kernels quarantined: 5x their modelled time "
                            "is outside [0.25, 4]"),
            std::string::npos)
      << skipped[0];
  const Fit* classes = FitOf(*fits, kFitKindKernelClass, "h100-sxm5-80gb");
  ASSERT_NE(classes, nullptr);
  EXPECT_FALSE(classes->params.contains("attention"));
  EXPECT_NEAR(classes->params.at("gemm").get<double>(), 1.5, 1e-9);
  auto models = ModelsFor(*ResolveCluster(ClusterSpec{"h100-sxm5-80gb", 1}, Cat()), "pixart-alpha",
                          With(*factory, *fits));
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(models->compute.class_scale(OpClass::kAttention), 1.0);
  EXPECT_NEAR(models->compute.class_scale(OpClass::kGemm), 1.5, 1e-9);

  // Every class out of bounds: no fit at all.
  skipped.clear();
  const Measurement tenth =
      ProfileTrace(9, "pixart-alpha", 20, {{"gemm", 0.1 * gemm}, {"attention", 0.1 * attn}, {"other", 0.1 * ew}});
  auto none = FitMeasuredRuns({tenth}, Cat(), *factory, &skipped);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(FitOf(*none, kFitKindKernelClass, "h100-sxm5-80gb"), nullptr);
  EXPECT_EQ(skipped.size(), 3u);

  // A trace ingested without its workload says what to pass and fits nothing.
  Measurement bare = ProfileTrace(10, "pixart-alpha", 20, {{"gemm", gemm}, {"attention", 2 * attn}, {"other", ew}});
  bare.params.erase("model");
  skipped.clear();
  auto unnamed = FitMeasuredRuns({bare}, Cat(), *factory, &skipped);
  ASSERT_TRUE(unnamed.ok());
  EXPECT_TRUE(unnamed->empty());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("measurement 10 (profiler trace): its kernel time by class names no workload"),
            std::string::npos)
      << skipped[0];

  // Params of the wrong type (a hand-written CSV row) are a reason, not an exception.
  Measurement typo = ProfileTrace(11, "pixart-alpha", 20, {{"gemm", gemm}, {"attention", attn}, {"other", ew}});
  typo.params["height"] = "1024";
  skipped.clear();
  auto typed = FitMeasuredRuns({typo}, Cat(), *factory, &skipped);
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("measurement 11 (profiler trace): params.height is not a whole number"), std::string::npos)
      << skipped[0];

  // No trace: no class fit, and the models are the factory's.
  auto runs = FitMeasuredRuns({XditRun(3, 1, "", 8.0)}, Cat(), *factory);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(FitOf(*runs, kFitKindKernelClass, "h100-sxm5-80gb"), nullptr);
  const auto plain = ClassSecondsPerStep("pixart-alpha", 20, With(*factory, *runs));
  for (int c = 0; c < kNumOpClasses; ++c) EXPECT_EQ(plain[c], modelled[c]) << c;
}

// Without a time per step (no ProfilerStep windows) a trace gives the classes' proportions:
// relative scales, normalised wherever they apply.
TEST(MeasuredRunsTest, AWholeTraceGivesRelativeClassScales) {
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok());
  const auto modelled = ClassSecondsPerStep("pixart-alpha", 20, *factory);
  const double gemm = modelled[static_cast<int>(OpClass::kGemm)];
  const double attn = modelled[static_cast<int>(OpClass::kAttention)];
  const double ew = modelled[static_cast<int>(OpClass::kElementwise)];
  // Some number of generations, attention twice its modelled share of the others.
  auto fits = FitMeasuredRuns(
      {ProfileTrace(4, "pixart-alpha", 20, {{"gemm", 37 * gemm}, {"attention", 74 * attn}, {"other", 37 * ew}}, false)},
      Cat(), *factory);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  const Fit* classes = FitOf(*fits, kFitKindKernelClass, "h100-sxm5-80gb");
  ASSERT_NE(classes, nullptr);
  EXPECT_EQ(classes->params.at("relative"), true);
  auto models = ModelsFor(*ResolveCluster(ClusterSpec{"h100-sxm5-80gb", 1}, Cat()), "pixart-alpha",
                          With(*factory, *fits));
  ASSERT_TRUE(models.ok());
  const double n_gemm = models->compute.class_scale(OpClass::kGemm);
  const double n_attn = models->compute.class_scale(OpClass::kAttention);
  const double n_ew = models->compute.class_scale(OpClass::kElementwise);
  EXPECT_NEAR(n_attn / n_gemm, 2.0, 1e-9);
  EXPECT_NEAR((gemm * n_gemm + attn * n_attn + ew * n_ew) / (gemm + attn + ew), 1.0, 1e-9);
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

namespace ditune {
namespace {

// xDiT's other HunyuanVideo tables (data/validation/xdit-published-extra.csv: 960² on H100
// and H20, 720p and 960² on 48 GB L20s), never learned on: with the shipped constants every
// published run is predicted to fit (the L20 runs only with model CPU offload, as xDiT's
// example script launches them), and the median error stays under the held-out goal.
TEST(LearnTest, TheTablesOutsideTheTrainingSuiteArePredicted) {
  auto rows = LoadSuiteFile(std::string(DITUNE_TEST_DATA_DIR) + "/validation/xdit-published-extra.csv", Cat());
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  auto factory = LoadFactoryFits(Cat());
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  auto report = PredictSuite(*rows, Cat(), *factory);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->summary.false_oom, 0);
  for (const auto& r : report->rows) EXPECT_TRUE(r.feasible) << r.row->group << " " << r.config;
  EXPECT_LT(report->summary.median_ape, 0.10);
}

}  // namespace
}  // namespace ditune
