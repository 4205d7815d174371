// `ditune validate --suite FILE.csv [--db PATH] [--json]`.
#include <fstream>
#include <optional>
#include <set>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "calibration/intervals.h"
#include "calibration/learn.h"
#include "core/stats.h"
#include "calibration/validate_suite.h"
#include "planner/questions.h"

#include <unistd.h>

namespace ditune::cli {

namespace {

std::string Percent(double x) { return fmt::format("{:.1f}%", 100 * x); }

// Leave-one-source-out (or leave-one-group-out) over the suite: the constants the store may
// hold are not used (they may have been learned on what is held out); its other fits are.
int CrossValidateCmd(const cxxopts::ParseResult& args, const std::vector<SuiteRow>& rows, const Catalog& catalog) {
  // By publisher where the rows have two or more: a publisher's groups share its runtime,
  // machines and timing, and holding them out together is the test of tables never seen.
  std::set<std::string> publishers;
  for (const auto& r : rows) publishers.insert(PublisherOf(r));
  HoldOutUnit unit = publishers.size() >= 2 ? HoldOutUnit::kSource : HoldOutUnit::kGroup;
  if (args.count("by")) {
    const std::string by = args["by"].as<std::string>();
    if (by != "source" && by != "group") {
      return Fail("validate", Status::InvalidArgument(fmt::format("--by '{}': expected source or group", by)));
    }
    unit = by == "source" ? HoldOutUnit::kSource : HoldOutUnit::kGroup;
  }
  std::vector<Fit> base;
  if (args.count("db")) {
    auto store = OpenStore(args["db"].as<std::string>());
    if (!store.ok()) return Fail("validate", store.status());
    auto fits = (*store)->ActiveFits();
    if (!fits.ok()) return Fail("validate", fits.status());
    base = *fits;
  }
  LearnOptions options;
  if (args.count("min-gain")) options.min_gain = args["min-gain"].as<double>();
  if (isatty(STDERR_FILENO)) {
    options.progress = [](const std::string& group, int i, int n) {
      std::cerr << fmt::format("\r[{}/{}] learning without {}\x1b[K", i + 1, n, group) << std::flush;
    };
  }
  std::vector<std::string> hold_out;
  if (args.count("hold-out")) hold_out = args["hold-out"].as<std::vector<std::string>>();
  auto cv = CrossValidate(rows, catalog, base, options, hold_out, unit);
  if (isatty(STDERR_FILENO)) std::cerr << "\r\x1b[K";
  if (!cv.ok()) return Fail("validate", cv.status());
  const SuiteSummary& s = cv->summary;
  if (args.count("json")) {
    nlohmann::json groups = nlohmann::json::array(), out = nlohmann::json::array();
    for (const auto& g : cv->groups) {
      groups.push_back({{"held_out", g.group}, {"groups", g.groups}, {"summary", SuiteSummaryJson(g.summary)},
                        {"learned", MechanismsToJson(g.learned)}});
    }
    for (const auto& r : cv->rows) {
      out.push_back({{"group", r.group}, {"publisher", r.publisher}, {"line", r.line}, {"gpus", r.gpus},
                     {"config", r.config}, {"runtime", r.runtime},
                     {"role", r.predict ? "predict" : "calibrate"},
                     {"published_s", r.published_s ? nlohmann::json(*r.published_s) : nlohmann::json("OOM")},
                     {"predicted_s", r.predicted_s ? nlohmann::json(*r.predicted_s) : nlohmann::json(nullptr)},
                     {"ape", r.ape ? nlohmann::json(*r.ape) : nlohmann::json(nullptr)}});
    }
    std::cout << nlohmann::json{{"held_out_by", HoldOutUnitName(unit)},
                                {"groups", groups},
                                {"rows", out},
                                {"summary", SuiteSummaryJson(s)}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& g : cv->groups) {
    const SuiteSummary& t = g.summary;
    table.push_back({g.group, std::to_string(g.groups), std::to_string(t.rows), Percent(t.median_ape), Percent(t.p90_ape),
                     fmt::format("{}/{}", t.oom_agree, t.oom_rows), std::to_string(t.false_oom),
                     t.choice_sets > 0 ? fmt::format("{}/{}", t.choice_pass, t.choice_sets) : "-"});
  }
  if (unit == HoldOutUnit::kSource) {
    std::cout << "leave-one-source-out: every group of one publisher predicted, each from its calibrate row, with "
                 "constants learned on the other publishers' rows\n";
  } else {
    std::cout << "leave-one-group-out: each group predicted from its calibrate rows with constants learned on the "
                 "other groups\n";
  }
  std::cout << FormatTable({unit == HoldOutUnit::kSource ? "held-out publisher" : "held-out group", "groups", "rows",
                            "median APE", "p90 APE", "OOM agreed", "no fit", "choice"},
                           table);
  std::cout << fmt::format(
      "cross-validated: by={} rows={} median_ape={:.3f} p90_ape={:.3f} oom_agree={}/{} choice={}/{}\n",
      HoldOutUnitName(unit), s.rows, s.median_ape, s.p90_ape, s.oom_agree, s.oom_rows, s.choice_pass, s.choice_sets);
  return 0;
}

// Real questions from public threads, each answered as `plan` would price its runs, against
// what its thread measured.
int QuestionsCmd(const cxxopts::ParseResult& args) {
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("validate", catalog.status());
  auto questions = LoadQuestionsFile(args["questions"].as<std::string>());
  if (!questions.ok()) return Fail("validate", questions.status());
  auto store = OpenPricingStore(args);
  if (!store.ok()) return Fail("validate", store.status());
  auto fits = (*store)->ActiveFits();
  if (!fits.ok()) return Fail("validate", fits.status());
  auto answers = AnswerQuestions(**catalog, *fits, *questions);
  if (!answers.ok()) return Fail("validate", answers.status());
  const QuestionsSummary s = SummarizeAnswers(*answers);
  if (args.count("json")) {
    std::cout << QuestionAnswersJson(*answers).dump(2) << "\n";
    return 0;
  }
  for (const auto& a : *answers) {
    const Question& q = *a.question;
    std::cout << fmt::format("{} [{}] {}: {}\n", q.id, QuestionKindName(q.kind), VerdictName(a.verdict), q.question);
    if (a.verdict == Verdict::kUnanswered) {
      std::cout << fmt::format("  cannot answer: {}\n", a.why);
    } else {
      std::cout << fmt::format("  ditune:   {}\n  measured: {}\n", a.ditune_says, a.measured_says);
    }
    std::cout << fmt::format("  source:   {}\n", q.source);
  }
  std::cout << fmt::format("questions: {} right={} wrong={} unanswered={}\n", s.questions, s.right, s.wrong,
                           s.unanswered);
  return 0;
}

}  // namespace

int RunValidate(int argc, char** argv) {
  cxxopts::Options options("ditune validate",
                           "Calibrate on each group's calibrate row, predict the rest, report the error");
  options.add_options()
      ("suite", "suite CSV (group,model,height,width,frames,steps,scope,gpu,gpus,nodes,gpus_per_node,intra,"
                "inter,config,role,latency_s,source); repeat it (or separate by commas) for several, read as one",
       cxxopts::value<std::vector<std::string>>())
      ("db", "calibration database: its fits are used, and the calibrate rows and their fits are recorded "
             "in it (without --db, the default database is only read)", cxxopts::value<std::string>())
      ("cross-validate", "learn the global constants (calibrate learn) without each publisher (or group) in "
                         "turn and predict its rows, each group from its calibrate row")
      ("by", "with --cross-validate: hold out by 'source' (every group of one publisher at once; the default "
             "where the suites hold two publishers or more) or by 'group'", cxxopts::value<std::string>())
      ("hold-out", "with --cross-validate: hold out only these publishers or groups (comma-separated), each in turn",
       cxxopts::value<std::vector<std::string>>())
      ("min-gain", "with --cross-validate: the least fraction of the loss a constant's move must gain (calibrate "
                   "learn's; default 0.04)", cxxopts::value<double>())
      ("questions", "instead of a suite: questions from public threads with their measured answers (JSON; "
                    "data/validation/questions.json), each answered as `plan` prices its runs", cxxopts::value<std::string>())
      ("json", "one JSON document on stdout");
  bool help = false;
  auto args = Parse(options, argc, argv, &help);
  if (!args.ok()) return Fail("validate", args.status());
  if (help) return 0;
  if (args->count("questions")) {
    for (const char* flag : {"suite", "cross-validate", "by", "hold-out", "min-gain"}) {
      if (args->count(flag)) {
        return Fail("validate", Status::InvalidArgument(fmt::format("--questions takes no --{} (it prices each "
                                                                    "question's runs with the store's fits)", flag)));
      }
    }
    return QuestionsCmd(*args);
  }
  if (args->count("suite") == 0) {
    return Fail("validate", Status::InvalidArgument("--suite FILE.csv (or --questions FILE.json) is required"));
  }
  auto catalog = Catalog::Default();
  if (!catalog.ok()) return Fail("validate", catalog.status());
  auto rows = LoadSuiteFiles((*args)["suite"].as<std::vector<std::string>>(), **catalog);
  if (!rows.ok()) return Fail("validate", rows.status());
  for (const char* flag : {"hold-out", "by", "min-gain"}) {
    if (args->count(flag) && !args->count("cross-validate")) {
      return Fail("validate", Status::InvalidArgument(fmt::format("--{} needs --cross-validate", flag)));
    }
  }
  if (args->count("cross-validate")) {
    std::vector<std::string> left_out;
    const std::vector<SuiteRow> priced = PricedRows(*rows, &left_out);
    for (const auto& line : left_out) std::cerr << "ditune validate: left out " << line << "\n";
    return CrossValidateCmd(*args, priced, **catalog);
  }

  const bool record = args->count("db") > 0;
  auto store = OpenStore(record ? (*args)["db"].as<std::string>() : Store::DefaultPath());
  if (!store.ok()) return Fail("validate", store.status());
  // Without --db the default store's fits are read and nothing of this run is written to it
  // (opening it seeds it, or brings in the shipped factory release, as for every command).
  std::unique_ptr<Store> scratch;
  Store* target = store->get();
  if (!record) {
    auto fits = (*store)->ActiveFits();
    if (!fits.ok()) return Fail("validate", fits.status());
    auto mem = Store::Open(":memory:");
    if (!mem.ok()) return Fail("validate", mem.status());
    scratch = std::move(*mem);
    if (!fits->empty()) {
      Status st = scratch->ReplaceFits(*fits);
      if (!st.ok()) return Fail("validate", st);
    }
    target = scratch.get();
  }
  auto report = ValidateSuite(*rows, **catalog, target);
  if (!report.ok()) return Fail("validate", report.status());
  const SuiteSummary& s = report->summary;
  // Each prediction's 80% interval (its (GPU, model) scale comes from the group's calibrate
  // row: a published run), and how many published values fall inside.
  auto intervals = ShippedIntervals((*catalog)->data_dir());
  if (!intervals.ok()) return Fail("validate", intervals.status());
  std::vector<std::optional<PredictionInterval>> band(report->rows.size());
  int inside = 0, judged = 0;
  std::vector<double> widths;
  for (size_t i = 0; i < report->rows.size(); ++i) {
    const auto& r = report->rows[i];
    if (!*intervals || !r.predicted_s || !r.refused.empty()) continue;
    band[i] = IntervalFor(**intervals, r.row->runtime, Provenance::kPublished, *r.predicted_s);
    if (r.row->role != SuiteRole::kPredict || !r.row->latency_s) continue;
    ++judged;
    inside += *r.row->latency_s >= band[i]->lo_s && *r.row->latency_s <= band[i]->hi_s;
    widths.push_back(2 * band[i]->half_width());
  }

  if (args->count("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : report->rows) {
      out.push_back({{"group", r.row->group}, {"line", r.row->line}, {"gpus", r.row->cluster.gpus},
                     {"config", r.config}, {"role", r.row->role == SuiteRole::kCalibrate ? "calibrate" : "predict"},
                     {"published_s", r.row->latency_s ? nlohmann::json(*r.row->latency_s) : nlohmann::json("OOM")},
                     {"predicted_s", r.predicted_s ? nlohmann::json(*r.predicted_s) : nlohmann::json(nullptr)},
                     {"ape", r.ape ? nlohmann::json(*r.ape) : nlohmann::json(nullptr)}, {"feasible", r.feasible},
                     {"runtime", r.row->runtime},
                     {"published_memory_gb", r.row->memory_gb ? nlohmann::json(*r.row->memory_gb) : nlohmann::json(nullptr)},
                     {"predicted_memory_gb",
                      r.predicted_memory_gb ? nlohmann::json(*r.predicted_memory_gb) : nlohmann::json(nullptr)},
                     {"memory_phase", r.memory_phase.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.memory_phase)},
                     {"memory_ape", r.memory_ape ? nlohmann::json(*r.memory_ape) : nlohmann::json(nullptr)},
                     {"refused", r.refused.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.refused)}});
      const auto& b = band[&r - report->rows.data()];
      out.back()["predicted_lo_s"] = b ? nlohmann::json(b->lo_s) : nlohmann::json(nullptr);
      out.back()["predicted_hi_s"] = b ? nlohmann::json(b->hi_s) : nlohmann::json(nullptr);
      out.back()["provenance"] = b ? nlohmann::json{{"compute", ProvenanceName(b->provenance)}, {"interval", b->basis}}
                                   : nlohmann::json(nullptr);
      const std::optional<MemoryInterval> mb =
          *intervals && r.predicted_memory_gb ? MemoryIntervalFor(**intervals, *r.predicted_memory_gb) : std::nullopt;
      out.back()["predicted_memory_lo_gb"] = mb ? nlohmann::json(mb->lo_gb) : nlohmann::json(nullptr);
      out.back()["predicted_memory_hi_gb"] = mb ? nlohmann::json(mb->hi_gb) : nlohmann::json(nullptr);
    }
    nlohmann::json summary = SuiteSummaryJson(s);
    summary["interval_rows"] = judged;
    summary["interval_inside"] = inside;
    summary["interval_median_width"] = widths.empty() ? nlohmann::json(nullptr) : nlohmann::json(Median(widths));
    std::cout << nlohmann::json{{"rows", out},
                                {"summary", summary}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& r : report->rows) {
    table.push_back({r.row->group, std::to_string(r.row->cluster.gpus), r.config,
                     r.row->role == SuiteRole::kCalibrate ? "calibrate" : "predict",
                     r.row->latency_s ? fmt::format("{:.3f}", *r.row->latency_s) : "OOM",
                     !r.refused.empty() ? "refused" : r.predicted_s ? fmt::format("{:.3f}", *r.predicted_s) : "no fit",
                     r.ape ? fmt::format("{:.1f}%", 100 * *r.ape) : "-"});
    if (s.memory_rows > 0) {
      table.back().push_back(r.row->memory_gb ? fmt::format("{:.1f}", *r.row->memory_gb) : "-");
      table.back().push_back(r.predicted_memory_gb ? fmt::format("{:.1f} ({})", *r.predicted_memory_gb, r.memory_phase)
                                                   : "-");
      table.back().push_back(r.memory_ape ? fmt::format("{:.1f}%", 100 * *r.memory_ape) : "-");
    }
  }
  // Why each refused row was not predicted (the rest were).
  std::string refusals;
  for (const auto& r : report->rows) {
    if (!r.refused.empty()) refusals += fmt::format("refused: line {} ({}): {}\n", r.row->line, r.row->group, r.refused);
  }
  std::vector<std::string> header = {"group", "gpus", "config", "role", "published_s", "predicted_s", "APE"};
  if (s.memory_rows > 0) {
    for (const char* h : {"published_GB", "predicted_GB (peak phase)", "memory APE"}) header.push_back(h);
  }
  std::cout << FormatTable(header, table);
  std::cout << fmt::format(
      "choice: {} of {} sets of published configurations (one group, one GPU count, eager or compiled) have ditune's fastest within 10% "
      "of the published fastest\n",
      s.choice_pass, s.choice_sets);
  for (const auto& m : s.choice_misses) {
    std::cout << fmt::format(
        "choice missed: {} on {} GPUs: ditune's fastest {} measured {:.3g} s (predicted {:.3g}); the fastest {} "
        "{:.3g} s (predicted {:.3g})\n",
        m.group, m.gpus, m.chosen, m.chosen_published_s, m.chosen_predicted_s, m.fastest, m.fastest_published_s,
        m.fastest_predicted_s);
  }
  std::cout << refusals;
  std::cout << fmt::format("summary: rows={} median_ape={:.3f} p90_ape={:.3f} oom_agree={}/{}{}\n", s.rows,
                           s.median_ape, s.p90_ape, s.oom_agree, s.oom_rows,
                           s.refused > 0 ? fmt::format(" refused={}", s.refused) : "");
  if (s.memory_rows > 0) {
    std::cout << fmt::format("memory: rows={} median_ape={:.3f} p90_ape={:.3f}\n", s.memory_rows,
                             s.memory_median_ape, s.memory_p90_ape);
  }
  if (judged > 0) {
    std::cout << fmt::format("interval: {} of {} published values inside their 80% interval ({:.0f}%), median width "
                             "{:.0f}% of the prediction\n",
                             inside, judged, 100.0 * inside / judged, 100 * Median(widths));
  }
  return 0;
}

}  // namespace ditune::cli
