#include "calibration/learn.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodels/calibration.h"
#include "calibration/predict.h"

namespace ditune {

namespace {

bool RunsCompiled(const SuiteRow& row) { return row.config && row.config->compile; }

}  // namespace

double SuiteLoss(const SuiteReport& report) { return SuiteLoss(report, false); }

double SuiteLoss(const SuiteReport& report, bool compiled_only) {
  double sum = 0;
  int n = 0;
  for (const auto& r : report.rows) {
    if (compiled_only && !RunsCompiled(*r.row)) continue;
    if (!r.row->latency_s) {
      if (r.row->role == SuiteRole::kPredict) {
        sum += r.predicted_s ? 1.0 : 0.0;
        ++n;
      }
      continue;
    }
    sum += r.predicted_s ? std::abs(std::log(*r.predicted_s / *r.row->latency_s)) : std::log(2.0);
    ++n;
  }
  return n > 0 ? sum / n : 0;
}

namespace {

// The base fits without mechanisms (and e2e fits unless kept), plus `m` as the mechanisms fit.
std::vector<Fit> With(const std::vector<Fit>& base, const Mechanisms& m, bool keep_scales = false) {
  std::vector<Fit> fits;
  for (const auto& f : base) {
    if (f.kind != kFitKindMechanisms && (keep_scales || f.kind != kFitKindE2e)) fits.push_back(f);
  }
  fits.push_back(MechanismsFit(m));
  return fits;
}

}  // namespace

StatusOr<LearnResult> LearnMechanisms(const std::vector<SuiteRow>& rows, const Catalog& catalog,
                                      const std::vector<Fit>& base, const LearnOptions& options) {
  if (rows.empty()) return Status::InvalidArgument("learning needs a suite with rows");
  if (!(options.min_gain >= 0 && options.min_gain < 1)) {
    return Status::InvalidArgument(fmt::format("--min-gain {}: expected a fraction in [0, 1)", options.min_gain));
  }
  // Without a published latency to predict every constant's loss is the same: the search
  // would return its start as if it had learned it.
  const bool predicts = std::any_of(rows.begin(), rows.end(), [](const SuiteRow& r) {
    return r.role == SuiteRole::kPredict && r.latency_s.has_value();
  });
  if (!predicts) {
    return Status::InvalidArgument(
        "the suite has no predict row with a published latency: there is nothing to learn the constants from "
        "(every group needs its calibrate row and at least one predict row)");
  }
  LearnResult out;
  out.start = options.start;
  out.min_gain = options.min_gain;
  auto evaluate = [&](const Mechanisms& m) -> StatusOr<SuiteReport> {
    ++out.evaluations;
    return PredictSuite(rows, catalog, With(base, m, options.keep_base_scales), nullptr, options.keep_base_scales);
  };
  DITUNE_ASSIGN_OR_RETURN(SuiteReport first, evaluate(options.start));
  out.before = first.summary;
  out.loss_before = SuiteLoss(first);
  Mechanisms best = options.start;
  double best_loss = out.loss_before;
  // A constant that only compiled runs are priced with is judged on their rows, where there
  // are enough of them: beside every eager row no move of it could clear the floor.
  int compiled_rows = 0;
  for (const auto& r : first.rows) {
    compiled_rows += r.row->role == SuiteRole::kPredict && r.row->latency_s && RunsCompiled(*r.row);
  }
  const bool judge_compiled_apart = compiled_rows >= kMinRowsToLearnApart;
  double best_compiled_loss = SuiteLoss(first, true);
  // Coordinate search in log space: deterministic, bounded, and needing no gradient (the
  // simulator's times are piecewise in the constants).
  for (double step : options.steps) {
    for (int pass = 0; pass < options.passes; ++pass) {
      bool improved = false;
      for (const auto& p : MechanismParams()) {
        if (std::find(options.fixed.begin(), options.fixed.end(), p.name) != options.fixed.end()) continue;
        for (double factor : {step, 1.0 / step}) {
          Mechanisms trial = best;
          const double v = std::clamp(best.*p.member * factor, p.lo, p.hi);
          if (v == best.*p.member) continue;
          trial.*p.member = v;
          DITUNE_ASSIGN_OR_RETURN(SuiteReport r, evaluate(trial));
          const double loss = SuiteLoss(r);
          const double compiled_loss = SuiteLoss(r, true);
          const bool gains = p.compiled_only && judge_compiled_apart
                                 ? compiled_loss < best_compiled_loss - std::max(1e-9, options.min_gain * best_compiled_loss) &&
                                       loss < best_loss
                                 : loss < best_loss - std::max(1e-9, options.min_gain * best_loss);
          if (gains) {
            best = trial;
            best_loss = loss;
            best_compiled_loss = compiled_loss;
            improved = true;
            break;  // keep going in this direction on the next pass
          }
        }
      }
      if (!improved) break;
    }
  }
  DITUNE_ASSIGN_OR_RETURN(SuiteReport last, PredictSuite(rows, catalog, With(base, best, options.keep_base_scales),
                                                         &out.scales, options.keep_base_scales));
  out.mechanisms = best;
  out.after = last.summary;
  out.loss_after = best_loss;
  return out;
}

std::string_view HoldOutUnitName(HoldOutUnit unit) { return unit == HoldOutUnit::kSource ? "source" : "group"; }

StatusOr<CrossValidation> CrossValidate(const std::vector<SuiteRow>& rows, const Catalog& catalog,
                                        const std::vector<Fit>& base, const LearnOptions& options,
                                        const std::vector<std::string>& hold_out, HoldOutUnit unit) {
  auto unit_of = [unit](const SuiteRow& r) { return unit == HoldOutUnit::kSource ? PublisherOf(r) : r.group; };
  std::vector<std::string> units;
  std::map<std::string, std::set<std::string>> groups_of;
  for (const auto& r : rows) {
    const std::string u = unit_of(r);
    if (std::find(units.begin(), units.end(), u) == units.end()) units.push_back(u);
    groups_of[u].insert(r.group);
  }
  const char* what = unit == HoldOutUnit::kSource ? "publishers" : "groups";
  if (units.size() < 2) {
    return Status::InvalidArgument(fmt::format(
        "cross-validation needs a suite of two {} or more{}", what,
        unit == HoldOutUnit::kSource ? fmt::format(" (its rows are all {}'s: hold out by group, or add another "
                                                   "publisher's suite)",
                                                   units.empty() ? "nobody" : units[0])
                                     : ""));
  }
  for (const auto& g : hold_out) {
    if (std::find(units.begin(), units.end(), g) == units.end()) {
      return Status::InvalidArgument(fmt::format("no {} '{}' in the suite to hold out; its {}: {}",
                                                 HoldOutUnitName(unit), g, what, fmt::join(units, ", ")));
    }
  }
  if (!hold_out.empty()) {
    std::erase_if(units, [&](const std::string& g) {
      return std::find(hold_out.begin(), hold_out.end(), g) == hold_out.end();
    });
  }
  CrossValidation cv;
  for (const auto& g : units) {
    if (options.progress) {
      options.progress(g, static_cast<int>(cv.groups.size()), static_cast<int>(units.size()));
    }
    std::vector<SuiteRow> train, held;
    for (const auto& r : rows) (unit_of(r) == g ? held : train).push_back(r);
    DITUNE_ASSIGN_OR_RETURN(LearnResult learned, LearnMechanisms(train, catalog, base, options));
    DITUNE_ASSIGN_OR_RETURN(SuiteReport report, PredictSuite(held, catalog, With(base, learned.mechanisms)));
    std::vector<ScoredRow> scored;
    for (const auto& r : report.rows) scored.push_back(Scored(r));
    cv.groups.push_back({g, static_cast<int>(groups_of[g].size()), learned.mechanisms, Summarize(scored)});
    cv.rows.insert(cv.rows.end(), scored.begin(), scored.end());
  }
  cv.summary = Summarize(cv.rows);
  return cv;
}

}  // namespace ditune
