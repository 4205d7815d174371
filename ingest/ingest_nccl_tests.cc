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
// This file reads the file and its tests; ingest_nccl_table.cc reads one line of it.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/csv.h"
#include "costmodels/comm_model.h"
#include "ingest/ingest.h"
#include "ingest/ingest_impl.h"
#include "ingest/ingest_nccl_impl.h"

namespace ditune {
namespace {

using ingest_internal::AddWarning;
using ingest_internal::LineError;
using ingest_internal::ParseDouble;
using ingest_internal::ParseInt;
using ingest_internal::SplitWhitespace;
using ingest_internal::StripLauncherPrefix;
using ingest_internal::Trim;
using ingest_internal::nccl::CollectiveOfProgram;
using ingest_internal::nccl::CollectivesInFileName;
using ingest_internal::nccl::Excerpt;
using ingest_internal::nccl::NormalizeCollective;
using ingest_internal::nccl::ProgramIn;
using ingest_internal::nccl::TimedIters;
using ingest_internal::nccl::BandwidthMatches;
using ingest_internal::nccl::Col;
using ingest_internal::nccl::CutLogText;
using ingest_internal::nccl::DefaultLayout;
using ingest_internal::nccl::HasLogMarker;
using ingest_internal::nccl::IsAlpha;
using ingest_internal::nccl::IsDigit;
using ingest_internal::nccl::IsValueToken;
using ingest_internal::nccl::LayoutFromHeader;
using ingest_internal::nccl::LogCut;
using ingest_internal::nccl::ReadRow;
using ingest_internal::nccl::Row;
using ingest_internal::nccl::RowRead;
using ingest_internal::nccl::TableLayout;
using ingest_internal::nccl::WrongResult;

constexpr std::string_view kValidCollectives =
    "all_to_all, all_gather, all_reduce, sendrecv, reduce_scatter";
constexpr std::string_view kValidPrograms =
    "the output of all_reduce_perf, all_gather_perf, alltoall_perf, sendrecv_perf or "
    "reduce_scatter_perf";

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
    return Status::Ok();
  }
  // Inside a table, a line whose first token starts like a number but is not a whole count of
  // bytes ("1.5e6", "1,024", "8M") is a row this reader cannot take: said, not lost.
  if ((test_.layout || test_.rows > 0) && tokens.size() >= 3 &&
      std::isdigit(static_cast<unsigned char>(tokens.front().front())) != 0) {
    Drop(number, fmt::format("size '{}' is not a whole number of bytes; row dropped", Excerpt(tokens.front())));
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