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
// The same over the rows run under torch.compile alone (0 where there are none).
double SuiteLoss(const SuiteReport& report, bool compiled_only);

// A constant priced only on a subset of the rows (MechanismParam::compiled_only) is judged on
// that subset's loss where it holds this many predict rows with a published latency, and on
// the whole suite's otherwise.
inline constexpr int kMinRowsToLearnApart = 10;

struct LearnOptions {
  // Multiplicative step sizes of the coordinate search, largest first: each constant is
  // tried at x·f and x/f (clamped to its bounds) while that lowers the loss.
  std::vector<double> steps = {2.0, 1.41, 1.19, 1.09, 1.04};
  // Passes over the constants per step size at most.
  int passes = 4;
  // A move is taken only where it lowers the loss by this fraction of it at least: a
  // constant the rows barely see stays where it starts instead of drifting to a bound on
  // noise, and carrying that drift to the tables it never saw. Learned on every shipped
  // suite, each publisher held out in turn (docs/VALIDATION.md): no floor gave 9.8% median
  // and 64% p90 held out (the host scales of the blocks ran to their bounds on other
  // runtimes' rows and priced xDiT's small images twice too slow); 0.01, 0.02, 0.04 and
  // 0.08 gave 9.0/33.9%, 7.9/32.5%, 7.3/30.2% and 8.1/31.3% (0.08: nothing moves). A
  // constant only compiled runs are priced with takes the floor on their loss alone
  // (kMinRowsToLearnApart), and must not raise the whole suite's.
  double min_gain = 0.04;
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
  double min_gain = 0;  // LearnOptions::min_gain it was learned with
};

// Learns the constants on `rows` over the `base` fits (their mechanisms and e2e fits
// aside). Deterministic: the same rows, catalog and options give the same result.
StatusOr<LearnResult> LearnMechanisms(const std::vector<SuiteRow>& rows, const Catalog& catalog,
                                      const std::vector<Fit>& base, const LearnOptions& options = {});

// What cross-validation holds out at once: one group (leave-one-group-out), or every group
// of one publisher (leave-one-source-out, PublisherOf): a publisher's tables share its
// runtime, its machines and its way of timing, so holding out one of its groups at a time
// lets the others teach its quirks.
enum class HoldOutUnit { kGroup, kSource };

// "group" or "source".
std::string_view HoldOutUnitName(HoldOutUnit unit);

struct HeldOutGroup {
  std::string group;     // the group, or the publisher, held out
  int groups = 1;        // how many groups it held
  Mechanisms learned;    // on every other group (publisher)
  SuiteSummary summary;  // of its predict rows
};

struct CrossValidation {
  std::vector<HeldOutGroup> groups;
  std::vector<ScoredRow> rows;
  SuiteSummary summary;  // over every held-out predict row (and every group's choice sets)
};

// Leave-one-group-out (or leave-one-source-out, by `unit`): for each group (publisher),
// learns the constants on the other groups' (publishers') rows only, then predicts its rows,
// each group from its own calibrate row, with those constants. With `hold_out`, only the
// groups (publishers) it names are held out, each in turn (InvalidArgument, listing the
// suite's, for a name the suite lacks; and for fewer than two to hold out among). The suite's
// rows are predicted on HostThreads() threads; the result does not depend on how many.
StatusOr<CrossValidation> CrossValidate(const std::vector<SuiteRow>& rows, const Catalog& catalog,
                                        const std::vector<Fit>& base, const LearnOptions& options = {},
                                        const std::vector<std::string>& hold_out = {},
                                        HoldOutUnit unit = HoldOutUnit::kGroup);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_LEARN_H_
