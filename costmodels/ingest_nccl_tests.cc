// nccl-tests output (all_reduce_perf, all_gather_perf, alltoall_perf, sendrecv_perf,
// reduce_scatter_perf): one measurement per row of each test's result table.
//
// Files are read as users have them, not as one clean run:
//  - several tests one after another (cluster-check scripts concatenate their outputs): a
//    "# nThread" banner, a "# Collective test starting:" line, a command line naming a
//    *_perf program or a second table header starts a new test, read as its own collective
//    with its own ranks, hosts and column layout;
//  - launcher prefixes ("[1,0]<stdout>:", "[0] ", "0: ") are stripped from every line;
//  - the table header names the columns, with or without its '#': versions differ (no root
//    column, "error" before "#wrong", "cputime", "#iters"), and rows may leave redop or root
//    blank, which the row's own tokens reveal;
//  - log text glued onto a row (NCCL INFO from another rank) is cut off: the row is kept when
//    its out-of-place result is whole, joined with its rest when the log split it over two
//    lines, and otherwise dropped with a warning;
//  - rows nccl-tests found wrong, and tests of one rank (no traffic), are left out with a
//    warning; a file with nothing else is refused.
// Everything left out is reported through IngestContext::warnings; anything that makes the
// numbers untrustworthy (a malformed value, busbw that does not match the ranks) is an error.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/csv.h"
#include "costmodels/comm_model.h"
#include "costmodels/ingest.h"
#include "costmodels/ingest_impl.h"

namespace ditune {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

}  // namespace

namespace ingest_internal {

void AddWarning(std::vector<std::string>* warnings, std::string_view origin, int line,
                std::string_view what) {
  if (warnings != nullptr) warnings->push_back(fmt::format("{}:{}: {}", origin, line, what));
}

std::string_view StripLauncherPrefix(std::string_view line) {
  size_t first = 0;
  while (first < line.size() && IsBlank(line[first])) ++first;
  const std::string_view t = line.substr(first);
  if (!t.empty() && t.front() == '[') {
    const size_t close = t.find(']');
    if (close == std::string_view::npos || close < 2 || close > 24) return line;
    const std::string_view inside = t.substr(1, close - 1);
    if (!std::all_of(inside.begin(), inside.end(), [](char c) { return IsDigit(c) || c == ','; })) {
      return line;
    }
    const std::string_view rest = t.substr(close + 1);
    // Open MPI --tag-output: "[jobid,rank]<stdout>:".
    if (inside.find(',') != std::string_view::npos && !rest.empty() && rest.front() == '<') {
      const size_t end = rest.find(">:");
      if (end != std::string_view::npos && end <= 10) return rest.substr(end + 2);
      return line;
    }
    // MPICH / Intel MPI -prepend-rank: "[rank] ".
    if (inside.find(',') == std::string_view::npos && !rest.empty() && IsBlank(rest.front())) {
      return rest.substr(1);
    }
    return line;
  }
  // Slurm srun --label: "rank: ".
  size_t digits = 0;
  while (digits < t.size() && IsDigit(t[digits])) ++digits;
  if (digits > 0 && digits <= 6 && digits + 1 < t.size() && t[digits] == ':' &&
      IsBlank(t[digits + 1])) {
    return t.substr(digits + 2);
  }
  return line;
}

}  // namespace ingest_internal

namespace {

using ingest_internal::AddWarning;
using ingest_internal::LineError;
using ingest_internal::ParseDouble;
using ingest_internal::ParseInt;
using ingest_internal::SplitWhitespace;
using ingest_internal::StripLauncherPrefix;
using ingest_internal::Trim;

constexpr std::string_view kValidCollectives =
    "all_to_all, all_gather, all_reduce, sendrecv, reduce_scatter";
constexpr std::string_view kValidPrograms =
    "the output of all_reduce_perf, all_gather_perf, alltoall_perf, sendrecv_perf or "
    "reduce_scatter_perf";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Shortens `s` to at most `n` characters, marking the cut: for quoting log text in messages.
std::string Excerpt(std::string_view s, size_t n = 48) {
  s = Trim(s);
  if (s.size() <= n) return std::string(s);
  return fmt::format("{}...", s.substr(0, n));
}

// ditune's name for a collective given as ditune or nccl-tests spell it; nullopt otherwise.
std::optional<std::string> NormalizeCollective(std::string_view name) {
  std::string s = Lower(Trim(name));
  std::replace(s.begin(), s.end(), '-', '_');
  if (s.size() > 5 && s.ends_with("_perf")) s.resize(s.size() - 5);
  if (s == "all_to_all" || s == "alltoall") return "all_to_all";
  if (s == "all_gather" || s == "allgather") return "all_gather";
  if (s == "all_reduce" || s == "allreduce") return "all_reduce";
  if (s == "sendrecv" || s == "send_recv") return "sendrecv";
  if (s == "reduce_scatter" || s == "reducescatter") return "reduce_scatter";
  return std::nullopt;
}

// The collectives a file or program name mentions (all_reduce_perf.txt, alltoall-8gpu.log,
// ./build/sendrecv_perf, ...).
std::set<std::string> CollectivesInFileName(std::string_view origin) {
  const size_t slash = origin.find_last_of("/\\");
  const std::string base =
      Lower(slash == std::string_view::npos ? origin : origin.substr(slash + 1));
  const std::pair<std::string_view, std::string_view> kNeedles[] = {
      {"all_reduce", "all_reduce"},
      {"allreduce", "all_reduce"},
      {"all_gather", "all_gather"},
      {"allgather", "all_gather"},
      {"all_to_all", "all_to_all"},
      {"alltoall", "all_to_all"},
      {"sendrecv", "sendrecv"},
      {"send_recv", "sendrecv"},
      {"reduce_scatter", "reduce_scatter"},
      {"reducescatter", "reduce_scatter"}};
  std::set<std::string> found;
  for (const auto& [needle, name] : kNeedles) {
    const size_t at = base.find(needle);
    if (at == std::string::npos) continue;
    // alltoallv_perf is a different test (per-peer counts).
    if (name == "all_to_all" && at + needle.size() < base.size() &&
        base[at + needle.size()] == 'v') {
      continue;
    }
    found.emplace(name);
  }
  return found;
}

// The nccl-tests program a token of a command or script line names ("./build/all_gather_perf",
// "alltoall_perf:", "sendrecv_perf_mpi"), or "" when it names none.
std::string_view ProgramIn(std::string_view token) {
  constexpr std::string_view kOpen = "\"'([{<=";
  constexpr std::string_view kClose = "\"')]}>=:,;.";
  while (!token.empty() && kOpen.find(token.front()) != std::string_view::npos) {
    token.remove_prefix(1);
  }
  while (!token.empty() && kClose.find(token.back()) != std::string_view::npos) {
    token.remove_suffix(1);
  }
  if (const size_t slash = token.find_last_of('/'); slash != std::string_view::npos) {
    token = token.substr(slash + 1);
  }
  if (!(token.ends_with("_perf") || token.ends_with("_perf_mpi")) || token.size() <= 5) return {};
  for (char c : token) {
    if (!(IsAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '.')) return {};
  }
  return token;
}

// The modelled collective a program name measures; "" when ditune does not model it.
std::string CollectiveOfProgram(std::string_view program) {
  std::set<std::string> named = CollectivesInFileName(program);
  return named.size() == 1 ? *named.begin() : std::string();
}

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

bool IsIdentity(Col c) { return c <= Col::kToken; }

Col ColumnOf(std::string_view name) {
  if (name == "size" || name == "bytes") return Col::kSize;
  if (name == "count" || name == "N" || name == "elements") return Col::kCount;
  if (name == "type") return Col::kType;
  if (name == "redop" || name == "op") return Col::kRedop;
  if (name == "root") return Col::kRoot;
  if (name == "time" || name == "cputime") return Col::kTime;
  if (name == "algbw") return Col::kAlgbw;
  if (name == "busbw") return Col::kBusbw;
  if (name == "#wrong" || name == "wrong") return Col::kWrong;
  if (name == "error" || name == "#error" || name == "res") return Col::kError;
  if (name == "#iters") return Col::kIters;
  if (name == "timestamp") return Col::kText;
  return Col::kNumber;
}

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
std::optional<TableLayout> LayoutFromHeader(const std::vector<std::string_view>& names, int line) {
  if (names.empty() || ColumnOf(names.front()) != Col::kSize) return std::nullopt;
  TableLayout layout;
  layout.line = line;
  std::optional<size_t> time, algbw, busbw;
  std::optional<size_t> text;
  for (std::string_view n : names) {
    layout.names.emplace_back(n);
    Col c = ColumnOf(n);
    if (!time && c != Col::kTime) {
      // Before the first time column: the row's identity; an unknown name is one token.
      if (!IsIdentity(c)) c = Col::kToken;
      layout.identity.push_back(c);
      continue;
    }
    const size_t j = layout.tail.size();
    layout.tail.push_back(c);
    auto first_or_second = [&](std::optional<size_t>& first, std::optional<size_t>& second) {
      if (!first) {
        first = j;
      } else if (!second) {
        second = j;
      }
    };
    switch (c) {
      case Col::kTime:
        first_or_second(time, layout.in_time);
        break;
      case Col::kAlgbw:
        first_or_second(algbw, layout.in_algbw);
        break;
      case Col::kBusbw:
        first_or_second(busbw, layout.in_busbw);
        break;
      case Col::kWrong:
      case Col::kError:
        first_or_second(layout.check, layout.in_check);
        break;
      case Col::kIters:
        layout.iters = j;
        break;
      case Col::kText:
        if (!text) text = j;
        break;
      default:
        break;
    }
  }
  if (!time || !algbw || !busbw || !(*time < *algbw && *algbw < *busbw)) return std::nullopt;
  if (layout.check && *layout.check < *busbw) layout.check.reset();
  layout.time = *time;
  layout.algbw = *algbw;
  layout.busbw = *busbw;
  layout.numeric_tail = text.value_or(layout.tail.size());
  if (text && *text <= layout.OutOfPlaceEnd()) return std::nullopt;
  return layout;
}

const TableLayout& DefaultLayout() {
  static const TableLayout* layout = [] {
    const std::vector<std::string_view> names = {"size",  "count", "type",  "redop",  "root",
                                                 "time",  "algbw", "busbw", "#wrong", "time",
                                                 "algbw", "busbw", "#wrong"};
    return new TableLayout(*LayoutFromHeader(names, 0));
  }();
  return *layout;
}

// A word such as a data type or reduction name ("float", "bfloat16", "sum", "none").
bool IsWord(std::string_view s) {
  if (s.empty() || s.size() > 24 || !IsAlpha(s.front())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; });
}

// A value nccl-tests prints in a result column: a number, N/A, or either marked '*'.
bool IsValueToken(std::string_view s) {
  if (!s.empty() && s.back() == '*') s.remove_suffix(1);
  return s == "N/A" || ParseDouble(s).has_value();
}

// ---------------------------------------------------------------------------------------------
// Log text glued onto a row.

constexpr std::string_view kLogMarkers[] = {"NCCL INFO",  "NCCL WARN", "NCCL TRACE", "NCCL ERROR",
                                            "NCCL ABORT", "<stdout>:", "<stderr>:"};

bool HasLogMarker(std::string_view t) {
  for (std::string_view m : kLogMarkers) {
    if (t.find(m) != std::string_view::npos) return true;
  }
  return false;
}

// How many leading characters of `token` are a value glued to a word after it ("0host:1:2" ->
// 1, "1230.1node7" -> 6, "N/Agpu" -> 3); 0 when it does not start with a value, nullopt when
// the boundary is ambiguous (the text after the number starts with a digit or a sign).
std::optional<size_t> GluedValueLength(std::string_view token) {
  if (token.starts_with("N/A")) {
    return token.size() > 3 && !IsAlpha(token[3]) ? std::nullopt : std::optional<size_t>(3);
  }
  double v = 0;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || ptr == token.data()) return 0;
  const size_t n = static_cast<size_t>(ptr - token.data());
  if (n == token.size() || IsAlpha(token[n])) return n;
  return std::nullopt;
}

// A row and the log text glued after it.
struct LogCut {
  std::string_view row;
  std::string_view log;  // empty when the line has none
};

// Splits a line that starts with a data row where log text begins: at an NCCL log line
// ("host:pid:tid [dev] NCCL INFO ...") or a launcher tag ("[1,3]<stderr>:"), wherever they
// are, or at a token whose number runs into at least three letters ("0Traceback"). A value
// glued to the log keeps its digits when the boundary is clear.
LogCut CutLogText(std::string_view t) {
  size_t at = std::string_view::npos;
  std::string_view marker;
  for (std::string_view m : kLogMarkers) {
    const size_t p = t.find(m);
    if (p < at) {
      at = p;
      marker = m;
    }
  }
  size_t start = std::string_view::npos;  // where the log text begins
  bool token_start = false;               // `start` is the start of a token that may hold a value
  if (at != std::string_view::npos) {
    start = at;
    if (marker.front() == '<') {
      // "[1,3]<stderr>:": the tag starts at its '['.
      if (const size_t open = t.rfind('[', at); open != std::string_view::npos) start = open;
    } else {
      // "host:pid:tid [dev] NCCL INFO": back over "[dev]" and the "host:pid:tid" token.
      size_t p = at;
      while (p > 0 && IsBlank(t[p - 1])) --p;
      if (p > 0 && t[p - 1] == ']') {
        if (const size_t open = t.rfind('[', p - 1); open != std::string_view::npos) {
          start = open;
          p = open;
          while (p > 0 && IsBlank(t[p - 1])) --p;
        }
      }
      size_t q = p;
      while (q > 0 && !IsBlank(t[q - 1])) --q;
      if (q < p && t.substr(q, p - q).find(':') != std::string_view::npos) {
        start = q;
        token_start = true;
      }
    }
  } else {
    // No known log: a number that runs into a word.
    size_t pos = 0;
    for (std::string_view tok : SplitWhitespace(t)) {
      pos = static_cast<size_t>(tok.data() - t.data());
      auto n = GluedValueLength(tok);
      if (n && *n > 0 && *n + 3 <= tok.size() && IsAlpha(tok[*n]) && IsAlpha(tok[*n + 1]) &&
          IsAlpha(tok[*n + 2])) {
        start = pos;
        token_start = true;
        break;
      }
    }
  }
  if (start == std::string_view::npos) return {t, {}};
  if (token_start) {
    size_t end = start;
    while (end < t.size() && !IsBlank(t[end])) ++end;
    const std::optional<size_t> n = GluedValueLength(t.substr(start, end - start));
    if (n && *n > 0 && start + *n < end) return {t.substr(0, start + *n), t.substr(start + *n)};
  }
  return {t.substr(0, start), t.substr(start)};
}

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

// Whether a row holds its root column: from how many values follow (the header's count with
// and without it); when the row is cut short, from the token itself (a root is a whole
// number, most often -1; a time has decimals below 10 ms).
bool RootPresent(const std::vector<std::string_view>& tokens, size_t i, const TableLayout& layout) {
  if (i >= tokens.size() || !ParseInt(tokens[i])) return false;
  size_t run = 0;
  while (i + run < tokens.size() && IsValueToken(tokens[i + run])) ++run;
  if (run >= layout.numeric_tail + 1) return true;
  if (run == layout.numeric_tail) return false;
  return tokens[i].front() == '-' || tokens[i].find('.') == std::string_view::npos;
}

RowRead ReadRow(const std::vector<std::string_view>& tokens, const TableLayout& layout) {
  RowRead r;
  size_t i = 0;
  const size_t n = tokens.size();
  auto bad = [&](std::string what) {
    r.kind = RowRead::Kind::kBad;
    r.error = std::move(what);
    return r;
  };
  auto short_row = [&]() {
    r.kind = RowRead::Kind::kShort;
    return r;
  };
  for (size_t k = 0; k < layout.identity.size(); ++k) {
    const Col c = layout.identity[k];
    if (c == Col::kRedop) {
      if (i < n && IsWord(tokens[i])) {
        r.last_column = layout.names[k];
        ++i;
      }
      continue;
    }
    if (c == Col::kRoot) {
      if (RootPresent(tokens, i, layout)) {
        r.last_column = layout.names[k];
        ++i;
      }
      continue;
    }
    if (i >= n) return short_row();
    const std::string_view tok = tokens[i];
    switch (c) {
      case Col::kSize: {
        const std::optional<int64_t> v = ParseInt(tok);
        if (!v || *v < 0) {
          return bad(
              fmt::format("size '{}' is not a byte count (valid: a whole number >= 0)", tok));
        }
        r.row.size = *v;
        break;
      }
      case Col::kCount: {
        const std::optional<int64_t> v = ParseInt(tok);
        if (!v || *v < 0) {
          return bad(
              fmt::format("count '{}' is not a number of elements (valid: a whole number "
                          ">= 0)",
                          tok));
        }
        r.row.count = *v;
        break;
      }
      case Col::kType:
        if (!IsWord(tok)) {
          return bad(
              fmt::format("type '{}' is not a data type name (valid: e.g. float, bfloat16)", tok));
        }
        r.row.type = tok;
        break;
      default:
        break;  // kToken
    }
    r.last_column = layout.names[k];
    ++i;
  }
  std::vector<double> values(layout.tail.size(), 0.0);
  std::vector<std::string_view> checks(layout.tail.size());
  size_t j = 0;
  for (; j < layout.tail.size(); ++j) {
    const Col c = layout.tail[j];
    if (c == Col::kText) {  // a timestamp may span tokens: the rest of the row
      i = n;
      j = layout.tail.size();
      break;
    }
    if (i >= n) break;
    const std::string_view tok = tokens[i];
    const std::string_view name = layout.NameOfTail(j);
    switch (c) {
      case Col::kTime:
      case Col::kAlgbw:
      case Col::kBusbw: {
        const std::optional<double> v = ParseDouble(tok);
        if (!v || *v < 0) {
          return bad(
              fmt::format("column {} ('{}') is '{}' (valid: a number >= 0)", i + 1, name, tok));
        }
        values[j] = *v;
        break;
      }
      case Col::kWrong:
      case Col::kError: {
        std::string_view v = tok;
        if (!v.empty() && v.back() == '*') v.remove_suffix(1);
        const std::optional<double> d = ParseDouble(v);
        if (v != "N/A" && (!d || *d < 0)) {
          return bad(fmt::format("{} is '{}' (valid: {}, or N/A)", name, tok,
                                 c == Col::kWrong ? "a count" : "a number >= 0"));
        }
        checks[j] = tok;
        break;
      }
      case Col::kIters: {
        const std::optional<int64_t> v = ParseInt(tok);
        if (!v || *v < 1 || *v > 1'000'000'000) {
          return bad(fmt::format("column {} ('{}') is '{}' (valid: a whole number >= 1)", i + 1,
                                 name, tok));
        }
        r.row.iters = *v;
        break;
      }
      default:  // another number (esttime, ...): read, not used
        if (!IsValueToken(tok)) {
          return bad(fmt::format("column {} ('{}') is '{}' (valid: a number)", i + 1, name, tok));
        }
        break;
    }
    r.last_column = name;
    ++i;
  }
  r.out_whole = j > layout.OutOfPlaceEnd();
  if (r.out_whole) {
    r.row.out = {values[layout.time], values[layout.algbw], values[layout.busbw],
                 layout.check ? checks[*layout.check] : std::string_view()};
  }
  if (layout.in_time && layout.in_algbw && layout.in_busbw) {
    const size_t end = std::max(
        {*layout.in_time, *layout.in_algbw, *layout.in_busbw, layout.in_check.value_or(0)});
    if (j > end) {
      r.row.in = Half{values[*layout.in_time], values[*layout.in_algbw], values[*layout.in_busbw],
                      layout.in_check ? checks[*layout.in_check] : std::string_view()};
    }
  }
  if (j < layout.tail.size()) return short_row();
  r.kind = RowRead::Kind::kComplete;
  r.extra.assign(tokens.begin() + static_cast<std::ptrdiff_t>(i), tokens.end());
  return r;
}

// "# nThread 1 nGpus 8 ... warmup iters: 5 iters: 20 agg iters: 1 ...": the timed iterations
// (older versions: "nThread: 1 ... warmupIters: 5 iters: 20").
std::optional<int> TimedIters(const std::vector<std::string_view>& tokens) {
  for (size_t i = 1; i + 1 < tokens.size(); ++i) {
    if (tokens[i] != "iters:" || tokens[i - 1] == "warmup" || tokens[i - 1] == "agg") continue;
    if (auto v = ParseInt(tokens[i + 1]); v && *v >= 1 && *v <= 1'000'000'000) {
      return static_cast<int>(*v);
    }
  }
  return std::nullopt;
}

// nccl-tests' own tolerance for its old "error" column (the largest deviation from the
// expected result): DeltaMaxValue(type) x (ranks - 1). Integers must be exact.
double ErrorTolerance(std::string_view type, int ranks) {
  double per_rank = 0;
  if (type == "half" || type == "float16" || type == "fp16") per_rank = 1e-2;
  if (type == "bfloat16" || type == "bf16") per_rank = 5e-2;
  if (type == "float" || type == "float32" || type == "fp32") per_rank = 1e-5;
  if (type == "double" || type == "float64" || type == "fp64") per_rank = 1e-12;
  return per_rank * std::max(1, ranks - 1);
}

// Why the row's results are not trusted, or "" when they are.
std::string WrongResult(const Half& half, bool is_error_column, std::string_view which,
                        std::string_view type, int ranks) {
  std::string_view v = half.check;
  if (v.empty() || v == "N/A") return {};
  if (v.back() == '*') {
    return fmt::format("nccl-tests marked the {} result's {} '{}' as beyond its threshold", which,
                       is_error_column ? "error" : "#wrong", v);
  }
  const double d = ParseDouble(v).value_or(0);
  if (!is_error_column) {
    if (d > 0) return fmt::format("nccl-tests found {} wrong elements in the {} result", v, which);
    return {};
  }
  const double tolerance = ErrorTolerance(type, ranks);
  if (d > tolerance) {
    return fmt::format(
        "the {} result's error {} is above nccl-tests' tolerance {:g} for {} over {} "
        "ranks",
        which, v, tolerance, type.empty() ? "this type" : type, ranks);
  }
  return {};
}

// True iff `parsed` matches `expected` as printed values may: within 5%, or within `rounding`
// GB/s (what printing with two decimals may shift it by).
bool BandwidthMatches(double parsed, double expected, double rounding = 0.01) {
  return std::abs(parsed - expected) <= std::max(0.05 * std::abs(expected), rounding) + 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Tests and the file.

// One test's output: banner, Rank lines, table.
struct Test {
  int start_line = 0;     // the line that began it (banner, announcement, command, header or row)
  std::string announced;  // program named by "# Collective test starting:"
  int announced_line = 0;
  std::string hint;  // program named by a command line before it
  int hint_line = 0;
  bool banner = false;
  std::optional<int> iters;
  std::set<int64_t> ranks;
  std::set<std::string> hosts;
  std::optional<int> logged_ranks;  // NCCL INFO "... nRanks 16 nNodes 2 ..."
  std::optional<int> logged_nodes;
  std::optional<TableLayout> layout;
  int rows = 0;  // data rows read
  // Resolved at the first row.
  bool resolved = false;
  std::string collective;  // "" when it is a program ditune does not model
  std::string program;     // as the output names it, for messages
  int nranks = 0;
  int skipped = 0;  // rows left out because of the test as a whole
};

// Records "nRanks 16" / "nranks 8" / "nNodes 2" from NCCL's INFO lines.
void ScanLoggedCounts(const std::vector<std::string_view>& tokens, Test* test) {
  for (size_t k = 0; k + 1 < tokens.size(); ++k) {
    std::string_view key = tokens[k];
    if (key.ends_with(":")) key.remove_suffix(1);
    const bool ranks = key == "nranks" || key == "nRanks";
    const bool nodes = key == "nNodes" || key == "nnodes";
    if (!ranks && !nodes) continue;
    const std::optional<int64_t> v = ParseInt(tokens[k + 1]);
    if (!v || *v < 1 || *v > 1'000'000) continue;
    std::optional<int>& slot = ranks ? test->logged_ranks : test->logged_nodes;
    slot = std::max(slot.value_or(0), static_cast<int>(*v));
  }
}

class NcclTestsReader {
 public:
  NcclTestsReader(const IngestContext& ctx, std::string_view origin, std::string ctx_collective)
      : ctx_(ctx), origin_(origin), ctx_collective_(std::move(ctx_collective)) {
    std::set<std::string> named = CollectivesInFileName(origin);
    if (named.size() == 1) file_collective_ = *named.begin();
  }

  Status ReadLine(const ingest_internal::Line& line);
  StatusOr<std::vector<Measurement>> Finish();

 private:
  void NewTest(int line) {
    done_.push_back(std::move(test_));
    test_ = Test{};
    test_.start_line = line;
  }
  bool Started() const { return test_.banner || test_.rows > 0; }
  void Warn(int line, std::string_view what) { AddWarning(ctx_.warnings, origin_, line, what); }
  void Drop(int line, std::string_view what) {
    ++dropped_;
    if (first_drop_.empty()) first_drop_ = fmt::format("line {}: {}", line, what);
    Warn(line, what);
  }

  Status CommentLine(int number, std::string_view t);
  Status DataRow(int number, std::string_view t);
  Status OtherLine(int number, std::string_view t, const std::vector<std::string_view>& tokens);
  Status Resolve(int line);
  Status Emit(const Row& row);

  const IngestContext& ctx_;
  std::string_view origin_;
  std::string ctx_collective_;
  std::string file_collective_;
  Test test_;
  std::vector<Test> done_;
  std::vector<Measurement> out_;
  int dropped_ = 0;
  std::string first_drop_;
  // The start of a row that log text cut short on the line before, for joining with its rest,
  // and the warning that drops it when the next line is not its rest.
  std::vector<std::string_view> cut_head_;
  int cut_line_ = 0;
  std::string cut_drop_;
};

Status NcclTestsReader::ReadLine(const ingest_internal::Line& line) {
  const std::string_view t = Trim(StripLauncherPrefix(line.text));
  if (t.empty()) return Status::Ok();
  std::vector<std::string_view> head = std::move(cut_head_);
  const int head_line = cut_line_;
  const std::string head_drop = std::move(cut_drop_);
  cut_head_.clear();
  cut_drop_.clear();
  if (!head.empty() && !ParseDouble(SplitWhitespace(t).front())) Drop(head_line, head_drop);
  if (t.front() == '#') return CommentLine(line.number, t);
  const std::vector<std::string_view> tokens = SplitWhitespace(t);
  // The rest of a row whose start log text cut off on the line before.
  if (!head.empty() && ParseDouble(tokens.front())) {
    std::vector<std::string_view> joined = head;
    const LogCut cut = CutLogText(t);
    for (std::string_view tok : SplitWhitespace(cut.row)) joined.push_back(tok);
    RowRead r = ReadRow(joined, test_.layout.value_or(DefaultLayout()));
    if (r.kind == RowRead::Kind::kComplete && r.extra.empty()) {
      Warn(line.number,
           fmt::format("joined this line to the start of the row on line {}, which log "
                       "text had split",
                       head_line));
      r.row.line = head_line;
      return Emit(r.row);
    }
    Drop(head_line, head_drop);
    if (ParseInt(tokens.front()) &&
        ReadRow(tokens, test_.layout.value_or(DefaultLayout())).kind != RowRead::Kind::kComplete) {
      Drop(line.number,
           fmt::format("not a whole row (the rest of the row log text cut on line {}?); "
                       "row dropped",
                       head_line));
      return Status::Ok();
    }
  }
  if (ParseInt(tokens.front())) return DataRow(line.number, t);
  return OtherLine(line.number, t, tokens);
}

Status NcclTestsReader::CommentLine(int number, std::string_view t) {
  const std::vector<std::string_view> tokens = SplitWhitespace(t.substr(1));
  if (tokens.empty()) return Status::Ok();
  if (tokens[0] == "nThread" || tokens[0] == "nThread:") {
    if (Started()) NewTest(number);
    if (test_.start_line == 0) test_.start_line = number;
    test_.banner = true;
    test_.iters = TimedIters(tokens);
    return Status::Ok();
  }
  if (tokens[0] == "Rank" && tokens.size() >= 2) {
    if (auto r = ParseInt(tokens[1])) test_.ranks.insert(*r);
    for (size_t k = 2; k + 1 < tokens.size(); ++k) {
      if (tokens[k] == "on") {
        test_.hosts.emplace(tokens[k + 1]);
        break;
      }
    }
    return Status::Ok();
  }
  constexpr std::string_view kStarting = "Collective test starting:";
  if (const size_t at = t.find(kStarting); at != std::string_view::npos) {
    const std::vector<std::string_view> program = SplitWhitespace(t.substr(at + kStarting.size()));
    if (Started() || !test_.announced.empty()) NewTest(number);
    if (test_.start_line == 0) test_.start_line = number;
    test_.announced = program.empty() ? std::string("(unnamed)") : std::string(program[0]);
    test_.announced_line = number;
    return Status::Ok();
  }
  if (auto layout = LayoutFromHeader(tokens, number)) {
    if (test_.rows > 0) NewTest(number);  // a second table: another test
    if (test_.start_line == 0) test_.start_line = number;
    test_.layout = std::move(layout);
    return Status::Ok();
  }
  ScanLoggedCounts(tokens, &test_);
  return Status::Ok();
}

Status NcclTestsReader::OtherLine(int number, std::string_view t,
                                  const std::vector<std::string_view>& tokens) {
  // A table header pasted without its '#'.
  if (auto layout = LayoutFromHeader(tokens, number)) {
    if (test_.rows > 0) NewTest(number);
    if (test_.start_line == 0) test_.start_line = number;
    test_.layout = std::move(layout);
    return Status::Ok();
  }
  ScanLoggedCounts(tokens, &test_);
  if (HasLogMarker(t)) {
    // A row that log text was glued in front of: the row is the line's end.
    if (!test_.layout) return Status::Ok();
    for (size_t k = 1; k < tokens.size(); ++k) {
      if (!ParseInt(tokens[k])) continue;
      const std::vector<std::string_view> rest(tokens.begin() + static_cast<std::ptrdiff_t>(k),
                                               tokens.end());
      RowRead r = ReadRow(rest, *test_.layout);
      if (r.kind != RowRead::Kind::kComplete || !r.extra.empty() || !r.out_whole) continue;
      if (r.row.out.time_us <= 0 ||
          !BandwidthMatches(r.row.out.algbw,
                            static_cast<double>(r.row.size) / (r.row.out.time_us * 1e3))) {
        continue;
      }
      Warn(number,
           fmt::format("ignored the log text before the row ('{}')",
                       Excerpt(t.substr(0, static_cast<size_t>(rest[0].data() - t.data())))));
      r.row.line = number;
      return Emit(r.row);
    }
    return Status::Ok();
  }
  // A command or script line naming the test that follows ("+ mpirun ... ./all_gather_perf").
  for (std::string_view tok : tokens) {
    const std::string_view program = ProgramIn(tok);
    if (program.empty()) continue;
    if (Started()) NewTest(number);
    if (test_.start_line == 0) test_.start_line = number;
    test_.hint = std::string(program);
    test_.hint_line = number;
    break;
  }
  return Status::Ok();
}

Status NcclTestsReader::DataRow(int number, std::string_view t) {
  const LogCut cut = CutLogText(t);
  const std::vector<std::string_view> tokens = SplitWhitespace(cut.row);
  const TableLayout& layout = test_.layout ? *test_.layout : DefaultLayout();
  RowRead r = ReadRow(tokens, layout);
  r.row.line = number;
  if (test_.start_line == 0) test_.start_line = number;
  switch (r.kind) {
    case RowRead::Kind::kBad:
      return LineError(origin_, number, r.error);
    case RowRead::Kind::kShort:
      if (cut.log.empty()) {
        return LineError(
            origin_, number,
            fmt::format(
                "the row stops after its '{}' column: {} columns, but {} has {} ({}); is the "
                "file cut short?",
                r.last_column.empty() ? "first" : r.last_column, tokens.size(), layout.Where(),
                layout.names.size(), layout.Names()));
      }
      if (r.out_whole) {
        Warn(number,
             fmt::format("log text ('{}') is glued onto the row after its '{}' column; kept "
                         "its out-of-place result, without the in-place one",
                         Excerpt(cut.log), r.last_column));
        r.row.in.reset();
        return Emit(r.row);
      }
      // Dropped unless the next line is its rest.
      ++test_.rows;
      cut_drop_ = fmt::format(
          "log text ('{}') cut the row after its '{}' column, before its "
          "out-of-place result was whole (valid: {}); row dropped",
          Excerpt(cut.log), r.last_column.empty() ? "first" : r.last_column, layout.Names());
      cut_head_ = tokens;
      cut_line_ = number;
      return Status::Ok();
    case RowRead::Kind::kComplete:
      break;
  }
  if (!r.extra.empty()) {
    const bool numbers = std::all_of(r.extra.begin(), r.extra.end(), IsValueToken);
    if (numbers && cut.log.empty()) {
      return LineError(
          origin_, number,
          fmt::format("{} columns, but {} has {} ({}): which header does this row "
                      "belong to?",
                      tokens.size(), layout.Where(), layout.names.size(), layout.Names()));
    }
    Warn(number,
         fmt::format("ignored the text after the row ('{}')",
                     Excerpt(t.substr(static_cast<size_t>(r.extra.front().data() - t.data())))));
  } else if (!cut.log.empty()) {
    Warn(number, fmt::format("ignored the log text glued onto the end of the row ('{}')",
                             Excerpt(cut.log)));
  }
  return Emit(r.row);
}

// Which collective the current test measured and over how many ranks.
Status NcclTestsReader::Resolve(int line) {
  Test& t = test_;
  t.resolved = true;
  if (!t.announced.empty()) {
    t.program = t.announced;
    t.collective = CollectiveOfProgram(t.program);
  } else if (!ctx_collective_.empty()) {
    t.collective = ctx_collective_;
  } else if (!t.hint.empty()) {
    t.program = t.hint;
    t.collective = CollectiveOfProgram(t.program);
  } else if (!file_collective_.empty()) {
    t.collective = file_collective_;
  } else {
    return LineError(
        origin_, line,
        fmt::format("cannot tell which collective this table measured: no '# Collective test "
                    "starting:' line or *_perf command before it, and the file name {} names none; "
                    "pass --collective NAME (valid: {})",
                    origin_, kValidCollectives));
  }
  if (t.program.empty()) t.program = t.collective;
  if (t.collective.empty()) return Status::Ok();
  t.nranks = ctx_.ranks;
  if (t.nranks == 0) t.nranks = static_cast<int>(t.ranks.size());
  if (t.nranks == 0) t.nranks = t.logged_ranks.value_or(0);
  if (t.nranks == 0) {
    return LineError(origin_, line,
                     "the number of ranks is unknown (no '#  Rank N ...' lines before the table); "
                     "pass --ranks N");
  }
  return Status::Ok();
}

Status NcclTestsReader::Emit(const Row& row) {
  ++test_.rows;
  if (!test_.resolved) DITUNE_RETURN_IF_ERROR(Resolve(row.line));
  const Test& t = test_;
  if (t.collective.empty() || t.nranks == 1) {
    ++test_.skipped;
    return Status::Ok();
  }
  const int line = row.line;
  const std::string& collective = t.collective;
  const int ranks = t.nranks;
  const TableLayout& layout = t.layout ? *t.layout : DefaultLayout();
  // Results nccl-tests itself found wrong.
  const bool error_column = layout.check && layout.tail[*layout.check] == Col::kError;
  std::string wrong = WrongResult(row.out, error_column, "out-of-place", row.type, ranks);
  if (wrong.empty() && row.in) {
    const bool in_error = layout.in_check && layout.tail[*layout.in_check] == Col::kError;
    wrong = WrongResult(*row.in, in_error, "in-place", row.type, ranks);
  }
  if (!wrong.empty()) {
    Drop(line, fmt::format("{}: its timing is not trusted; row dropped", wrong));
    return Status::Ok();
  }

  const double time_us = row.out.time_us;
  if (time_us <= 0) {
    return LineError(origin_, line,
                     fmt::format("out-of-place time is {} us (valid: > 0)", time_us));
  }
  // The physical bounds of measurement.h, in this table's columns and units.
  const double time_s = Microseconds(time_us).value();
  if (time_s < kMinMeasuredSeconds || time_s > kMaxMeasuredSeconds) {
    return LineError(
        origin_, line,
        fmt::format("out-of-place time is {} us, outside the physical range (valid: {} "
                    "to {} us)",
                    time_us, kMinMeasuredSeconds * 1e6, kMaxMeasuredSeconds * 1e6));
  }
  const double size = static_cast<double>(row.size);
  if (size > kMaxMeasuredBytes) {
    return LineError(
        origin_, line,
        fmt::format("size {} bytes is above the physical bound (valid: at most {} bytes)", row.size,
                    kMaxMeasuredBytes));
  }
  if (size / time_s > kMaxMeasuredRatePerSecond) {
    return LineError(origin_, line,
                     fmt::format("size / time = {} B / {} us = {} B/s is above the physical bound "
                                 "(valid: at most {} B/s; check the time column's unit, us)",
                                 row.size, time_us, size / time_s, kMaxMeasuredRatePerSecond));
  }
  // algbw = size / time; busbw = algbw x the collective's factor (nccl-tests' definitions).
  const double algbw = row.out.algbw;
  const double busbw = row.out.busbw;
  const double expected_algbw = size / (time_us * 1e3);
  if (!BandwidthMatches(algbw, expected_algbw)) {
    return LineError(origin_, line,
                     fmt::format("algbw {:.2f} GB/s does not match size / time = {} B / {} us = "
                                 "{:.2f} GB/s; is this nccl-tests output?",
                                 algbw, row.size, time_us, expected_algbw));
  }
  const double factor = BusFactor(*ParseCollective(collective), ranks);
  // busbw is printed from the unrounded algbw: algbw's rounding (0.005) scales with the factor.
  if (!BandwidthMatches(busbw, algbw * factor, 0.005 * (1 + factor))) {
    return LineError(
        origin_, line,
        fmt::format(
            "busbw {:.2f} GB/s does not match algbw {:.2f} GB/s x {:.4g} = {:.2f} GB/s, the "
            "{} factor for {} ranks; check --ranks and --collective (valid: the ranks and "
            "collective the test ran with)",
            busbw, algbw, factor, algbw * factor, collective, ranks));
  }

  Measurement m;
  m.source = MeasurementSource::kImport;
  m.kind = MeasurementKind::kCollective;
  m.op = collective;
  m.backend = "nccl";
  m.device = ctx_.device;
  m.link = ctx_.link;
  m.ranks = ranks;
  m.bytes = Bytes(size);
  m.median = Microseconds(time_us);
  m.p10 = m.median;
  m.p90 = m.median;
  m.samples = static_cast<int>(row.iters.value_or(t.iters.value_or(1)));
  m.run_id = ctx_.run_id;
  if (row.count) m.params["count"] = *row.count;
  if (!row.type.empty()) m.params["type"] = std::string(row.type);
  m.params["busbw_gbps"] = busbw;
  m.params["algbw_gbps"] = algbw;
  if (row.in && row.in->time_us > 0) m.params["in_place_s"] = Microseconds(row.in->time_us).value();
  if (!t.hosts.empty()) {
    m.params["nodes"] = t.hosts.size();
    m.params["hosts"] = std::vector<std::string>(t.hosts.begin(), t.hosts.end());
  } else if (t.logged_nodes) {
    m.params["nodes"] = *t.logged_nodes;
  }
  if (Status st = m.Validate(); !st.ok()) return LineError(origin_, line, st.message());
  out_.push_back(std::move(m));
  return Status::Ok();
}

StatusOr<std::vector<Measurement>> NcclTestsReader::Finish() {
  if (!cut_head_.empty()) Drop(cut_line_, cut_drop_);
  done_.push_back(std::move(test_));
  test_ = Test{};
  const bool any = !out_.empty();
  for (const Test& t : done_) {
    const int line = t.announced_line > 0 ? t.announced_line
                     : t.hint_line > 0    ? t.hint_line
                                          : t.start_line;
    if (t.rows == 0 && !t.announced.empty() && CollectiveOfProgram(t.announced).empty() && !any) {
      return LineError(origin_, line,
                       fmt::format("this is the output of {}, a collective ditune does not model "
                                   "(valid: {})",
                                   t.announced, kValidPrograms));
    }
    if (t.skipped == 0) continue;
    if (t.collective.empty()) {
      const std::string what = fmt::format("{}, a collective ditune does not model", t.program);
      if (!any) {
        return LineError(origin_, line,
                         fmt::format("this is the output of {} (valid: {})", what, kValidPrograms));
      }
      Warn(line, fmt::format("skipped the {} rows of {}", t.skipped, what));
    } else {
      const std::string what = fmt::format(
          "1 rank: the {} test here ran on a single rank, so it moved no data between GPUs and "
          "there is nothing to calibrate",
          t.program);
      if (!any) {
        return LineError(
            origin_, line,
            fmt::format("{} (valid: nccl-tests run over 2 or more ranks, e.g. -g 8, or "
                        "mpirun -np 8 with -g 1)",
                        what));
      }
      Warn(line, fmt::format("{}; skipped its {} rows", what, t.skipped));
    }
  }
  if (!any && dropped_ > 0) {
    return Status::InvalidArgument(
        fmt::format("{}: no usable nccl-tests result rows: all {} were dropped (first, {})",
                    origin_, dropped_, first_drop_));
  }
  if (!any) {
    return Status::InvalidArgument(fmt::format(
        "{}: no nccl-tests result lines (valid: rows like '134217728  33554432  float  sum  -1  "
        "712.3  188.43  329.75  0  711.9  188.54  329.94  0' under the '#  size  count  type ...' "
        "header, as all_reduce_perf prints them)",
        origin_));
  }
  return std::move(out_);
}

}  // namespace

namespace ingest_internal {

bool LooksLikeNcclTests(std::string_view text) {
  for (const Line& line : SplitLines(text)) {
    std::string_view t = Trim(StripLauncherPrefix(line.text));
    if (t.empty()) continue;
    const bool comment = t.front() == '#';
    if (comment) t.remove_prefix(1);
    const std::vector<std::string_view> tokens = SplitWhitespace(t);
    if (tokens.empty()) continue;
    if (comment && (tokens[0] == "nThread" || tokens[0] == "nThread:")) return true;
    if (comment && t.find("Collective test starting:") != std::string_view::npos) return true;
    if (LayoutFromHeader(tokens, line.number)) return true;
  }
  return false;
}

}  // namespace ingest_internal

StatusOr<std::vector<Measurement>> ParseNcclTests(std::string_view text, const IngestContext& ctx,
                                                  std::string_view origin) {
  DITUNE_RETURN_IF_ERROR(CheckUtf8(text, origin));
  const std::vector<ingest_internal::Line> lines = ingest_internal::SplitLines(text);

  std::string collective;
  if (!ctx.collective.empty()) {
    auto c = NormalizeCollective(ctx.collective);
    if (!c) {
      return Status::InvalidArgument(
          fmt::format("--collective '{}' is not a collective ditune models (valid: {})",
                      ctx.collective, kValidCollectives));
    }
    collective = *c;
    // A test that names itself ("# Collective test starting: all_gather_perf") overrides no flag.
    for (const auto& line : lines) {
      const std::string_view t = Trim(StripLauncherPrefix(line.text));
      constexpr std::string_view kStarting = "Collective test starting:";
      const size_t at = t.find(kStarting);
      if (t.empty() || t.front() != '#' || at == std::string_view::npos) continue;
      const std::vector<std::string_view> program =
          SplitWhitespace(t.substr(at + kStarting.size()));
      if (program.empty()) continue;
      const std::string announced = CollectiveOfProgram(program[0]);
      if (!announced.empty() && announced != collective) {
        return Status::InvalidArgument(
            fmt::format("--collective {}, but {} says it is the output of the {} test (valid: "
                        "--collective {} or no --collective)",
                        collective, origin, announced, announced));
      }
    }
  }
  if (ctx.device.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: nccl-tests output does not say which GPU ran it in ditune's terms; pass --gpu ID "
        "(a GPU catalog id, e.g. h100-sxm5-80gb; `ditune hardware` lists them)",
        origin));
  }
  if (ctx.link.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: nccl-tests output does not say which link the traffic crossed; pass --link ID (a "
        "link catalog id, e.g. nvlink4 or ib-ndr; `ditune hardware` lists them)",
        origin));
  }
  if (ctx.ranks < 0) {
    return Status::InvalidArgument(
        fmt::format("--ranks {} must be >= 1 (or 0 to count the '#  Rank' lines)", ctx.ranks));
  }

  NcclTestsReader reader(ctx, origin, collective);
  for (const auto& line : lines) DITUNE_RETURN_IF_ERROR(reader.ReadLine(line));
  return reader.Finish();
}

}  // namespace ditune
