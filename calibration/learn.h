// Learning the global mechanism constants (costmodels/mechanisms.h) from a training suite,
// and judging them by leave-one-group-out.
//
// The training suite's every row counts, calibrate and predict alike; what is learned is the
// one set of constants for all of them — never anything per group, per row or per model.
// Each evaluation runs PredictSuite: the calibrate rows fit their (GPU, model) scales under
// the candidate constants, then every row is predicted.
#ifndef DITUNE_CALIBRATION_LEARN_H_
#define DITUNE_CALIBRATION_LEARN_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "costmodels/mechanisms.h"
#include "store/store.h"
#include "calibration/suite.h"
#include "calibration/validate_suite.h"

namespace ditune {

// The objective: the mean over the rows with a published latency of |ln(predicted /
// published)| (a row predicted not to fit counts ln 2), plus 1 for each published OOM
// predicted to fit, over the number of rows counted. Symmetric in over- and
// under-prediction, and robust to one wild row.
double SuiteLoss(const SuiteReport& report);

struct LearnOptions {
  // Multiplicative step sizes of the coordinate search, largest first: each constant is
  // tried at x·f and x/f (clamped to its bounds) while that lowers the loss.
  std::vector<double> steps = {2.0, 1.41, 1.19, 1.09, 1.04};
  // Passes over the constants per step size at most.
  int passes = 4;
  // Where the search starts.
  Mechanisms start;
  // Keep the base fits' (GPU, model) scales where no calibrate row covers the pair
  // (PredictSuite); and the key of the mechanisms fit that is learned.
  bool keep_base_scales = false;
  // Constants measured rather than learned: the search leaves them as they start. The host
  // time of one eager op is one of them: a block's host time is its op count times a learned
  // family scale times this figure, and a method's its learned op count times it, so beside
  // those it is nearly redundant (only a few ops, such as PipeFusion's K/V buffer copies,
  // take it alone); learned with them it wandered between folds of the leave-one-group-out
  // (10.6 to 30 µs) and carried the family scales with it. A profiler trace measures it
  // (`calibrate ingest profile_trace_rank_0.json.gz`).
  std::vector<std::string> fixed = {"eager_op_us"};
  // Called by CrossValidate before each held-out group (progress for people), when set.
  std::function<void(const std::string& group, int index, int groups)> progress;
};

struct LearnResult {
  Mechanisms mechanisms;
  Mechanisms start;
  double loss_before = 0, loss_after = 0;
  SuiteSummary before, after;  // the training suite predicted with the start and learned constants
  std::vector<Fit> scales;     // the (GPU, model) scales of the calibrate rows, with the learned constants
  int evaluations = 0;
};

// Learns the constants on `rows` over the `base` fits (their mechanisms and e2e fits
// aside). Deterministic: the same rows, catalog and options give the same result.
StatusOr<LearnResult> LearnMechanisms(const std::vector<SuiteRow>& rows, const Catalog& catalog,
                                      const std::vector<Fit>& base, const LearnOptions& options = {});

struct HeldOutGroup {
  std::string group;
  Mechanisms learned;  // on every other group
  SuiteSummary summary;  // of this group's predict rows
};

struct CrossValidation {
  std::vector<HeldOutGroup> groups;
  std::vector<ScoredRow> rows;
  SuiteSummary summary;  // over every held-out predict row (and every group's choice sets)
};

// Leave-one-group-out: for each group, learns the constants on the other groups' rows only,
// then predicts the group from its own calibrate rows and those constants. With `hold_out`,
// only the groups it names are held out, each in turn (InvalidArgument, listing the suite's
// groups, for a name the suite lacks). The suite's rows are predicted on HostThreads()
// threads; the result does not depend on how many.
StatusOr<CrossValidation> CrossValidate(const std::vector<SuiteRow>& rows, const Catalog& catalog,
                                        const std::vector<Fit>& base, const LearnOptions& options = {},
                                        const std::vector<std::string>& hold_out = {});

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_LEARN_H_
