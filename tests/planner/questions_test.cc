// Questions from public threads (planner/questions.h): the file's checks, and each kind of
// question judged against what its runs measured.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/catalog.h"
#include "planner/plan.h"
#include "planner/questions.h"

namespace ditune {
namespace {

const Catalog& Cat() {
  static const Catalog* c = [] {
    auto r = Catalog::Load(DITUNE_TEST_DATA_DIR);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return new Catalog(std::move(*r));
  }();
  return *c;
}

// One question of `ask` over `runs` (a JSON array) of Flux.1-dev 2048² on H100s.
std::string Doc(const std::string& ask, const std::string& runs, const std::string& extra = "") {
  return fmt::format(R"({{"questions": [{{"id": "q1", "source": "github:o/r#1", "question": "which?",
    "answer": "as measured", "model": "flux.1-dev", "height": 2048, "width": 2048, "steps": 28,
    "gpu": "h100-sxm5-80gb", "ask": "{}", "runs": {}{}}}]}})",
                     ask, runs, extra);
}

QuestionAnswer AnswerOne(const std::string& text) {
  static std::vector<std::vector<Question>> keep;  // answers point into their questions
  auto q = ParseQuestions(text, "q.json");
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  keep.push_back(*q);
  auto a = AnswerQuestions(Cat(), {}, keep.back());
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a->front();
}

// Flux.1-dev 2048², 28 steps on `gpus` H100s with `config`, as `plan` prices it.
double Predicted(int gpus, const char* config) {
  auto cluster = ResolveCluster({"h100-sxm5-80gb", gpus}, Cat());
  EXPECT_TRUE(cluster.ok());
  Workload w{"flux.1-dev", 2048, 2048, 1, 28, 1, OutputType::kDecoded};
  auto r = SimulateAsPlanned(Cat(), w, *cluster, {}, PlanOptions{}, *ParseParallelConfig(config));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r->total.value();
}

TEST(QuestionsTest, BadFilesAreRefusedNamingTheQuestionAndTheField) {
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"[]", "expected an object"},
      {R"({"questions": []})", "empty"},
      {Doc("slower", R"([{"gpus": 1, "seconds": 1}, {"gpus": 2, "seconds": 1}])"), "ask"},
      {Doc("faster", R"([{"gpus": 1, "seconds": 1}])"), "at least 2 runs"},
      {Doc("fits", R"([{"gpus": 1, "seconds": 1}])"), "'q1'"},
      {Doc("faster", R"([{"gpus": 1, "fits": true}, {"gpus": 2, "seconds": 1}])"), "runs[0]"},
      {Doc("faster", R"([{"gpus": 1, "seconds": 1}, {"gpus": 2, "config": "ulysses=two", "seconds": 1}])"),
       "runs[1]: config"},
      {Doc("faster", R"([{"gpus": 1, "seconds": -1}, {"gpus": 2, "seconds": 1}])"), "seconds"},
      {Doc("faster", R"([{"gpus": 1, "seconds": 1}, {"gpus": 2, "seconds": 1}])", R"(, "tolerance": 0.3)"),
       "for ask 'speedup' only"},
      {Doc("faster", R"([{"gpus": 1, "seconds": 1}, {"gpus": 2, "seconds": 1}])", R"(, "colour": 1)"), "colour"},
  };
  for (const auto& c : cases) {
    auto q = ParseQuestions(c.text, "q.json");
    ASSERT_FALSE(q.ok()) << c.text;
    EXPECT_EQ(q.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(q.status().message().find(c.expect), std::string::npos) << q.status().message();
    EXPECT_NE(q.status().message().find("q.json"), std::string::npos) << q.status().message();
  }
  // The same id twice.
  const std::string one = Doc("fits", R"([{"gpus": 1, "fits": true}])");
  const std::string body = one.substr(one.find('[') + 1, one.rfind(']') - one.find('[') - 1);
  auto twice = ParseQuestions(fmt::format(R"({{"questions": [{}, {}]}})", body, body), "q.json");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("'q1' is used twice"), std::string::npos) << twice.status().message();
}

TEST(QuestionsTest, FasterIsRightOnlyWhereTheRunPredictedFastestMeasuredFastest) {
  const double one = Predicted(1, ""), eight = Predicted(8, "ulysses=8");
  ASSERT_LT(eight, one);
  // The thread measured eight GPUs faster: ditune agrees.
  QuestionAnswer a = AnswerOne(Doc("faster", R"([{"gpus": 1, "seconds": 20}, {"gpus": 8, "config": "ulysses=8", "seconds": 5}])"));
  EXPECT_EQ(a.verdict, Verdict::kRight) << a.ditune_says;
  ASSERT_EQ(a.runs.size(), 2u);
  EXPECT_NEAR(*a.runs[0].predicted_s, one, 1e-9);
  EXPECT_NEAR(*a.runs[1].predicted_s, eight, 1e-9);
  // Measured the other way round: wrong, and within 10% of the fastest still right.
  EXPECT_EQ(AnswerOne(Doc("faster", R"([{"gpus": 1, "seconds": 5}, {"gpus": 8, "config": "ulysses=8", "seconds": 20}])")).verdict,
            Verdict::kWrong);
  EXPECT_EQ(AnswerOne(Doc("faster", R"([{"gpus": 1, "seconds": 5}, {"gpus": 8, "config": "ulysses=8", "seconds": 5.4}])")).verdict,
            Verdict::kRight);
}

TEST(QuestionsTest, SpeedupIsRightWithinTheQuestionsTolerance) {
  const double ratio = Predicted(1, "") / Predicted(4, "ulysses=4");
  auto doc = [&](double measured, const std::string& extra) {
    return Doc("speedup", fmt::format(R"([{{"gpus": 1, "seconds": {}}}, {{"gpus": 4, "config": "ulysses=4", "seconds": 10}}])",
                                      10 * measured),
               extra);
  };
  EXPECT_EQ(AnswerOne(doc(ratio * 1.15, "")).verdict, Verdict::kRight);
  EXPECT_EQ(AnswerOne(doc(ratio * 1.3, "")).verdict, Verdict::kWrong);
  EXPECT_EQ(AnswerOne(doc(ratio * 1.3, R"(, "tolerance": 0.35)")).verdict, Verdict::kRight);
}

TEST(QuestionsTest, FitsComparesEveryVerdictAndUnknownModelsAreUnanswered) {
  const std::string wan = R"({"questions": [{"id": "w", "source": "s", "question": "q", "answer": "a",
    "model": "wan2.1-14b", "height": 720, "width": 1280, "frames": 81, "steps": 50, "gpu": "RTX 4090",
    "runtime": "wan-generate", "ask": "fits", "runs": [{"gpus": 1, "fits": FITS}]}]})";
  auto with = [&](const char* fits) {
    std::string t = wan;
    t.replace(t.find("FITS"), 4, fits);
    return t;
  };
  QuestionAnswer no = AnswerOne(with("false"));
  ASSERT_TRUE(no.runs[0].fits.has_value());
  ASSERT_FALSE(*no.runs[0].fits) << "a 14B model in bf16 needs more than 24 GB";
  EXPECT_EQ(no.verdict, Verdict::kRight);
  EXPECT_EQ(AnswerOne(with("true")).verdict, Verdict::kWrong);

  std::string unknown = with("true");
  unknown.replace(unknown.find("wan2.1-14b"), 10, "no-such-dit");
  QuestionAnswer u = AnswerOne(unknown);
  EXPECT_EQ(u.verdict, Verdict::kUnanswered);
  EXPECT_NE(u.why.find("no-such-dit"), std::string::npos) << u.why;
  // A configuration the runtime's rules refuse is unanswered too, naming the run.
  QuestionAnswer refused = AnswerOne(Doc("faster", R"([{"gpus": 1, "seconds": 5}, {"gpus": 8, "config": "tp=8", "seconds": 2}])"));
  EXPECT_EQ(refused.verdict, Verdict::kUnanswered);
  EXPECT_NE(refused.why.find("tp=8 on 8 GPUs"), std::string::npos) << refused.why;

  const auto json = QuestionAnswersJson({no, u});
  EXPECT_EQ(json["summary"]["right"], 1);
  EXPECT_EQ(json["summary"]["unanswered"], 1);
  EXPECT_EQ(json["questions"][0]["runs"][0]["predicted_fits"], false);
}

}  // namespace
}  // namespace ditune
