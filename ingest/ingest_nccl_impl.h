// What the nccl-tests reader's two halves share: ingest_nccl_table.cc reads one line of
// output (the table header's column layout, a data row, log text glued onto it) and
// ingest_nccl_tests.cc reads the file (tests, banners, Rank lines, measurements).
// Not part of the public API: only ingest/ingest_nccl_*.cc include this.
#ifndef DITUNE_INGEST_INGEST_NCCL_IMPL_H_
#define DITUNE_INGEST_INGEST_NCCL_IMPL_H_

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ditune::ingest_internal::nccl {

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// ---------------------------------------------------------------------------------------------
// The result table's columns.

// size, count, type, redop, root: the identity of a row; the rest its results.
enum class Col {
  kSize,
  kCount,
  kType,
  kRedop,
  kRoot,
  kToken,
  kTime,
  kAlgbw,
  kBusbw,
  kWrong,
  kError,
  kIters,
  kNumber,
  kText
};

// Where each value sits in a data row, from the "#  size  count  type ..." header.
struct TableLayout {
  std::vector<std::string> names;
  std::vector<Col> identity;  // the columns before the first time
  std::vector<Col> tail;      // the first time column and all after it
  // Positions in `tail` of the out-of-place (first) and in-place (second) results.
  size_t time = 0;
  size_t algbw = 0;
  size_t busbw = 0;
  std::optional<size_t> check;  // #wrong or error
  std::optional<size_t> in_time;
  std::optional<size_t> in_algbw;
  std::optional<size_t> in_busbw;
  std::optional<size_t> in_check;
  std::optional<size_t> iters;
  size_t numeric_tail = 0;  // tail columns before the first text one
  int line = 0;             // of the header; 0 for the default layout

  std::string Names() const { return fmt::format("{}", fmt::join(names, " ")); }
  std::string_view NameOfTail(size_t j) const { return names[identity.size() + j]; }
  // The last tail column the out-of-place result needs.
  size_t OutOfPlaceEnd() const { return std::max({time, algbw, busbw, check.value_or(0)}); }
  std::string Where() const {
    return line == 0 ? std::string("the default nccl-tests table (no header before it)")
                     : fmt::format("the table header on line {}", line);
  }
};

// The layout the header tokens (without a leading '#') describe; nullopt when they are not a
// result-table header.
std::optional<TableLayout> LayoutFromHeader(const std::vector<std::string_view>& names, int line);

// The layout of a table printed without a header: size count type redop root, then time algbw
// busbw #wrong out of place and in place.
const TableLayout& DefaultLayout();

// A value nccl-tests prints in a result column: a number, N/A, or either marked '*'.
bool IsValueToken(std::string_view s);

// ---------------------------------------------------------------------------------------------
// Log text glued onto a row.

// Whether `t` holds an NCCL log marker ("NCCL INFO", ...) or a launcher's stream tag.
bool HasLogMarker(std::string_view t);

// A row and the log text glued after it.
struct LogCut {
  std::string_view row;
  std::string_view log;  // empty when the line has none
};

// Splits a line that starts with a data row where log text begins: at an NCCL log line
// ("host:pid:tid [dev] NCCL INFO ...") or a launcher tag ("[1,3]<stderr>:"), wherever they
// are, or at a token whose number runs into at least three letters ("0Traceback"). A value
// glued to the log keeps its digits when the boundary is clear.
LogCut CutLogText(std::string_view t);

// ---------------------------------------------------------------------------------------------
// Reading one row.

// One half (out-of-place or in-place) of a row's results.
struct Half {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  std::string_view check;  // the #wrong or error token; "" when the table has none
};

struct Row {
  int line = 0;
  int64_t size = 0;
  std::optional<int64_t> count;
  std::string_view type;
  Half out;
  std::optional<Half> in;
  std::optional<int64_t> iters;
};

struct RowRead {
  enum class Kind { kComplete, kShort, kBad };
  Kind kind = Kind::kComplete;
  Row row;
  std::string error;                    // kBad
  std::string_view last_column;         // the name of the last column read
  std::vector<std::string_view> extra;  // tokens after the last column
  bool out_whole = false;               // the out-of-place result was read in full
};

// Reads the tokens of a data row in `layout`'s columns: kComplete with any tokens after the
// last column in `extra`; kShort when the tokens stop before the last column (`out_whole`
// says whether the out-of-place result was read); kBad with `error` for a malformed value.
RowRead ReadRow(const std::vector<std::string_view>& tokens, const TableLayout& layout);

// Why the row's results are not trusted, or "" when they are: nccl-tests marked them, counted
// wrong elements, or (its old "error" column) found a deviation above its own tolerance for
// `type` over `ranks`. `which` names the half in the message.
std::string WrongResult(const Half& half, bool is_error_column, std::string_view which,
                        std::string_view type, int ranks);

// True iff `parsed` matches `expected` as printed values may: within 5%, or within `rounding`
// GB/s (what printing with two decimals may shift it by).
bool BandwidthMatches(double parsed, double expected, double rounding = 0.01);

// Shortens `s` to at most `n` characters, marking the cut: for quoting log text in messages.
std::string Excerpt(std::string_view s, size_t n = 48);
// ditune's name for a collective given as ditune or nccl-tests spell it; nullopt otherwise.
std::optional<std::string> NormalizeCollective(std::string_view name);
// The collectives a file or program name mentions (all_reduce_perf.txt, alltoall-8gpu.log,
// ./build/sendrecv_perf, ...).
std::set<std::string> CollectivesInFileName(std::string_view origin);
// The nccl-tests program a token of a command or script line names ("./build/all_gather_perf",
// "alltoall_perf:", "sendrecv_perf_mpi"), or "" when it names none.
std::string_view ProgramIn(std::string_view token);
// The modelled collective a program name measures; "" when ditune does not model it.
std::string CollectiveOfProgram(std::string_view program);
// "# nThread 1 nGpus 8 ... warmup iters: 5 iters: 20 agg iters: 1 ...": the timed iterations
// (older versions: "nThread: 1 ... warmupIters: 5 iters: 20").
std::optional<int> TimedIters(const std::vector<std::string_view>& tokens);

}  // namespace ditune::ingest_internal::nccl

#endif  // DITUNE_INGEST_INGEST_NCCL_IMPL_H_
