// Questions users asked in public threads, each with the answer its thread measured, and
// ditune's answers to them (`ditune validate --questions FILE.json`).
//
// A question names a workload, a GPU and the runs its thread measured (a configuration on a
// GPU count, each with its seconds or whether it fitted) and asks one of:
// - faster:  which of the runs is fastest. ditune is right where the run it predicts fastest
//            measured within 10% of the fastest (as validate's choice sets judge);
// - speedup: how much faster each later run is than the first. Right where every predicted
//            ratio is within the question's tolerance of the measured one (default 20%);
// - fits:    which runs fit in the GPUs' memory. Right where every verdict agrees.
// A question ditune cannot express (a model or GPU not in the catalog, a configuration its
// rules refuse) is unanswered, with the reason: it counts against ditune as much as a wrong
// answer does, and says what to add.
#ifndef DITUNE_PLANNER_QUESTIONS_H_
#define DITUNE_PLANNER_QUESTIONS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "calibration/suite.h"
#include "core/catalog.h"
#include "core/status.h"
#include "costmodels/fit.h"

namespace ditune {

enum class QuestionKind { kFaster, kSpeedup, kFits };
std::string_view QuestionKindName(QuestionKind k);

// One run a thread measured.
struct QuestionRun {
  int gpus = 1;
  std::string config;                // ditune's syntax, as written ("" = one device)
  std::optional<double> seconds;     // faster and speedup: what it took (the question's scope)
  std::optional<bool> fits;          // fits: whether it ran
};

struct Question {
  std::string id;
  std::string source;    // repository, thread and a short quote of the measurement
  std::string question;  // as the user asked it
  std::string answer;    // the thread's measured answer, in words
  std::string model;     // as written: a catalog id, a Hugging Face id or a runtime's name
  int height = 0, width = 0, frames = 1, steps = 0;
  SuiteScope scope = SuiteScope::kE2e;  // what the seconds cover
  std::string gpu;                      // as written
  std::string intra, inter;             // empty: the GPU's default / none
  int gpus_per_node = 0;                // 0: the GPU's box
  std::string runtime = "xdit";
  QuestionKind kind = QuestionKind::kFaster;
  double tolerance = 0.2;  // speedup: the largest |predicted / measured - 1| that is right
  std::vector<QuestionRun> runs;
};

// Parses a questions document: {"about": ..., "questions": [...]}. Every field is checked
// (types, ranges, the kind's runs: at least two with seconds for faster and speedup, a
// verdict for fits) and every configuration's syntax; catalog ids are not (a model ditune
// does not know makes the question unanswered, not the file bad). InvalidArgument naming
// `origin`, the question's id or index and the field.
StatusOr<std::vector<Question>> ParseQuestions(std::string_view text, std::string_view origin);
// ParseQuestions of a file; NotFound naming the path when it cannot be read.
StatusOr<std::vector<Question>> LoadQuestionsFile(const std::string& path);

enum class Verdict { kRight, kWrong, kUnanswered };
std::string_view VerdictName(Verdict v);

struct RunAnswer {
  std::optional<double> predicted_s;  // the question's scope; empty where not priced
  std::optional<bool> fits;           // predicted
  double peak_memory_gb = 0;
  std::string priced_as;              // the configuration as the runtime runs it
};

struct QuestionAnswer {
  const Question* question = nullptr;
  Verdict verdict = Verdict::kUnanswered;
  std::string ditune_says;    // ditune's answer in words
  std::string measured_says;  // the thread's, in the same words
  std::string why;            // for unanswered: what ditune cannot express
  std::vector<RunAnswer> runs;
};

struct QuestionsSummary {
  int questions = 0, right = 0, wrong = 0, unanswered = 0;
};

// ditune's answer to each question, priced as `plan --runtime` prices each run with `fits`.
// Fails only where the catalog or fits themselves are unusable.
StatusOr<std::vector<QuestionAnswer>> AnswerQuestions(const Catalog& catalog, const std::vector<Fit>& fits,
                                                      const std::vector<Question>& questions);
QuestionsSummary SummarizeAnswers(const std::vector<QuestionAnswer>& answers);

nlohmann::json QuestionAnswersJson(const std::vector<QuestionAnswer>& answers);

}  // namespace ditune

#endif  // DITUNE_PLANNER_QUESTIONS_H_
