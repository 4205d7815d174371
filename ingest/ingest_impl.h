// Helpers the ingest parsers share (defined in ingest_csv.cc unless marked otherwise).
// Not part of the public API: only ingest/ingest_*.cc and their tests include this.
#ifndef DITUNE_INGEST_INGEST_IMPL_H_
#define DITUNE_INGEST_INGEST_IMPL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/text.h"

namespace ditune::ingest_internal {

// One line of the input without its "\n" or "\r\n"; `number` is 1-based.
struct Line {
  int number = 0;
  std::string_view text;
};

// Splits on '\n' and drops a trailing '\r'. A final line without a terminator is kept; the
// empty string after a final '\n' is not a line.
std::vector<Line> SplitLines(std::string_view text);

// core/text.h's, under the name the readers use.
using ::ditune::Trim;

// Whitespace-separated tokens.
std::vector<std::string_view> SplitWhitespace(std::string_view s);

// The whole of `s` (after Trim) as a finite double / an integer; nullopt when `s` is empty,
// has trailing characters, is out of range, or (doubles) is inf or nan. One leading '+' is
// accepted.
std::optional<double> ParseDouble(std::string_view s);
std::optional<int64_t> ParseInt(std::string_view s);

// InvalidArgument "<origin>:<line>: <what>".
Status LineError(std::string_view origin, int line, std::string_view what);

// Appends "<origin>:<line>: <what>" to *warnings unless it is null. (ingest_nccl_table.cc)
void AddWarning(std::vector<std::string>* warnings, std::string_view origin, int line,
                std::string_view what);

// `line` without what a parallel launcher puts before each line of a rank's output: Open
// MPI's --tag-output ("[1,0]<stdout>:"), MPICH's -prepend-rank ("[0] ") and Slurm's srun
// --label ("0: "). (ingest_nccl_table.cc)
std::string_view StripLauncherPrefix(std::string_view line);

// Content recognisers for DetectIngestFormat, tolerant of what real files carry: launcher
// prefixes, a table header pasted without its '#', log text around the results.
//   LooksLikeNcclTests: a "# nThread" banner (or "nThread:"), a "#  size  count ..." table
//     header with or without the '#', or a "Collective test starting:" line.
//     (ingest_nccl_tests.cc)
//   LooksLikeXditLog: an "epoch time:", "Iteration N completed in", "Average time over N
//     runs:" or "Running test for size" line, or a JSON timings document ParseXditLog reads.
//     (ingest_xdit_log.cc)
//   LooksLikeTorchTrace: gzip data (bytes 1f 8b), or a JSON object with a "traceEvents"
//     array. Does not parse the JSON. (ingest_torch_trace_json.cc)
bool LooksLikeNcclTests(std::string_view text);
bool LooksLikeXditLog(std::string_view text);
bool LooksLikeTorchTrace(std::string_view data);

}  // namespace ditune::ingest_internal

#endif  // DITUNE_INGEST_INGEST_IMPL_H_
