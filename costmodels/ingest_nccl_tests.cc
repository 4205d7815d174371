// nccl-tests output (all_reduce_perf, all_gather_perf, alltoall_perf, sendrecv_perf): one
// measurement per row of its result table.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "costmodels/ingest.h"
#include "core/csv.h"
#include "costmodels/ingest_impl.h"

namespace ditune {
namespace {

using ingest_internal::LineError;
using ingest_internal::ParseDouble;
using ingest_internal::ParseInt;
using ingest_internal::SplitWhitespace;
using ingest_internal::Trim;

constexpr std::string_view kValidCollectives = "all_to_all, all_gather, all_reduce, sendrecv";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
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
  return std::nullopt;
}

// The collectives a file or program name mentions (all_reduce_perf.txt, alltoall-8gpu.log,
// ./build/sendrecv_perf, ...).
std::set<std::string> CollectivesInFileName(std::string_view origin) {
  const size_t slash = origin.find_last_of("/\\");
  const std::string base =
      Lower(slash == std::string_view::npos ? origin : origin.substr(slash + 1));
  const std::pair<std::string_view, std::string_view> kNeedles[] = {
      {"all_reduce", "all_reduce"}, {"allreduce", "all_reduce"},  {"all_gather", "all_gather"},
      {"allgather", "all_gather"},  {"all_to_all", "all_to_all"}, {"alltoall", "all_to_all"},
      {"sendrecv", "sendrecv"},     {"send_recv", "sendrecv"}};
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

// busbw / algbw, as nccl-tests computes it for `n` ranks.
double BusBandwidthFactor(std::string_view collective, int n) {
  if (collective == "all_reduce") return 2.0 * (n - 1) / n;
  if (collective == "sendrecv") return 1.0;
  return static_cast<double>(n - 1) / n;  // all_gather, all_to_all
}

// True iff `parsed` matches `expected` as a printed value may: within 5% or 0.01 GB/s.
bool BandwidthMatches(double parsed, double expected) {
  return std::abs(parsed - expected) <= std::max(0.05 * std::abs(expected), 0.01);
}

// Where each value sits in a data line, from the "#  size  count  type ..." header.
struct TableLayout {
  std::string names = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong";
  size_t columns = 13;  // tokens per data line
  size_t size = 0;
  std::optional<size_t> count = 1;
  std::optional<size_t> type = 2;
  size_t time = 5;  // out-of-place
  size_t algbw = 6;
  size_t busbw = 7;
  std::optional<size_t> wrong = 8;
  std::optional<size_t> in_place_time = 9;
};

// The layout the header tokens (without the leading '#') describe; nullopt when they are not
// a result-table header.
std::optional<TableLayout> LayoutFromHeader(const std::vector<std::string_view>& names) {
  auto find = [&](std::string_view name, size_t from) -> std::optional<size_t> {
    for (size_t i = from; i < names.size(); ++i) {
      if (names[i] == name) return i;
    }
    return std::nullopt;
  };
  auto size = find("size", 0);
  auto time = find("time", 0);
  if (!size || !time) return std::nullopt;
  auto algbw = find("algbw", *time);
  auto busbw = find("busbw", *time);
  if (!algbw || !busbw) return std::nullopt;
  TableLayout layout;
  layout.names = fmt::format("{}", fmt::join(names, " "));
  layout.columns = names.size();
  layout.size = *size;
  layout.count = find("count", 0);
  layout.type = find("type", 0);
  layout.time = *time;
  layout.algbw = *algbw;
  layout.busbw = *busbw;
  layout.wrong = find("#wrong", *time);
  layout.in_place_time = find("time", *time + 1);
  return layout;
}

// "# nThread 1 nGpus 8 ... warmup iters: 5 iters: 20 agg iters: 1 ...": the timed iterations.
std::optional<int> TimedIters(const std::vector<std::string_view>& tokens) {
  for (size_t i = 1; i + 1 < tokens.size(); ++i) {
    if (tokens[i] != "iters:" || tokens[i - 1] == "warmup" || tokens[i - 1] == "agg") continue;
    if (auto v = ParseInt(tokens[i + 1]); v && *v >= 1 && *v <= 1'000'000'000) {
      return static_cast<int>(*v);
    }
  }
  return std::nullopt;
}

}  // namespace

StatusOr<std::vector<Measurement>> ParseNcclTests(std::string_view text, const IngestContext& ctx,
                                                  std::string_view origin) {
  DITUNE_RETURN_IF_ERROR(CheckUtf8(text, origin));
  const std::vector<ingest_internal::Line> lines = ingest_internal::SplitLines(text);

  // Newer nccl-tests name the binary: "# Collective test starting: all_reduce_perf".
  std::optional<std::string> announced;
  for (const auto& line : lines) {
    std::string_view t = Trim(line.text);
    constexpr std::string_view kStarting = "Collective test starting:";
    if (size_t at = t.find(kStarting); !t.empty() && t.front() == '#' && at != t.npos) {
      std::string_view program = Trim(t.substr(at + kStarting.size()));
      std::set<std::string> named = CollectivesInFileName(program);
      if (named.size() != 1) {
        return LineError(origin, line.number,
                         fmt::format("this is the output of {}, a collective ditune does not model "
                                     "(valid: the output of all_reduce_perf, all_gather_perf, "
                                     "alltoall_perf or sendrecv_perf)",
                                     program));
      }
      if (announced && *announced != *named.begin()) {
        return LineError(origin, line.number,
                         fmt::format("a second test, {}, after {}: one file holds one "
                                     "collective's output (valid: split the file)",
                                     *named.begin(), *announced));
      }
      announced = *named.begin();
    }
  }

  std::string collective;
  if (!ctx.collective.empty()) {
    auto c = NormalizeCollective(ctx.collective);
    if (!c) {
      return Status::InvalidArgument(
          fmt::format("--collective '{}' is not a collective ditune models (valid: {})",
                      ctx.collective, kValidCollectives));
    }
    if (announced && *announced != *c) {
      return Status::InvalidArgument(
          fmt::format("--collective {}, but {} says it is the output of the {} test (valid: "
                      "--collective {} or no --collective)",
                      *c, origin, *announced, *announced));
    }
    collective = *c;
  } else if (announced) {
    collective = *announced;
  } else {
    std::set<std::string> named = CollectivesInFileName(origin);
    if (named.size() != 1) {
      return Status::InvalidArgument(fmt::format(
          "{}: cannot tell which collective this nccl-tests output measured from its file name; "
          "pass --collective NAME (valid: {})",
          origin, kValidCollectives));
    }
    collective = *named.begin();
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

  // One run's state; a new "# nThread" banner starts another run (concatenated outputs).
  std::set<int64_t> ranks_listed;
  std::optional<int> iters;
  std::optional<TableLayout> layout;

  std::vector<Measurement> out;
  for (const auto& line : lines) {
    std::string_view t = Trim(line.text);
    if (t.empty()) continue;
    if (t.front() == '#') {
      const std::vector<std::string_view> tokens = SplitWhitespace(t.substr(1));
      if (tokens.empty()) continue;
      if (tokens[0] == "nThread") {
        ranks_listed.clear();
        iters = TimedIters(tokens);
        layout.reset();
      } else if (tokens[0] == "Rank" && tokens.size() >= 2) {
        if (auto r = ParseInt(tokens[1])) ranks_listed.insert(*r);
      } else if (auto l = LayoutFromHeader(tokens)) {
        layout = l;
      }
      continue;
    }
    const std::vector<std::string_view> tokens = SplitWhitespace(t);
    if (!ParseInt(tokens[0])) continue;  // not a data line: NCCL INFO, mpirun noise, ...

    const TableLayout cols = layout.value_or(TableLayout{});
    if (tokens.size() != cols.columns) {
      return LineError(origin, line.number,
                       fmt::format("{} columns, but the nccl-tests table has {} (valid: {})",
                                   tokens.size(), cols.columns, cols.names));
    }
    auto number = [&](size_t index, std::string_view name) -> StatusOr<double> {
      std::optional<double> v = ParseDouble(tokens[index]);
      if (!v || *v < 0) {
        return LineError(origin, line.number,
                         fmt::format("column {} ('{}') is '{}' (valid: a number >= 0)", index + 1,
                                     name, tokens[index]));
      }
      return *v;
    };
    const std::optional<int64_t> size = ParseInt(tokens[cols.size]);
    if (!size || *size < 0) {
      return LineError(origin, line.number,
                       fmt::format("size '{}' is not a byte count (valid: a whole number >= 0)",
                                   tokens[cols.size]));
    }
    DITUNE_ASSIGN_OR_RETURN(const double time_us, number(cols.time, "time"));
    DITUNE_ASSIGN_OR_RETURN(const double algbw, number(cols.algbw, "algbw"));
    DITUNE_ASSIGN_OR_RETURN(const double busbw, number(cols.busbw, "busbw"));
    if (time_us <= 0) {
      return LineError(origin, line.number,
                       fmt::format("out-of-place time is {} us (valid: > 0)", tokens[cols.time]));
    }
    // The physical bounds of measurement.h, in this table's columns and units.
    const double time_s = Microseconds(time_us).value();
    if (time_s < kMinMeasuredSeconds || time_s > kMaxMeasuredSeconds) {
      return LineError(origin, line.number,
                       fmt::format("out-of-place time is {} us, outside the physical range (valid: {} "
                                   "to {} us)",
                                   tokens[cols.time], kMinMeasuredSeconds * 1e6, kMaxMeasuredSeconds * 1e6));
    }
    if (static_cast<double>(*size) > kMaxMeasuredBytes) {
      return LineError(origin, line.number,
                       fmt::format("size {} bytes is above the physical bound (valid: at most {} bytes)",
                                   tokens[cols.size], kMaxMeasuredBytes));
    }
    if (static_cast<double>(*size) / time_s > kMaxMeasuredRatePerSecond) {
      return LineError(origin, line.number,
                       fmt::format("size / time = {} B / {} us = {} B/s is above the physical bound "
                                   "(valid: at most {} B/s; check the time column's unit, us)",
                                   tokens[cols.size], tokens[cols.time], static_cast<double>(*size) / time_s,
                                   kMaxMeasuredRatePerSecond));
    }
    if (cols.wrong && tokens[*cols.wrong] != "N/A") {
      std::optional<double> wrong = ParseDouble(tokens[*cols.wrong]);
      if (!wrong) {
        return LineError(
            origin, line.number,
            fmt::format("#wrong is '{}' (valid: a count, or N/A)", tokens[*cols.wrong]));
      }
      if (*wrong > 0) {
        return LineError(origin, line.number,
                         fmt::format("nccl-tests found {} wrong elements in this result; its "
                                     "timing is not trusted (valid: #wrong 0 or N/A)",
                                     tokens[*cols.wrong]));
      }
    }

    int ranks = ctx.ranks;
    if (ranks == 0) ranks = static_cast<int>(ranks_listed.size());
    if (ranks == 0) {
      return LineError(origin, line.number,
                       "the number of ranks is unknown (no '#  Rank N ...' lines before the "
                       "table); pass --ranks N");
    }

    // algbw = size / time; busbw = algbw x the collective's factor (nccl-tests' definitions).
    const double expected_algbw = static_cast<double>(*size) / (time_us * 1e3);
    if (!BandwidthMatches(algbw, expected_algbw)) {
      return LineError(origin, line.number,
                       fmt::format("algbw {} GB/s does not match size / time = {} B / {} us = "
                                   "{:.2f} GB/s; is this nccl-tests output?",
                                   tokens[cols.algbw], *size, tokens[cols.time], expected_algbw));
    }
    const double factor = BusBandwidthFactor(collective, ranks);
    if (!BandwidthMatches(busbw, algbw * factor)) {
      return LineError(
          origin, line.number,
          fmt::format("busbw {} GB/s does not match algbw {} GB/s x {:.4g} = {:.2f} GB/s, the "
                      "{} factor for {} ranks; check --ranks and --collective (valid: the ranks "
                      "and collective the test ran with)",
                      tokens[cols.busbw], tokens[cols.algbw], factor, algbw * factor, collective,
                      ranks));
    }

    Measurement m;
    m.source = MeasurementSource::kImport;
    m.kind = MeasurementKind::kCollective;
    m.op = collective;
    m.backend = "nccl";
    m.device = ctx.device;
    m.link = ctx.link;
    m.ranks = ranks;
    m.bytes = Bytes(static_cast<double>(*size));
    m.median = Microseconds(time_us);
    m.p10 = m.median;
    m.p90 = m.median;
    m.samples = iters.value_or(1);
    m.run_id = ctx.run_id;
    if (cols.count) {
      if (auto count = ParseInt(tokens[*cols.count])) m.params["count"] = *count;
    }
    if (cols.type) m.params["type"] = std::string(tokens[*cols.type]);
    m.params["busbw_gbps"] = busbw;
    m.params["algbw_gbps"] = algbw;
    if (cols.in_place_time) {
      DITUNE_ASSIGN_OR_RETURN(const double in_place_us, number(*cols.in_place_time, "time"));
      m.params["in_place_s"] = Microseconds(in_place_us).value();
    }
    if (Status st = m.Validate(); !st.ok()) return LineError(origin, line.number, st.message());
    out.push_back(std::move(m));
  }
  if (out.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: no nccl-tests result lines (valid: rows like '134217728  33554432  float  sum  -1  "
        "712.3  188.43  329.75  0  711.9  188.54  329.94  0' under the '#  size  count  type ...' "
        "header, as all_reduce_perf prints them)",
        origin));
  }
  return out;
}

}  // namespace ditune
