// xDiT benchmark output: one end-to-end measurement per timing it reports.
//
// Lines read (anywhere in a line, after any logger or launcher prefix):
//   example scripts, last rank:  "epoch time: 6.71 sec, parameter memory: 33.85 GB, memory:
//                                 35.12 GB" (the memory figures optional; newer scripts say
//                                 "model memory: ..., overall memory: ...", on the same line or
//                                 one of their own)
//   the unified runner:          "Iteration 2 completed in 6.70 s" per timed run, and
//                                 "Average time over 3 runs: 6.71 s" (one measurement of the
//                                 mean, only when no Iteration lines gave the runs themselves)
//   latency-test scripts:        "Running test for size 1024, ulysses_degree 2, ring_degree 4"
//                                 before each run: the results after it belong to that
//                                 configuration, not to the one the command line gave
// A timings file instead of a log (the runner's timings.json): a JSON document holding the
// per-run times in seconds, as ParseTimingsJson below describes.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/csv.h"
#include "core/parallel_config.h"
#include "ingest/ingest.h"
#include "ingest/ingest_impl.h"

namespace ditune {
namespace {

using ingest_internal::LineError;
using ingest_internal::Trim;

constexpr std::string_view kEpochTime = "epoch time:";
constexpr std::string_view kExample =
    "'epoch time: 6.71 sec, parameter memory: 33.85 GB, memory: 35.12 GB'";
constexpr std::string_view kIterationExample = "'Iteration 2 completed in 6.70 s'";
constexpr std::string_view kAverageExample = "'Average time over 3 runs: 6.71 s'";
constexpr std::string_view kAnnouncement = "Running test for";

std::string_view SkipBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// The "config" of a run description as text ("" when it has none).
std::string ConfigOf(const nlohmann::json& run) {
  const auto it = run.find("config");
  if (it == run.end()) return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A finite number at the start of `s` (after blanks), and what follows it.
std::optional<std::pair<double, std::string_view>> LeadingNumber(std::string_view s) {
  s = SkipBlanks(s);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr == s.data() || !std::isfinite(v)) return std::nullopt;
  return std::pair{v, s.substr(static_cast<size_t>(ptr - s.data()))};
}

// A whole number >= 0 at the start of `s` (after blanks), and what follows it.
std::optional<std::pair<int64_t, std::string_view>> LeadingInt(std::string_view s) {
  s = SkipBlanks(s);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr == s.data() || v < 0) return std::nullopt;
  return std::pair{v, s.substr(static_cast<size_t>(ptr - s.data()))};
}

// The run of letters at the start of `s` (after blanks): a unit such as "sec" or "GB".
std::string_view LeadingWord(std::string_view s) {
  s = SkipBlanks(s);
  size_t n = 0;
  while (n < s.size() && IsLetter(s[n])) ++n;
  return s.substr(0, n);
}

bool IsSecondsUnit(std::string_view unit) {
  return unit.empty() || unit == "sec" || unit == "s" || unit == "secs" || unit == "seconds";
}

// Seconds at the start of `rest`: "6.71 sec", "6.71s", "6.71 seconds" or a bare number.
StatusOr<std::pair<double, std::string_view>> LeadingSeconds(std::string_view rest,
                                                             std::string_view what,
                                                             std::string_view example) {
  auto v = LeadingNumber(rest);
  if (!v) {
    return Status::InvalidArgument(
        fmt::format("{} is not followed by a number of seconds (valid: {})", what, example));
  }
  const std::string_view unit = LeadingWord(v->second);
  if (!IsSecondsUnit(unit)) {
    return Status::InvalidArgument(
        fmt::format("{} is in '{}' (valid: seconds, as in {})", what, unit, example));
  }
  return *v;
}

// The memory figures of a line: "parameter memory:" / "model memory:" (the weights, after
// loading) and "memory:" / "overall memory:" / "peak memory:" (the peak), in GB as xDiT prints
// them (bytes / 1e9).
struct Memory {
  std::optional<double> parameter_gb;
  std::optional<double> peak_gb;
};

Status ReadMemory(std::string_view s, Memory* memory) {
  constexpr std::string_view kMemory = "memory:";
  for (size_t at = s.find(kMemory); at != std::string_view::npos; at = s.find(kMemory, at + 1)) {
    size_t begin = at;
    while (begin > 0 && s[begin - 1] == ' ') --begin;
    size_t word = begin;
    while (word > 0 && IsLetter(s[word - 1])) --word;
    const std::string_view qualifier = s.substr(word, begin - word);
    const std::string label =
        qualifier.empty() ? std::string(kMemory) : fmt::format("{} {}", qualifier, kMemory);
    const bool parameter = qualifier == "parameter" || qualifier == "model";
    std::optional<double>& slot = parameter ? memory->parameter_gb : memory->peak_gb;
    if (slot) continue;  // the first figure of each kind counts
    auto gb = LeadingNumber(s.substr(at + kMemory.size()));
    if (!gb) {
      return Status::InvalidArgument(
          fmt::format("'{}' is not followed by a number of GB (valid: {})", label, kExample));
    }
    const std::string_view unit = LeadingWord(gb->second);
    if (!unit.empty() && unit != "GB") {
      return Status::InvalidArgument(
          fmt::format("'{}' is in '{}' (valid: GB, as in {})", label, unit, kExample));
    }
    slot = gb->first;
  }
  return Status::Ok();
}

bool HasMemoryFigure(std::string_view line) {
  return line.find("model memory:") != std::string_view::npos ||
         line.find("overall memory:") != std::string_view::npos ||
         line.find("parameter memory:") != std::string_view::npos ||
         line.find("peak memory:") != std::string_view::npos;
}

// "Iteration 2 completed in 6.70 s" (also "Iteration 2/5 completed in 6.70s"): the iteration
// and its seconds; nullopt when the line is not one; an error when it is, but malformed.
std::optional<StatusOr<std::pair<int64_t, double>>> ParseIterationLine(std::string_view line) {
  constexpr std::string_view kIteration = "Iteration ";
  constexpr std::string_view kCompleted = "completed in";
  const size_t at = line.find(kIteration);
  if (at == std::string_view::npos) return std::nullopt;
  auto n = LeadingInt(line.substr(at + kIteration.size()));
  if (!n) return std::nullopt;
  std::string_view rest = n->second;
  if (!rest.empty() && rest.front() == '/') {
    auto total = LeadingInt(rest.substr(1));
    if (!total) return std::nullopt;
    rest = total->second;
  }
  rest = SkipBlanks(rest);
  if (!rest.starts_with(kCompleted)) return std::nullopt;
  auto seconds =
      LeadingSeconds(rest.substr(kCompleted.size()), "'completed in'", kIterationExample);
  if (!seconds.ok()) return StatusOr<std::pair<int64_t, double>>(seconds.status());
  return StatusOr<std::pair<int64_t, double>>(std::pair{n->first, seconds->first});
}

// "Average time over 3 runs: 6.71 s": the number of runs and their mean seconds.
std::optional<StatusOr<std::pair<int64_t, double>>> ParseAverageLine(std::string_view line) {
  constexpr std::string_view kAverage = "Average time over ";
  const size_t at = line.find(kAverage);
  if (at == std::string_view::npos) return std::nullopt;
  auto n = LeadingInt(line.substr(at + kAverage.size()));
  if (!n) return std::nullopt;
  std::string_view rest = SkipBlanks(n->second);
  const std::string_view word = LeadingWord(rest);
  if (word != "runs" && word != "run" && word != "iterations" && word != "iters")
    return std::nullopt;
  rest = rest.substr(word.size());
  if (rest.empty() || rest.front() != ':') return std::nullopt;
  if (n->first < 1) {
    return StatusOr<std::pair<int64_t, double>>(Status::InvalidArgument(fmt::format(
        "an average over {} runs (valid: 1 or more, as in {})", n->first, kAverageExample)));
  }
  auto seconds = LeadingSeconds(rest.substr(1), "'Average time over'", kAverageExample);
  if (!seconds.ok()) return StatusOr<std::pair<int64_t, double>>(seconds.status());
  return StatusOr<std::pair<int64_t, double>>(std::pair{n->first, seconds->first});
}

// ---------------------------------------------------------------------------------------------
// Configurations a log announces.

// Reads one "key value" of an announcement into the config or workload; false when the key
// is not one ditune knows. Keys as xDiT's scripts and flags spell them.
StatusOr<bool> ApplyKey(std::string_view key, std::string_view value,
                        std::vector<std::string>* config, nlohmann::json* run) {
  auto whole = [&](int min) -> StatusOr<int64_t> {
    auto v = ingest_internal::ParseInt(value);
    if (!v || *v < min || *v > kMaxWorldSize) {
      return Status::InvalidArgument(
          fmt::format("announces '{} {}' (valid: a whole number >= {})", key, value, min));
    }
    return *v;
  };
  auto flag = [&](std::string_view name) -> StatusOr<bool> {
    const std::string v(value);
    if (v.empty() || v == "True" || v == "true" || v == "1" || v == "2") return true;
    if (v == "False" || v == "false" || v == "0" || v == "None") return false;
    return Status::InvalidArgument(
        fmt::format("announces '{} {}' (valid: True or False, or a degree 1 or 2)", name, value));
  };
  const std::pair<std::string_view, std::string_view> kDegrees[] = {
      {"ulysses_degree", "ulysses"},
      {"ulysses", "ulysses"},
      {"ring_degree", "ring"},
      {"ring", "ring"},
      {"pipefusion_parallel_degree", "pipefusion"},
      {"pp_degree", "pipefusion"},
      {"pipefusion", "pipefusion"},
      {"num_pipeline_patch", "patches"},
      {"num_pipeline_patches", "patches"},
      {"patches", "patches"},
      {"tensor_parallel_degree", "tp"},
      {"tp_degree", "tp"},
      {"tp", "tp"},
      {"data_parallel_degree", "dp"},
      {"dp_degree", "dp"},
      {"dp", "dp"},
  };
  for (const auto& [name, ditune] : kDegrees) {
    if (key != name) continue;
    DITUNE_ASSIGN_OR_RETURN(const int64_t v, whole(1));
    config->push_back(fmt::format("{}={}", ditune, v));
    return true;
  }
  if (key == "warmup_step" || key == "warmup_steps" || key == "warmup") {
    DITUNE_ASSIGN_OR_RETURN(const int64_t v, whole(0));
    config->push_back(fmt::format("warmup={}", v));
    return true;
  }
  if (key == "cfg_degree" || key == "cfg" || key == "use_cfg_parallel") {
    if (ingest_internal::ParseInt(value)) {
      DITUNE_ASSIGN_OR_RETURN(const int64_t v, whole(1));
      config->push_back(fmt::format("cfg={}", v));
      return true;
    }
    DITUNE_ASSIGN_OR_RETURN(const bool on, flag(key));
    config->push_back(on ? "cfg=2" : "cfg=1");
    return true;
  }
  if (key == "size" || key == "height" || key == "width") {
    DITUNE_ASSIGN_OR_RETURN(const int64_t v, whole(1));
    if (key != "width") (*run)["height"] = v;
    if (key != "height") (*run)["width"] = v;
    return true;
  }
  if (key == "steps" || key == "num_inference_steps") {
    DITUNE_ASSIGN_OR_RETURN(const int64_t v, whole(1));
    (*run)["steps"] = v;
    return true;
  }
  return false;
}

// Applies the degrees of an announcement (ditune "key=value" items) to `run`: its "config"
// (canonical ditune syntax) and "gpus" (the world size). No degrees: `run` keeps its own.
Status ApplyConfig(const std::vector<std::string>& items, nlohmann::json* run) {
  if (items.empty()) return Status::Ok();
  std::string text;
  bool pipefusion = false;
  for (const std::string& item : items)
    pipefusion |= item.starts_with("pipefusion=") && item != "pipefusion=1";
  for (const std::string& item : items) {
    // Without PipeFusion, patches and warm-up steps mean nothing (the scripts print 0 or 1).
    if (!pipefusion && (item.starts_with("patches=") || item.starts_with("warmup="))) continue;
    if (!text.empty()) text += ',';
    text += item;
  }
  auto config = ParseParallelConfig(text);
  if (!config.ok()) return config.status();
  (*run)["config"] = ToString(*config);
  (*run)["gpus"] = config->world_size();
  return Status::Ok();
}

// "Running test for size 1024, split batch, warmup_step 1, pp_degree 2, ulysses_degree 2,
// ring_degree 1, num_pipeline_patches 4": `base` with this run's configuration and size.
StatusOr<nlohmann::json> ParseAnnouncement(std::string_view rest, const nlohmann::json& base) {
  nlohmann::json run = base;
  std::vector<std::string> config;
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t comma = rest.find(',', pos);
    if (comma == std::string_view::npos) comma = rest.size();
    std::string_view item = Trim(rest.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    if (item == "split batch") {
      config.emplace_back("cfg=2");
      continue;
    }
    if (item == "no split batch") {
      config.emplace_back("cfg=1");
      continue;
    }
    // "key value", "key=value" or "key: value".
    const size_t sep = item.find_first_of(" =:\t");
    std::string_view key = item.substr(0, sep);
    std::string_view value;
    if (sep != std::string_view::npos) value = Trim(item.substr(sep + 1));
    while (!value.empty() && (value.front() == '=' || value.front() == ':'))
      value = Trim(value.substr(1));
    if (key.starts_with("--")) key.remove_prefix(2);
    DITUNE_ASSIGN_OR_RETURN(const bool known, ApplyKey(key, value, &config, &run));
    (void)known;  // other keys (prompts, batch names) say nothing ditune models
  }
  DITUNE_RETURN_IF_ERROR(ApplyConfig(config, &run));
  return run;
}

// ---------------------------------------------------------------------------------------------
// Turning timings into measurements.

class XditReader {
 public:
  XditReader(const IngestContext& ctx, std::string_view origin) : ctx_(ctx), origin_(origin) {
    const auto output_type = ctx.run.find("output_type");
    latent_ = output_type != ctx.run.end() && output_type->is_string() &&
              output_type->get<std::string>() == "latent";
    run_ = ctx.run;
  }

  // Starts a group of results that share `run` (a new announced configuration).
  void NewGroup(nlohmann::json run, int line) {
    FinishGroup();
    run_ = std::move(run);
    announced_line_ = line;
    group_start_ = out_.size();
    iterations_ = false;
    memory_ = {};
  }

  // A result: `seconds` at `line`, with what else is known about it.
  Status Add(int line, double seconds, const Memory& memory, nlohmann::json extra,
             int samples = 1) {
    const auto gpus = run_.find("gpus");
    if (gpus == run_.end() || !gpus->is_number_integer() || gpus->get<int64_t>() < 1 ||
        gpus->get<int64_t>() > 1'000'000) {
      return LineError(
          origin_, line,
          "the number of GPUs of the xDiT run is unknown (run \"gpus\" must be a whole "
          "number >= 1, and no 'Running test for ...' line before this result names "
          "the degrees); pass --ranks N, the world size the run was launched with, or "
          "--config");
    }
    Measurement m;
    m.source = MeasurementSource::kImport;
    m.kind = MeasurementKind::kE2e;
    m.op = latent_ ? "dit" : "total";
    m.backend = "xdit";
    m.device = ctx_.device;
    m.ranks = static_cast<int>(gpus->get<int64_t>());
    m.params = run_;
    for (auto& [key, value] : extra.items()) m.params[key] = value;
    if (memory.parameter_gb) m.params["parameter_memory_gb"] = *memory.parameter_gb;
    if (memory.peak_gb) m.params["peak_memory_gb"] = *memory.peak_gb;
    m.median = Seconds(seconds);
    m.p10 = m.median;
    m.p90 = m.median;
    m.samples = samples;
    m.run_id = ctx_.run_id;
    if (Status st = m.Validate(); !st.ok()) return LineError(origin_, line, st.message());
    out_.push_back(std::move(m));
    return Status::Ok();
  }

  Status ReadLine(const ingest_internal::Line& line);

  StatusOr<std::vector<Measurement>> Finish() {
    FinishGroup();
    if (overridden_line_ > 0) {
      ingest_internal::AddWarning(
          ctx_.warnings, origin_, overridden_line_,
          fmt::format("the log announces the configuration of each run; the results after such a "
                      "line are stored with it, not with --config {}",
                      ConfigOf(ctx_.run)));
    }
    if (out_.empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}: no xDiT timing line (valid: a line like {}, which xDiT's example scripts print on "
          "the last rank, or like {} and {} from the unified runner)",
          origin_, kExample, kIterationExample, kAverageExample));
    }
    return std::move(out_);
  }

 private:
  // Memory figures printed on a line of their own belong to the group's results.
  void FinishGroup() {
    for (size_t i = group_start_; i < out_.size(); ++i) {
      if (memory_.parameter_gb && !out_[i].params.contains("parameter_memory_gb")) {
        out_[i].params["parameter_memory_gb"] = *memory_.parameter_gb;
      }
      if (memory_.peak_gb && !out_[i].params.contains("peak_memory_gb")) {
        out_[i].params["peak_memory_gb"] = *memory_.peak_gb;
      }
    }
  }

  const IngestContext& ctx_;
  std::string_view origin_;
  bool latent_ = false;
  nlohmann::json run_;
  int announced_line_ = 0;
  int overridden_line_ = 0;
  size_t group_start_ = 0;
  bool iterations_ = false;
  Memory memory_;
  std::vector<Measurement> out_;
};

Status XditReader::ReadLine(const ingest_internal::Line& line) {
  const std::string_view text = line.text;
  if (const size_t at = text.find(kAnnouncement); at != std::string_view::npos) {
    auto run = ParseAnnouncement(text.substr(at + kAnnouncement.size()), ctx_.run);
    if (!run.ok()) return LineError(origin_, line.number, run.status().message());
    if (ctx_.run.contains("config") && ConfigOf(*run) != ConfigOf(ctx_.run) &&
        overridden_line_ == 0) {
      overridden_line_ = line.number;
    }
    NewGroup(*std::move(run), line.number);
    return Status::Ok();
  }
  nlohmann::json extra = nlohmann::json::object();
  if (announced_line_ > 0) extra["config_line"] = announced_line_;
  if (const size_t at = text.find(kEpochTime); at != std::string_view::npos) {
    const std::string_view rest = text.substr(at + kEpochTime.size());
    auto seconds = LeadingSeconds(rest, "'epoch time:'", kExample);
    if (!seconds.ok()) return LineError(origin_, line.number, seconds.status().message());
    Memory memory;
    if (Status st = ReadMemory(seconds->second, &memory); !st.ok()) {
      return LineError(origin_, line.number, st.message());
    }
    return Add(line.number, seconds->first, memory, std::move(extra));
  }
  if (auto iteration = ParseIterationLine(text)) {
    if (!iteration->ok()) return LineError(origin_, line.number, iteration->status().message());
    iterations_ = true;
    extra["iteration"] = (*iteration)->first;
    Memory memory;
    if (Status st = ReadMemory(text, &memory); !st.ok())
      return LineError(origin_, line.number, st.message());
    return Add(line.number, (*iteration)->second, memory, std::move(extra));
  }
  if (auto average = ParseAverageLine(text)) {
    if (!average->ok()) return LineError(origin_, line.number, average->status().message());
    if (iterations_) return Status::Ok();  // the runs themselves are already measurements
    extra["statistic"] = "mean";
    Memory memory;
    if (Status st = ReadMemory(text, &memory); !st.ok())
      return LineError(origin_, line.number, st.message());
    const int64_t runs = std::min<int64_t>((*average)->first, 1'000'000'000);
    return Add(line.number, (*average)->second, memory, std::move(extra), static_cast<int>(runs));
  }
  if (HasMemoryFigure(text)) {
    Memory memory;
    if (Status st = ReadMemory(text, &memory); !st.ok())
      return LineError(origin_, line.number, st.message());
    if (memory.parameter_gb) memory_.parameter_gb = memory.parameter_gb;
    if (memory.peak_gb) memory_.peak_gb = memory.peak_gb;
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// A timings file.
//
// Accepted (documented in docs/CALIBRATION.md's terms: per-run end-to-end seconds):
//   [6.71, 6.69, 6.70]                                      an array of seconds
//   [{"iteration": 1, "time": 6.71}, ...]                    an array of objects, each with one
//                                                             time member (below)
//   {"timings": [...], "ulysses_degree": 2, ...}            an object holding such an array in
//                                                             "timings", "times",
//                                                             "iteration_times", "latencies",
//                                                             "runs" or "iterations" (or its one
//                                                             array member); its scalar members may
//                                                             name the configuration as an
//                                                             announcement does
// Time members: "time", "time_s", "seconds", "elapsed", "elapsed_s", "latency", "latency_s",
// "duration", "duration_s", "e2e_time" in seconds; "time_ms", "elapsed_ms", "latency_ms",
// "duration_ms" in milliseconds. An array member whose name ends in "_ms" holds milliseconds.

constexpr int kMaxJsonDepth = 16;
constexpr std::string_view kTimingsExample =
    "[6.71, 6.69] or {\"timings\": [6.71, 6.69]}, seconds per run";

// The seconds a timing entry holds, or an error naming `where`.
StatusOr<double> EntrySeconds(const nlohmann::json& entry, bool milliseconds,
                              const std::string& where) {
  if (entry.is_number()) {
    const double v = entry.get<double>();
    return milliseconds ? v / 1e3 : v;
  }
  if (entry.is_object()) {
    constexpr std::string_view kSeconds[] = {"time",       "time_s",  "seconds",   "elapsed",
                                             "elapsed_s",  "latency", "latency_s", "duration",
                                             "duration_s", "e2e_time"};
    constexpr std::string_view kMillis[] = {"time_ms", "elapsed_ms", "latency_ms", "duration_ms"};
    for (std::string_view k : kSeconds) {
      auto it = entry.find(std::string(k));
      if (it != entry.end() && it->is_number()) return it->get<double>();
    }
    for (std::string_view k : kMillis) {
      auto it = entry.find(std::string(k));
      if (it != entry.end() && it->is_number()) return it->get<double>() / 1e3;
    }
  }
  return Status::InvalidArgument(fmt::format(
      "{} is {} (valid: a number of seconds, or an object with a \"time\" member; as in {})", where,
      entry.dump().substr(0, 60), kTimingsExample));
}

// Finds the array of timings in a parsed document; nullptr when it holds none.
const nlohmann::json* TimingsArray(const nlohmann::json& doc, std::string* name) {
  if (doc.is_array()) {
    *name = "";
    return &doc;
  }
  if (!doc.is_object()) return nullptr;
  for (std::string_view k : {"timings", "times", "iteration_times", "latencies", "runs",
                             "iterations", "timings_ms", "times_ms", "latencies_ms"}) {
    auto it = doc.find(std::string(k));
    if (it != doc.end() && it->is_array()) {
      *name = std::string(k);
      return &*it;
    }
  }
  const nlohmann::json* only = nullptr;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it->is_array()) continue;
    if (only != nullptr) return nullptr;
    only = &*it;
    *name = it.key();
  }
  return only;
}

// Parses `text` as JSON, refusing deep nesting; discarded when it is not JSON.
nlohmann::json ParseJson(std::string_view text, int* depth) {
  *depth = 0;
  const nlohmann::json::parser_callback_t deepest = [depth](int d, nlohmann::json::parse_event_t,
                                                            nlohmann::json&) {
    *depth = std::max(*depth, d);
    return d <= kMaxJsonDepth;
  };
  return nlohmann::json::parse(text, deepest, /*allow_exceptions=*/false);
}

StatusOr<std::vector<Measurement>> ParseTimingsJson(const nlohmann::json& doc,
                                                    const IngestContext& ctx,
                                                    std::string_view origin) {
  std::string name;
  const nlohmann::json* timings = TimingsArray(doc, &name);
  if (timings == nullptr || timings->empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: a JSON document without per-run timings (valid: {})", origin, kTimingsExample));
  }
  nlohmann::json run = ctx.run;
  if (doc.is_object()) {
    std::vector<std::string> config;
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (!it->is_number_integer() && !it->is_boolean()) continue;
      // Only xDiT's flag names: a bare "cfg" or "steps" in a results file may mean anything.
      const std::string& key = it.key();
      if (!(key.ends_with("_degree") || key.starts_with("num_pipeline_patch") ||
            key == "warmup_steps" || key == "use_cfg_parallel" || key == "height" ||
            key == "width" || key == "num_inference_steps")) {
        continue;
      }
      const std::string value =
          it->is_boolean() ? (it->get<bool>() ? "True" : "False") : it->dump();
      auto known = ApplyKey(it.key(), value, &config, &run);
      if (!known.ok()) {
        return Status::InvalidArgument(
            fmt::format("{}: member \"{}\": {}", origin, it.key(), known.status().message()));
      }
    }
    if (Status st = ApplyConfig(config, &run); !st.ok()) {
      return Status::InvalidArgument(fmt::format("{}: {}", origin, st.message()));
    }
  }
  IngestContext with_run = ctx;
  with_run.run = std::move(run);
  XditReader reader(with_run, origin);
  const bool milliseconds = name.ends_with("_ms");
  for (size_t i = 0; i < timings->size(); ++i) {
    const std::string where =
        name.empty() ? fmt::format("entry {}", i + 1) : fmt::format("\"{}\" entry {}", name, i + 1);
    auto seconds = EntrySeconds((*timings)[i], milliseconds, where);
    if (!seconds.ok())
      return Status::InvalidArgument(fmt::format("{}: {}", origin, seconds.status().message()));
    Status st = reader.Add(1, *seconds, Memory{}, {{"iteration", i + 1}});
    if (!st.ok()) {
      // Line 1 means nothing in a JSON document: name the entry instead.
      std::string message = st.message();
      const std::string prefix = fmt::format("{}:1: ", origin);
      if (message.starts_with(prefix)) message = message.substr(prefix.size());
      return Status::InvalidArgument(fmt::format("{}: {}: {}", origin, where, message));
    }
  }
  return reader.Finish();
}

}  // namespace

namespace ingest_internal {

bool LooksLikeXditLog(std::string_view text) {
  const std::string_view t = Trim(text);
  if (!t.empty() && (t.front() == '{' || t.front() == '[')) {
    int depth = 0;
    const nlohmann::json doc = ParseJson(t, &depth);
    std::string name;
    if (!doc.is_discarded() && TimingsArray(doc, &name) != nullptr) return true;
  }
  for (const Line& line : SplitLines(text)) {
    if (line.text.find(kEpochTime) != std::string_view::npos) return true;
    if (line.text.find("Running test for size") != std::string_view::npos) return true;
    if (ParseIterationLine(line.text) || ParseAverageLine(line.text)) return true;
  }
  return false;
}

}  // namespace ingest_internal

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
  // A "gpus" given must be usable; a missing one may come from the log's announcements.
  if (const auto gpus = ctx.run.find("gpus");
      gpus != ctx.run.end() && (!gpus->is_number_integer() || gpus->get<int64_t>() < 1 ||
                                gpus->get<int64_t>() > 1'000'000)) {
    return Status::InvalidArgument(fmt::format(
        "{}: the number of GPUs of the xDiT run is unknown (run \"gpus\" must be a whole number "
        ">= 1); pass --ranks N, the world size the run was launched with",
        origin));
  }

  // A timings file rather than a log.
  const std::string_view trimmed = Trim(text);
  if (!trimmed.empty() && (trimmed.front() == '{' || trimmed.front() == '[')) {
    int depth = 0;
    const nlohmann::json doc = ParseJson(trimmed, &depth);
    if (depth > kMaxJsonDepth) {
      return Status::InvalidArgument(fmt::format(
          "{}: the JSON document nests {} levels deep; at most {}", origin, depth, kMaxJsonDepth));
    }
    if (!doc.is_discarded()) return ParseTimingsJson(doc, ctx, origin);
    if (trimmed.front() == '{') {
      return Status::InvalidArgument(
          fmt::format("{}: starts like a JSON timings file but is not valid JSON (valid: {})",
                      origin, kTimingsExample));
    }
    // "[Rank 0] ...": a log after all.
  }

  XditReader reader(ctx, origin);
  for (const auto& line : ingest_internal::SplitLines(text)) {
    DITUNE_RETURN_IF_ERROR(reader.ReadLine(line));
  }
  return reader.Finish();
}

}  // namespace ditune
