// xDiT benchmark logs: each "epoch time: X sec, parameter memory: Y GB, memory: Z GB" line,
// as xDiT's example scripts print it on the last rank, is one end-to-end measurement.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "costmodels/ingest.h"
#include "core/csv.h"
#include "costmodels/ingest_impl.h"

namespace ditune {
namespace {

using ingest_internal::LineError;

constexpr std::string_view kEpochTime = "epoch time:";
constexpr std::string_view kParameterMemory = "parameter memory:";
constexpr std::string_view kMemory = "memory:";
constexpr std::string_view kExample =
    "'epoch time: 6.71 sec, parameter memory: 33.85 GB, memory: 35.12 GB'";

std::string_view SkipBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// A finite number at the start of `s` (after blanks), and what follows it.
std::optional<std::pair<double, std::string_view>> LeadingNumber(std::string_view s) {
  s = SkipBlanks(s);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr == s.data() || !std::isfinite(v)) return std::nullopt;
  return std::pair{v, s.substr(static_cast<size_t>(ptr - s.data()))};
}

// The run of letters at the start of `s` (after blanks): a unit such as "sec" or "GB".
std::string_view LeadingWord(std::string_view s) {
  s = SkipBlanks(s);
  size_t n = 0;
  while (n < s.size() && ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z'))) ++n;
  return s.substr(0, n);
}

// What one "epoch time:" line says.
struct XditTiming {
  double epoch_s = 0;
  std::optional<double> parameter_memory_gb;
  std::optional<double> peak_memory_gb;
};

// Parses the part of a line after "epoch time:"; the error says what is wrong.
StatusOr<XditTiming> ParseTiming(std::string_view rest) {
  XditTiming timing;
  auto epoch = LeadingNumber(rest);
  if (!epoch) {
    return Status::InvalidArgument(
        fmt::format("'epoch time:' is not followed by a number of seconds (valid: {})", kExample));
  }
  timing.epoch_s = epoch->first;
  std::string_view unit = LeadingWord(epoch->second);
  if (!unit.empty() && unit != "sec" && unit != "s" && unit != "secs" && unit != "seconds") {
    return Status::InvalidArgument(
        fmt::format("epoch time is in '{}' (valid: seconds, as in {})", unit, kExample));
  }
  rest = epoch->second;

  // A memory figure: a number, then "GB" (xDiT divides bytes by 1e9).
  auto memory = [&](std::string_view label, size_t at) -> StatusOr<double> {
    auto gb = LeadingNumber(rest.substr(at + label.size()));
    if (!gb) {
      return Status::InvalidArgument(
          fmt::format("'{}' is not followed by a number of GB (valid: {})", label, kExample));
    }
    std::string_view gb_unit = LeadingWord(gb->second);
    if (!gb_unit.empty() && gb_unit != "GB") {
      return Status::InvalidArgument(
          fmt::format("'{}' is in '{}' (valid: GB, as in {})", label, gb_unit, kExample));
    }
    return gb->first;
  };
  if (size_t at = rest.find(kParameterMemory); at != std::string_view::npos) {
    DITUNE_ASSIGN_OR_RETURN(timing.parameter_memory_gb, memory(kParameterMemory, at));
  }
  // The peak: "memory:" (or "peak memory:") that is not part of "parameter memory:".
  for (size_t at = rest.find(kMemory); at != std::string_view::npos;
       at = rest.find(kMemory, at + kMemory.size())) {
    const size_t label = kParameterMemory.size() - kMemory.size();
    if (at >= label && rest.substr(at - label, kParameterMemory.size()) == kParameterMemory) {
      continue;
    }
    DITUNE_ASSIGN_OR_RETURN(timing.peak_memory_gb, memory(kMemory, at));
    break;
  }
  return timing;
}

}  // namespace

StatusOr<std::vector<Measurement>> ParseXditLog(std::string_view text, const IngestContext& ctx,
                                                std::string_view origin) {
  DITUNE_RETURN_IF_ERROR(CheckUtf8(text, origin));
  if (ctx.device.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: an xDiT log does not say which GPU ran it in ditune's terms; pass --gpu ID (a GPU "
        "catalog id, e.g. h100-sxm5-80gb; `ditune hardware` lists them)",
        origin));
  }
  if (!ctx.run.is_object()) {
    return Status::InvalidArgument(fmt::format(
        "{}: the run description must be a JSON object, got {}", origin, ctx.run.dump()));
  }
  const auto gpus = ctx.run.find("gpus");
  if (gpus == ctx.run.end() || !gpus->is_number_integer() || gpus->get<int64_t>() < 1 ||
      gpus->get<int64_t>() > 1'000'000) {
    return Status::InvalidArgument(fmt::format(
        "{}: the number of GPUs of the xDiT run is unknown (run \"gpus\" must be a whole number "
        ">= 1); pass --ranks N, the world size the run was launched with",
        origin));
  }
  const auto output_type = ctx.run.find("output_type");
  const bool latent = output_type != ctx.run.end() && output_type->is_string() &&
                      output_type->get<std::string>() == "latent";

  std::vector<Measurement> out;
  for (const auto& line : ingest_internal::SplitLines(text)) {
    const size_t at = line.text.find(kEpochTime);
    if (at == std::string_view::npos) continue;
    auto timing = ParseTiming(line.text.substr(at + kEpochTime.size()));
    if (!timing.ok()) return LineError(origin, line.number, timing.status().message());

    Measurement m;
    m.source = MeasurementSource::kImport;
    m.kind = MeasurementKind::kE2e;
    m.op = latent ? "dit" : "total";
    m.backend = "xdit";
    m.device = ctx.device;
    m.ranks = static_cast<int>(gpus->get<int64_t>());
    m.params = ctx.run;
    if (timing->parameter_memory_gb) m.params["parameter_memory_gb"] = *timing->parameter_memory_gb;
    if (timing->peak_memory_gb) m.params["peak_memory_gb"] = *timing->peak_memory_gb;
    m.median = Seconds(timing->epoch_s);
    m.p10 = m.median;
    m.p90 = m.median;
    m.run_id = ctx.run_id;
    if (Status st = m.Validate(); !st.ok()) return LineError(origin, line.number, st.message());
    out.push_back(std::move(m));
  }
  if (out.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: no xDiT timing line (valid: a line like {}, which xDiT's example "
                    "scripts print on the last rank)",
                    origin, kExample));
  }
  return out;
}

}  // namespace ditune
