// Before the first transfer of a job launched as several processes, every rank states what it
// was asked to run; the job goes on only if all agree.
#ifndef DITUNE_EXECUTOR_RANK_AGREEMENT_H_
#define DITUNE_EXECUTOR_RANK_AGREEMENT_H_

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "executor/comm.h"

namespace ditune::exec {

// What one rank was asked to run, as (name, value) pairs in a fixed order ("--height",
// "1024"), or the reason it refused its input.
struct RankIntent {
  std::vector<std::pair<std::string, std::string>> fields;
  Status refused;  // not ok: this rank cannot run (its own input is bad)
};

// Collective over `comm` (every rank calls it once, before any other transfer): exchanges each
// rank's intent. Ok iff no rank refused and every rank's fields equal rank 0's. Otherwise every
// rank returns the same refusal: the lowest refusing rank's (its own status on that rank; on
// the others "rank 2 of 4 refused its input ...: <its message>", Infeasible where it was,
// else InvalidArgument), or an InvalidArgument naming each field where a rank differs from
// rank 0, with both values. A rank's text beyond kMaxIntentChars is cut (the comparison then
// covers the cut text). A failed exchange is returned as the transport reported it.
inline constexpr size_t kMaxIntentChars = 2048;
Status AgreeAcrossRanks(Comm* comm, const RankIntent& mine);

// The two halves of the exchange, apart for tests and fuzzing: a rank's intent as the text it
// sends (at most kMaxIntentChars), and the verdict on every rank's text as AgreeAcrossRanks
// gives it on rank `my_rank`, whose own refusal is `mine`. Any bytes are taken as texts.
std::string EncodeIntent(const RankIntent& intent);
Status CompareIntents(const std::vector<std::string>& texts, int my_rank, const Status& mine);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_RANK_AGREEMENT_H_
