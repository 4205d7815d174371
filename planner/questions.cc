#include "planner/questions.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/cluster.h"
#include "core/enum_names.h"
#include "core/json_fields.h"
#include "core/names.h"
#include "core/parallel_config.h"
#include "core/workload.h"
#include "calibration/validate_suite.h"
#include "planner/plan.h"

namespace ditune {
namespace {

constexpr EnumName<QuestionKind> kQuestionKindNames[] = {
    {QuestionKind::kFaster, "faster"}, {QuestionKind::kSpeedup, "speedup"}, {QuestionKind::kFits, "fits"}};
constexpr EnumName<Verdict> kVerdictNames[] = {
    {Verdict::kRight, "right"}, {Verdict::kWrong, "wrong"}, {Verdict::kUnanswered, "unanswered"}};

std::string RunLabel(const QuestionRun& run) {
  return fmt::format("{} on {} GPU{}", run.config.empty() ? "one device" : run.config, run.gpus,
                     run.gpus == 1 ? "" : "s");
}

std::string Seconds2(double s) { return s >= 100 ? fmt::format("{:.0f} s", s) : fmt::format("{:.3g} s", s); }

Question ParseOne(const nlohmann::json& j, const std::string& where, Status* status) {
  Question q;
  JsonFields f(j, where);
  q.id = f.String("id");
  if (!f.status().ok()) {
    *status = f.status();
    return q;
  }
  const std::string at = q.id.empty() ? where : fmt::format("{} ('{}')", where, q.id);
  JsonFields g(j, at);  // the same object, its messages naming the id
  (void)g.String("id");
  q.source = g.String("source");
  q.question = g.String("question");
  q.answer = g.String("answer");
  q.model = g.String("model");
  q.height = static_cast<int>(g.Int("height", 16, 65536));
  q.width = static_cast<int>(g.Int("width", 16, 65536));
  q.frames = g.Has("frames") ? static_cast<int>(g.Int("frames", 1, 100000)) : 1;
  q.steps = static_cast<int>(g.Int("steps", 1, 100000));
  if (g.Has("scope")) {
    const std::string scope = g.Enum("scope", {"e2e", "dit", "step"});
    q.scope = scope == "dit" ? SuiteScope::kDit : scope == "step" ? SuiteScope::kStep : SuiteScope::kE2e;
  }
  q.gpu = g.String("gpu");
  if (g.Has("intra")) q.intra = g.String("intra");
  if (g.Has("inter")) q.inter = g.String("inter");
  if (g.Has("gpus_per_node")) q.gpus_per_node = static_cast<int>(g.Int("gpus_per_node", 1, 1024));
  if (g.Has("runtime")) q.runtime = g.String("runtime");
  std::vector<std::string> kinds;
  for (const auto& e : kQuestionKindNames) kinds.emplace_back(e.name);
  const std::string ask = g.Enum("ask", kinds);
  if (auto kind = ParseIn(kQuestionKindNames, ask, "ask"); kind.ok()) q.kind = *kind;
  if (g.Has("tolerance")) {
    if (q.kind != QuestionKind::kSpeedup) g.Fail("'tolerance' is for ask 'speedup' only");
    q.tolerance = g.Number("tolerance", 0.01, 1);
  }
  const nlohmann::json* runs = g.Array("runs");
  g.RejectUnknownKeys();
  if (!g.status().ok()) {
    *status = g.status();
    return q;
  }
  int i = 0;
  for (const auto& r : *runs) {
    const std::string rwhere = fmt::format("{}: runs[{}]", at, i++);
    if (!r.is_object()) {
      *status = Status::InvalidArgument(fmt::format("{}: expected an object", rwhere));
      return q;
    }
    JsonFields rf(r, rwhere);
    QuestionRun run;
    run.gpus = static_cast<int>(rf.Int("gpus", 1, 100000));
    run.config = rf.Has("config") ? rf.String("config") : "";
    if (q.kind == QuestionKind::kFits) {
      run.fits = rf.Bool("fits");
    } else {
      run.seconds = rf.Number("seconds", 1e-6, 1e7);
    }
    rf.RejectUnknownKeys();
    if (!rf.status().ok()) {
      *status = rf.status();
      return q;
    }
    if (auto c = ParseParallelConfig(run.config); !c.ok()) {
      *status = Status::InvalidArgument(fmt::format("{}: config: {}", rwhere, c.status().message()));
      return q;
    }
    q.runs.push_back(std::move(run));
  }
  const size_t least = q.kind == QuestionKind::kFits ? 1 : 2;
  if (q.runs.size() < least) {
    *status = Status::InvalidArgument(fmt::format("{}: ask '{}' needs at least {} run{} in 'runs'", at, ask, least,
                                                  least == 1 ? "" : "s"));
  }
  return q;
}

}  // namespace

std::string_view QuestionKindName(QuestionKind k) { return NameIn(kQuestionKindNames, k); }

std::string_view VerdictName(Verdict v) { return NameIn(kVerdictNames, v); }

StatusOr<std::vector<Question>> ParseQuestions(std::string_view text, std::string_view origin) {
  DITUNE_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonText(text, origin));
  JsonFields f(doc, std::string(origin));
  if (!doc.is_object()) return Status::InvalidArgument(fmt::format("{}: expected an object with \"questions\"", origin));
  if (f.Has("about")) (void)f.String("about");
  const nlohmann::json* list = f.Array("questions");
  f.RejectUnknownKeys();
  if (!f.status().ok()) return f.status();
  std::vector<Question> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string where = fmt::format("{}: questions[{}]", origin, i);
    if (!(*list)[i].is_object()) return Status::InvalidArgument(fmt::format("{}: expected an object", where));
    Status st;
    Question q = ParseOne((*list)[i], where, &st);
    if (!st.ok()) return st;
    for (const auto& other : out) {
      if (other.id == q.id) return Status::InvalidArgument(fmt::format("{}: id '{}' is used twice", where, q.id));
    }
    out.push_back(std::move(q));
  }
  if (out.empty()) return Status::InvalidArgument(fmt::format("{}: \"questions\" is empty", origin));
  return out;
}

StatusOr<std::vector<Question>> LoadQuestionsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("cannot read the questions file {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseQuestions(text.str(), path);
}

namespace {

QuestionAnswer Answer(const Catalog& catalog, const std::vector<Fit>& fits, const Question& q) {
  QuestionAnswer a;
  a.question = &q;
  a.runs.resize(q.runs.size());
  auto unanswered = [&](std::string why) {
    a.verdict = Verdict::kUnanswered;
    a.why = std::move(why);
    return a;
  };
  auto model = FindModel(catalog, q.model);
  if (!model.ok()) return unanswered(std::string(model.status().message()));
  auto gpu = FindGpu(catalog, q.gpu);
  if (!gpu.ok()) return unanswered(std::string(gpu.status().message()));
  if (!catalog.Runtime(q.runtime).ok()) return unanswered(fmt::format("runtime '{}' is not in the catalog", q.runtime));
  Workload w;
  w.model_id = (*model)->id;
  w.height = q.height;
  w.width = q.width;
  w.frames = q.frames;
  w.steps = q.steps;
  w.output = q.scope == SuiteScope::kE2e ? OutputType::kDecoded : OutputType::kLatent;
  PlanOptions options;
  options.runtime = q.runtime;
  for (size_t i = 0; i < q.runs.size(); ++i) {
    const QuestionRun& run = q.runs[i];
    ClusterSpec spec;
    spec.gpu_id = (*gpu)->id;
    spec.gpus = run.gpus;
    spec.intra_id = q.intra;
    spec.inter_id = q.inter;
    spec.gpus_per_node = q.gpus_per_node > 0 ? std::min(q.gpus_per_node, run.gpus) : 0;
    auto cluster = ResolveCluster(spec, catalog);
    if (!cluster.ok()) return unanswered(fmt::format("{}: {}", RunLabel(run), cluster.status().message()));
    auto config = ParseParallelConfig(run.config);
    if (!config.ok()) return unanswered(fmt::format("{}: {}", RunLabel(run), config.status().message()));
    ParallelConfig priced;
    auto r = SimulateAsPlanned(catalog, w, *cluster, fits, options, *config, &priced);
    if (!r.ok()) return unanswered(fmt::format("{}: {}", RunLabel(run), r.status().message()));
    RunAnswer& ra = a.runs[i];
    ra.fits = r->fits;
    ra.peak_memory_gb = r->peak_memory.value() / 1e9;
    ra.priced_as = ToString(priced);
    if (r->fits) ra.predicted_s = ScopeSeconds(*r, q.scope);
  }

  switch (q.kind) {
    case QuestionKind::kFits: {
      std::vector<std::string> says, measured;
      bool agree = true;
      for (size_t i = 0; i < q.runs.size(); ++i) {
        says.push_back(fmt::format("{} {} ({:.1f} GB)", RunLabel(q.runs[i]), *a.runs[i].fits ? "fits" : "does not fit",
                                   a.runs[i].peak_memory_gb));
        measured.push_back(fmt::format("{} {}", RunLabel(q.runs[i]), *q.runs[i].fits ? "ran" : "ran out of memory"));
        agree = agree && *a.runs[i].fits == *q.runs[i].fits;
      }
      a.ditune_says = fmt::format("{}", fmt::join(says, "; "));
      a.measured_says = fmt::format("{}", fmt::join(measured, "; "));
      a.verdict = agree ? Verdict::kRight : Verdict::kWrong;
      return a;
    }
    case QuestionKind::kFaster: {
      size_t measured_best = 0;
      for (size_t i = 1; i < q.runs.size(); ++i) {
        if (*q.runs[i].seconds < *q.runs[measured_best].seconds) measured_best = i;
      }
      a.measured_says = fmt::format("{} fastest ({})", RunLabel(q.runs[measured_best]),
                                    Seconds2(*q.runs[measured_best].seconds));
      // A run the thread measured that ditune predicts not to fit is a wrong answer, not a
      // missing one: ditune would have advised against it.
      for (size_t i = 0; i < q.runs.size(); ++i) {
        if (!a.runs[i].predicted_s) {
          a.ditune_says = fmt::format("{} does not fit ({:.1f} GB)", RunLabel(q.runs[i]), a.runs[i].peak_memory_gb);
          a.verdict = Verdict::kWrong;
          return a;
        }
      }
      size_t best = 0;
      for (size_t i = 1; i < q.runs.size(); ++i) {
        if (*a.runs[i].predicted_s < *a.runs[best].predicted_s) best = i;
      }
      a.ditune_says = fmt::format("{} fastest ({})", RunLabel(q.runs[best]), Seconds2(*a.runs[best].predicted_s));
      a.verdict = *q.runs[best].seconds <= kChoiceWithin * *q.runs[measured_best].seconds ? Verdict::kRight
                                                                                           : Verdict::kWrong;
      return a;
    }
    case QuestionKind::kSpeedup: {
      for (size_t i = 0; i < q.runs.size(); ++i) {
        if (!a.runs[i].predicted_s) {
          a.ditune_says = fmt::format("{} does not fit ({:.1f} GB)", RunLabel(q.runs[i]), a.runs[i].peak_memory_gb);
          a.verdict = Verdict::kWrong;
          return a;
        }
      }
      std::vector<std::string> says, measured;
      bool within = true;
      for (size_t i = 1; i < q.runs.size(); ++i) {
        const double predicted = *a.runs[0].predicted_s / *a.runs[i].predicted_s;
        const double actual = *q.runs[0].seconds / *q.runs[i].seconds;
        says.push_back(fmt::format("{} {:.2f}x", RunLabel(q.runs[i]), predicted));
        measured.push_back(fmt::format("{} {:.2f}x", RunLabel(q.runs[i]), actual));
        within = within && std::abs(predicted / actual - 1) <= q.tolerance;
      }
      a.ditune_says = fmt::format("over {}: {}", RunLabel(q.runs[0]), fmt::join(says, "; "));
      a.measured_says = fmt::format("over {}: {}", RunLabel(q.runs[0]), fmt::join(measured, "; "));
      a.verdict = within ? Verdict::kRight : Verdict::kWrong;
      return a;
    }
  }
  return a;
}

}  // namespace

StatusOr<std::vector<QuestionAnswer>> AnswerQuestions(const Catalog& catalog, const std::vector<Fit>& fits,
                                                      const std::vector<Question>& questions) {
  std::vector<QuestionAnswer> out;
  out.reserve(questions.size());
  for (const auto& q : questions) out.push_back(Answer(catalog, fits, q));
  return out;
}

QuestionsSummary SummarizeAnswers(const std::vector<QuestionAnswer>& answers) {
  QuestionsSummary s;
  for (const auto& a : answers) {
    ++s.questions;
    switch (a.verdict) {
      case Verdict::kRight: ++s.right; break;
      case Verdict::kWrong: ++s.wrong; break;
      case Verdict::kUnanswered: ++s.unanswered; break;
    }
  }
  return s;
}

nlohmann::json QuestionAnswersJson(const std::vector<QuestionAnswer>& answers) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& a : answers) {
    const Question& q = *a.question;
    nlohmann::json runs = nlohmann::json::array();
    for (size_t i = 0; i < q.runs.size(); ++i) {
      const QuestionRun& run = q.runs[i];
      const RunAnswer& ra = a.runs[i];
      nlohmann::json j = {{"gpus", run.gpus}, {"config", run.config}};
      if (run.seconds) j["measured_s"] = *run.seconds;
      if (run.fits) j["measured_fits"] = *run.fits;
      j["predicted_s"] = ra.predicted_s ? nlohmann::json(*ra.predicted_s) : nlohmann::json(nullptr);
      j["predicted_fits"] = ra.fits ? nlohmann::json(*ra.fits) : nlohmann::json(nullptr);
      if (ra.fits) j["predicted_memory_gb"] = ra.peak_memory_gb;
      if (!ra.priced_as.empty()) j["priced_as"] = ra.priced_as;
      runs.push_back(std::move(j));
    }
    nlohmann::json j = {{"id", q.id},
                        {"ask", QuestionKindName(q.kind)},
                        {"question", q.question},
                        {"source", q.source},
                        {"verdict", VerdictName(a.verdict)},
                        {"ditune_says", a.ditune_says},
                        {"measured", a.measured_says.empty() ? q.answer : a.measured_says},
                        {"runs", runs}};
    if (!a.why.empty()) j["why"] = a.why;
    list.push_back(std::move(j));
  }
  const QuestionsSummary s = SummarizeAnswers(answers);
  return {{"questions", list},
          {"summary", {{"questions", s.questions}, {"right", s.right}, {"wrong", s.wrong}, {"unanswered", s.unanswered}}}};
}

}  // namespace ditune
