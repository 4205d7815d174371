// ditune's measurement CSV, format detection and dispatch, and the helpers the other
// ingest parsers share (ingest_impl.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "ingest/ingest.h"
#include "core/csv.h"
#include "ingest/ingest_impl.h"

namespace ditune {
namespace ingest_internal {

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  int number = 1;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back({number++, line});
    pos = eol + 1;
  }
  return lines;
}

std::vector<std::string_view> SplitWhitespace(std::string_view s) {
  constexpr std::string_view kBlank = " \t\r\n";
  std::vector<std::string_view> tokens;
  size_t pos = s.find_first_not_of(kBlank);
  while (pos != std::string_view::npos) {
    size_t end = s.find_first_of(kBlank, pos);
    if (end == std::string_view::npos) end = s.size();
    tokens.push_back(s.substr(pos, end - pos));
    pos = s.find_first_not_of(kBlank, end);
  }
  return tokens;
}

std::optional<double> ParseDouble(std::string_view s) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// How deep a measurement's params JSON may nest.
constexpr int kMaxParamsDepth = 16;

Status LineError(std::string_view origin, int line, std::string_view what) {
  return Status::InvalidArgument(fmt::format("{}:{}: {}", origin, line, what));
}

}  // namespace ingest_internal

namespace {

using ingest_internal::LineError;
using ingest_internal::ParseDouble;
using ingest_internal::ParseInt;
using ingest_internal::Trim;

constexpr std::array<std::string_view, 5> kRequiredColumns = {"source", "kind", "op", "device",
                                                              "median_s"};
constexpr std::array<std::string_view, 10> kOptionalColumns = {
    "backend", "ranks", "link", "bytes", "flops", "p10_s", "p90_s", "samples", "params", "run_id"};

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

std::string AllColumns() {
  return fmt::format("{}, {}", fmt::join(kRequiredColumns, ", "),
                     fmt::join(kOptionalColumns, ", "));
}

bool IsColumn(std::string_view name) {
  return std::find(kRequiredColumns.begin(), kRequiredColumns.end(), name) !=
             kRequiredColumns.end() ||
         std::find(kOptionalColumns.begin(), kOptionalColumns.end(), name) !=
             kOptionalColumns.end();
}


// True iff `line`, split on commas, has at least two fields that are required column names:
// a ditune CSV header, perhaps with a misspelt column that ParseMeasurementCsv will name.
bool LooksLikeCsvHeader(std::string_view line) {
  int required = 0;
  int fields = 0;
  size_t pos = 0;
  while (pos <= line.size()) {
    size_t comma = line.find(',', pos);
    if (comma == std::string_view::npos) comma = line.size();
    std::string_view name = Trim(line.substr(pos, comma - pos));
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') {
      name = name.substr(1, name.size() - 2);
    }
    ++fields;
    if (std::find(kRequiredColumns.begin(), kRequiredColumns.end(), name) !=
        kRequiredColumns.end()) {
      ++required;
    }
    pos = comma + 1;
  }
  return fields >= 2 && required >= 2;
}

}  // namespace

StatusOr<std::vector<Measurement>> ParseMeasurementCsv(std::string_view text,
                                                       std::string_view origin) {
  DITUNE_ASSIGN_OR_RETURN(std::vector<CsvRecord> records, ReadCsvRecords(text, origin));
  if (records.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: no header line (valid: a first line naming the columns, at least {})",
                    origin, fmt::join(kRequiredColumns, ",")));
  }

  const CsvRecord& header = records.front();
  std::map<std::string, size_t, std::less<>> column;
  for (size_t i = 0; i < header.fields.size(); ++i) {
    const std::string name(Trim(header.fields[i]));
    if (!IsColumn(name)) {
      return LineError(
          origin, header.line,
          fmt::format("unknown column '{}' in the header (valid: {})", name, AllColumns()));
    }
    if (!column.emplace(name, i).second) {
      return LineError(origin, header.line,
                       fmt::format("column '{}' appears twice in the header", name));
    }
  }
  std::vector<std::string_view> missing;
  for (std::string_view name : kRequiredColumns) {
    if (column.find(name) == column.end()) missing.push_back(name);
  }
  if (!missing.empty()) {
    return LineError(origin, header.line,
                     fmt::format("the header lacks the required column(s) {} (required: {})",
                                 fmt::join(missing, ", "), fmt::join(kRequiredColumns, ", ")));
  }
  if (records.size() == 1) {
    return Status::InvalidArgument(
        fmt::format("{}: no measurement rows after the header on line {}", origin, header.line));
  }

  std::vector<Measurement> out;
  out.reserve(records.size() - 1);
  for (size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    const int line = rec.line;
    if (rec.fields.size() != header.fields.size()) {
      return LineError(origin, line,
                       fmt::format("{} fields, but the header names {} columns (valid: one field "
                                   "per column; quote fields that contain commas)",
                                   rec.fields.size(), header.fields.size()));
    }
    // The trimmed value of `name`, or "" when the column is absent.
    auto get = [&](std::string_view name) -> std::string_view {
      auto it = column.find(name);
      return it == column.end() ? std::string_view() : Trim(rec.fields[it->second]);
    };
    auto required = [&](std::string_view name) -> StatusOr<std::string> {
      std::string_view v = get(name);
      if (v.empty()) return LineError(origin, line, fmt::format("column '{}' is empty", name));
      return std::string(v);
    };
    auto number = [&](std::string_view name, std::string_view valid) -> StatusOr<double> {
      std::string_view v = get(name);
      std::optional<double> d = ParseDouble(v);
      if (!d) {
        return LineError(
            origin, line,
            fmt::format("column '{}': '{}' is not a number (valid: {})", name, v, valid));
      }
      return *d;
    };
    auto integer = [&](std::string_view name) -> StatusOr<int> {
      std::string_view v = get(name);
      std::optional<int64_t> i = ParseInt(v);
      if (!i || *i < 1 || *i > 1'000'000'000) {
        return LineError(origin, line,
                         fmt::format("column '{}': '{}' is not a whole number >= 1 (valid: e.g. "
                                     "8)",
                                     name, v));
      }
      return static_cast<int>(*i);
    };

    Measurement m;
    DITUNE_ASSIGN_OR_RETURN(std::string source, required("source"));
    auto parsed_source = ParseMeasurementSource(source);
    if (!parsed_source.ok()) {
      return LineError(origin, line,
                       fmt::format("column 'source': '{}' is not a measurement source (valid: "
                                   "executor, microbench, import)",
                                   source));
    }
    m.source = *parsed_source;
    DITUNE_ASSIGN_OR_RETURN(std::string kind, required("kind"));
    auto parsed_kind = ParseMeasurementKind(kind);
    if (!parsed_kind.ok()) {
      return LineError(origin, line,
                       fmt::format("column 'kind': '{}' is not a measurement kind (valid: op, "
                                   "collective, step, e2e)",
                                   kind));
    }
    m.kind = *parsed_kind;
    DITUNE_ASSIGN_OR_RETURN(m.op, required("op"));
    DITUNE_ASSIGN_OR_RETURN(m.device, required("device"));
    m.backend = std::string(get("backend"));
    m.link = std::string(get("link"));
    m.run_id = std::string(get("run_id"));

    DITUNE_ASSIGN_OR_RETURN(double median, number("median_s", "seconds, e.g. 0.0123"));
    m.median = Seconds(median);
    m.p10 = m.median;
    m.p90 = m.median;
    if (!get("p10_s").empty()) {
      DITUNE_ASSIGN_OR_RETURN(double p10, number("p10_s", "seconds, or empty for the median"));
      m.p10 = Seconds(p10);
    }
    if (!get("p90_s").empty()) {
      DITUNE_ASSIGN_OR_RETURN(double p90, number("p90_s", "seconds, or empty for the median"));
      m.p90 = Seconds(p90);
    }
    if (!get("bytes").empty()) {
      DITUNE_ASSIGN_OR_RETURN(double bytes, number("bytes", "bytes, e.g. 134217728"));
      m.bytes = Bytes(bytes);
    }
    if (!get("flops").empty()) {
      DITUNE_ASSIGN_OR_RETURN(double flops, number("flops", "a count of operations, e.g. 2.5e12"));
      m.flops = Flops(flops);
    }
    if (!get("ranks").empty()) {
      DITUNE_ASSIGN_OR_RETURN(m.ranks, integer("ranks"));
    }
    if (!get("samples").empty()) {
      DITUNE_ASSIGN_OR_RETURN(m.samples, integer("samples"));
    }
    if (std::string_view params = get("params"); !params.empty()) {
      // Parameters are a flat record of sizes: a deep nesting is refused before anything
      // recursive (storing, printing) meets it.
      int depth = 0;
      const nlohmann::json::parser_callback_t deepest = [&depth](int d, nlohmann::json::parse_event_t,
                                                                 nlohmann::json&) {
        depth = std::max(depth, d);
        return true;
      };
      nlohmann::json j = nlohmann::json::parse(params, deepest, /*allow_exceptions=*/false);
      if (depth > ingest_internal::kMaxParamsDepth) {
        return LineError(origin, line,
                         fmt::format("column 'params': nests {} levels deep; at most {}", depth,
                                     ingest_internal::kMaxParamsDepth));
      }
      if (j.is_discarded() || !j.is_object()) {
        return LineError(origin, line,
                         fmt::format("column 'params': '{}' is not a JSON object (valid: e.g. "
                                     "\"{{\"\"m\"\": 4096, \"\"n\"\": 3072}}\" with the CSV "
                                     "quotes doubled, or empty)",
                                     params));
      }
      m.params = std::move(j);
    }
    if (Status st = m.Validate(); !st.ok()) return LineError(origin, line, st.message());
    out.push_back(std::move(m));
  }
  return out;
}

StatusOr<IngestFormat> DetectIngestFormat(std::string_view text, std::string_view origin) {
  // Before anything reads the bytes as text: gzip is binary, and a trace is one JSON document.
  if (ingest_internal::LooksLikeTorchTrace(text)) return IngestFormat::kTorchTrace;
  if (text.starts_with(kUtf8Bom)) text.remove_prefix(kUtf8Bom.size());
  const std::vector<ingest_internal::Line> lines = ingest_internal::SplitLines(text);
  // ditune's CSV: its first line that is neither blank nor a comment is the header.
  for (const auto& line : lines) {
    std::string_view t = Trim(line.text);
    if (t.empty() || t.front() == '#') continue;
    if (LooksLikeCsvHeader(t)) return IngestFormat::kCsv;
    break;
  }
  for (const auto& line : lines) {
    auto tokens = ingest_internal::SplitWhitespace(line.text);
    if (tokens.size() < 2 || tokens[0] != "#") continue;
    if (tokens[1] == "nThread") return IngestFormat::kNcclTests;
    if (tokens[1] == "size" && tokens.size() > 2 && tokens[2] == "count") return IngestFormat::kNcclTests;
  }
  // Launcher-tagged lines, pasted headers, runner logs and timings.json: the parsers' own
  // recognisers.
  if (ingest_internal::LooksLikeNcclTests(text)) return IngestFormat::kNcclTests;
  if (ingest_internal::LooksLikeXditLog(text)) return IngestFormat::kXditLog;
  return Status::InvalidArgument(fmt::format(
      "{}: cannot tell the input format; pass --format (valid: csv, a header line naming the "
      "columns {}; nccl-tests, the output of all_reduce_perf and friends with its '# nThread' "
      "banner or '#  size  count  type ...' table header; xdit-log, a log with a line "
      "'epoch time: 6.71 sec, ...'; torch-trace, a PyTorch profiler trace, JSON with a "
      "\"traceEvents\" array or gzipped)",
      origin, fmt::join(kRequiredColumns, ",")));
}

StatusOr<std::vector<Measurement>> ParseIngest(std::string_view text, IngestFormat format,
                                               const IngestContext& ctx, std::string_view origin) {
  if (format == IngestFormat::kAuto) {
    DITUNE_ASSIGN_OR_RETURN(format, DetectIngestFormat(text, origin));
  }
  switch (format) {
    case IngestFormat::kCsv:
      return ParseMeasurementCsv(text, origin);
    case IngestFormat::kNcclTests:
      return ParseNcclTests(text, ctx, origin);
    case IngestFormat::kXditLog:
      return ParseXditLog(text, ctx, origin);
    case IngestFormat::kTorchTrace:
      return ParseTorchTrace(text, ctx, origin);
    case IngestFormat::kAuto:
      break;
  }
  return Status::Internal("ParseIngest: format not resolved");
}

}  // namespace ditune
