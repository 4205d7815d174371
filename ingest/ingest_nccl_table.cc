// One line of nccl-tests output, for the file-level reader in ingest_nccl_tests.cc: the
// launcher prefix before it, the table header's column layout, log text glued onto a data row,
// and reading a row and judging whether nccl-tests trusted its results.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ingest/ingest_impl.h"
#include "ingest/ingest_nccl_impl.h"

namespace ditune {
namespace ingest_internal {

using nccl::IsBlank;
using nccl::IsDigit;

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

namespace ingest_internal::nccl {
namespace {

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

}  // namespace

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

namespace {

// A word such as a data type or reduction name ("float", "bfloat16", "sum", "none").
bool IsWord(std::string_view s) {
  if (s.empty() || s.size() > 24 || !IsAlpha(s.front())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; });
}

}  // namespace

// A value nccl-tests prints in a result column: a number, N/A, or either marked '*'.
bool IsValueToken(std::string_view s) {
  if (!s.empty() && s.back() == '*') s.remove_suffix(1);
  return s == "N/A" || ParseDouble(s).has_value();
}

// ---------------------------------------------------------------------------------------------
// Log text glued onto a row.

namespace {

constexpr std::string_view kLogMarkers[] = {"NCCL INFO",  "NCCL WARN", "NCCL TRACE", "NCCL ERROR",
                                            "NCCL ABORT", "<stdout>:", "<stderr>:"};

}  // namespace

bool HasLogMarker(std::string_view t) {
  for (std::string_view m : kLogMarkers) {
    if (t.find(m) != std::string_view::npos) return true;
  }
  return false;
}

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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

// GB/s (what printing with two decimals may shift it by).
bool BandwidthMatches(double parsed, double expected, double rounding) {
  return std::abs(parsed - expected) <= std::max(0.05 * std::abs(expected), rounding) + 1e-9;
}

}  // namespace ingest_internal::nccl
}  // namespace ditune
