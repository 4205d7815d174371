#include "calibration/suite.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/csv.h"
#include "core/enum_names.h"
#include "core/names.h"
#include "core/text.h"
#include "costmodels/measurement.h"

namespace ditune {
namespace {

constexpr const char* kColumns[] = {"group", "model", "height", "width", "frames", "steps",
                                    "scope", "gpu", "gpus", "nodes", "gpus_per_node", "intra",
                                    "inter", "config", "role", "latency_s", "source"};
constexpr const char* kOptionalColumns[] = {"runtime", "memory_gb", "quote"};

Status RowError(std::string_view origin, int line, const std::string& what) {
  return Status::InvalidArgument(fmt::format("{}:{}: {}", origin, line, what));
}

std::optional<int> Int(const std::string& s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

constexpr EnumName<SuiteScope> kSuiteScopeNames[] = {
    {SuiteScope::kE2e, "e2e"},
    {SuiteScope::kDit, "dit"},
    {SuiteScope::kStep, "step"},
};

std::string_view SuiteScopeName(SuiteScope s) { return NameIn(kSuiteScopeNames, s); }

StatusOr<std::vector<SuiteRow>> ParseSuite(std::string_view text, std::string_view origin, const Catalog& catalog) {
  DITUNE_ASSIGN_OR_RETURN(std::vector<CsvRecord> records, ReadCsvRecords(text, origin));
  if (records.empty()) return Status::InvalidArgument(fmt::format("{}: empty suite (no header line)", origin));
  // Columns by name: the 17 required ones once each, the optional ones at most once.
  std::vector<std::string> header(std::begin(kColumns), std::end(kColumns));
  std::map<std::string, int> at;
  for (size_t c = 0; c < records[0].fields.size(); ++c) {
    const std::string& name = records[0].fields[c];
    const bool known = std::find(header.begin(), header.end(), name) != header.end() ||
                       std::find(std::begin(kOptionalColumns), std::end(kOptionalColumns), name) != std::end(kOptionalColumns);
    if (!known) {
      return RowError(origin, records[0].line,
                      fmt::format("unknown column '{}' (columns: {}; optional: {})", name, fmt::join(header, ","),
                                  fmt::join(kOptionalColumns, ",")));
    }
    if (!at.emplace(name, static_cast<int>(c)).second) {
      return RowError(origin, records[0].line, fmt::format("column '{}' is named twice", name));
    }
  }
  for (const auto& name : header) {
    if (!at.count(name)) {
      return RowError(origin, records[0].line,
                      fmt::format("the header has no column '{}' (columns: {})", name, fmt::join(header, ",")));
    }
  }
  const int width = static_cast<int>(records[0].fields.size());
  std::vector<SuiteRow> rows;
  for (size_t i = 1; i < records.size(); ++i) {
    const CsvRecord& rec = records[i];
    const int line = rec.line;
    if (static_cast<int>(rec.fields.size()) != width) {
      return RowError(origin, line, fmt::format("{} fields, the header has {}", rec.fields.size(), width));
    }
    // The row's fields in the required columns' order, then the optional ones ("" if absent).
    std::vector<std::string> f;
    for (const auto& name : header) f.push_back(rec.fields[at[name]]);
    auto optional = [&](const char* name) { return at.count(name) ? rec.fields[at[name]] : std::string(); };
    auto field_int = [&](int col, int min) -> StatusOr<int> {
      std::optional<int> v = Int(f[col]);
      if (!v || *v < min) {
        return RowError(origin, line, fmt::format("{} '{}' is not an integer >= {}", kColumns[col], f[col], min));
      }
      return *v;
    };
    SuiteRow row;
    row.line = line;
    row.group = f[0];
    if (row.group.empty()) return RowError(origin, line, "group is empty");
    // What the catalog does not know (a model, a GPU, a link) refuses the row, not the suite.
    auto model = FindModel(catalog, f[1]);
    row.workload.model_id = model.ok() ? (*model)->id : f[1];
    if (!model.ok()) {
      // One line per refused row: the catalog's list of ids is `ditune models`'.
      std::string why = model.status().message();
      if (size_t cut = why.find("; valid: "); cut != std::string::npos) why = why.substr(0, cut) + " (see `ditune models`)";
      row.refused = why;
    }
    DITUNE_ASSIGN_OR_RETURN(row.workload.height, field_int(2, 1));
    DITUNE_ASSIGN_OR_RETURN(row.workload.width, field_int(3, 1));
    DITUNE_ASSIGN_OR_RETURN(row.workload.frames, field_int(4, 1));
    DITUNE_ASSIGN_OR_RETURN(row.workload.steps, field_int(5, 1));
    if (f[6] == "e2e") row.scope = SuiteScope::kE2e;
    else if (f[6] == "dit") row.scope = SuiteScope::kDit;
    else if (f[6] == "step") row.scope = SuiteScope::kStep;
    else return RowError(origin, line, fmt::format("scope '{}' is not one of: e2e, dit, step", f[6]));
    row.workload.output = row.scope == SuiteScope::kE2e ? OutputType::kDecoded : OutputType::kLatent;
    if (model.ok()) {
      if (auto g = ComputeTokenGeometry(**model, row.workload); !g.ok()) {
        return RowError(origin, line, g.status().message());
      }
    }
    row.cluster.gpu_id = f[7];
    DITUNE_ASSIGN_OR_RETURN(row.cluster.gpus, field_int(8, 1));
    DITUNE_ASSIGN_OR_RETURN(row.cluster.nodes, field_int(9, 1));
    DITUNE_ASSIGN_OR_RETURN(row.cluster.gpus_per_node, field_int(10, 1));
    row.cluster.intra_id = f[11];
    row.cluster.inter_id = f[12];
    // gpus_per_node is the size of the boxes; a run may use fewer GPUs of each (12 GPUs on two
    // 8-GPU nodes is 6 per node).
    if (row.cluster.gpus % row.cluster.nodes != 0 || row.cluster.gpus / row.cluster.nodes > row.cluster.gpus_per_node) {
      return RowError(origin, line, fmt::format("{} GPUs do not spread evenly over {} nodes of {} GPUs",
                                                row.cluster.gpus, row.cluster.nodes, row.cluster.gpus_per_node));
    }
    row.cluster.gpus_per_node = row.cluster.gpus / row.cluster.nodes;
    if (auto c = ResolveCluster(row.cluster, catalog); !c.ok() && row.refused.empty()) row.refused = c.status().message();
    row.config_text = f[13];
    row.runtime = optional("runtime").empty() ? "xdit" : optional("runtime");
    if (const std::string m = optional("memory_gb"); !m.empty()) {
      // GB, or GiB where the source counts so ("41.85 GiB/GPU").
      double v = 0;
      auto [p, ec] = std::from_chars(m.data(), m.data() + m.size(), v);
      const std::string_view unit = Trim(std::string_view(p, static_cast<size_t>(m.data() + m.size() - p)));
      const bool gib = unit == "GiB" || unit == "GiB/GPU";
      if (ec != std::errc() || !(v > 0) || !std::isfinite(v) || !(unit.empty() || unit == "GB" || unit == "GB/GPU" || gib)) {
        return RowError(origin, line,
                        fmt::format("memory_gb '{}' is not a positive number of GB (or of GiB, written '32.4 GiB')", m));
      }
      row.memory_gb = gib ? v * (1024.0 * 1024.0 * 1024.0) / 1e9 : v;
    }
    if (auto r = catalog.Runtime(row.runtime); !r.ok() && row.refused.empty()) {
      row.refused = fmt::format("runtime: {} (`ditune runtimes` lists them)", r.status().message());
    }
    if (f[13] != "best") {
      auto c = ParseParallelConfig(f[13]);
      if (c.ok()) {
        row.config = *c;
      } else if (row.refused.empty()) {
        row.refused = c.status().message();
      }
    }
    if (f[14] == "calibrate") row.role = SuiteRole::kCalibrate;
    else if (f[14] == "predict") row.role = SuiteRole::kPredict;
    else return RowError(origin, line, fmt::format("role '{}' is not one of: calibrate, predict", f[14]));
    if (f[15] != "OOM") {
      double v = 0;
      auto [p, ec] = std::from_chars(f[15].data(), f[15].data() + f[15].size(), v);
      if (ec != std::errc() || p != f[15].data() + f[15].size() || !(v > 0) || !std::isfinite(v)) {
        return RowError(origin, line, fmt::format("latency_s '{}' is not a positive number of seconds or OOM", f[15]));
      }
      // The bounds every measurement keeps (a calibrate row becomes one).
      if (v < kMinMeasuredSeconds || v > kMaxMeasuredSeconds) {
        return RowError(origin, line,
                        fmt::format("latency_s {} is outside the physical range (valid: {:g} to {:g} seconds, or OOM)",
                                    f[15], kMinMeasuredSeconds, kMaxMeasuredSeconds));
      }
      row.latency_s = v;
    }
    if (row.role == SuiteRole::kCalibrate && (!row.latency_s || (row.best() && row.refused.empty()))) {
      return RowError(origin, line, "a calibrate row needs a measured latency and an explicit config");
    }
    row.source = f[16];
    row.origin = std::string(origin);
    rows.push_back(std::move(row));
  }
  if (rows.empty()) {
    return Status::InvalidArgument(fmt::format("{}: the suite has a header but no rows", origin));
  }
  std::map<std::string, int> calibrate;
  std::map<std::string, int> first_line;
  std::map<std::string, const SuiteRow*> first_row;
  for (const auto& r : rows) {
    first_line.emplace(r.group, r.line);
    calibrate[r.group] += r.role == SuiteRole::kCalibrate;
    // A group's calibrate row calibrates its other rows: one model on one GPU.
    const SuiteRow* head = first_row.emplace(r.group, &r).first->second;
    if (head->workload.model_id != r.workload.model_id || head->cluster.gpu_id != r.cluster.gpu_id) {
      return RowError(origin, r.line,
                      fmt::format("group '{}' is {} on {} (line {}), this row {} on {}: a group holds one model on "
                                  "one GPU; give this row a group of its own",
                                  r.group, head->workload.model_id, head->cluster.gpu_id, head->line,
                                  r.workload.model_id, r.cluster.gpu_id));
    }
  }
  for (const auto& [group, count] : calibrate) {
    if (count != 1) {
      return RowError(origin, first_line[group],
                      fmt::format("group '{}' has {} calibrate rows; each group needs exactly one", group, count));
    }
  }
  return rows;
}

std::vector<SuiteRow> PricedRows(std::vector<SuiteRow> rows, std::vector<std::string>* left_out) {
  std::map<std::string, int> refused_calibrate;
  for (const auto& r : rows) {
    if (r.role == SuiteRole::kCalibrate && !r.refused.empty()) refused_calibrate[r.group] = r.line;
  }
  std::vector<SuiteRow> kept;
  for (auto& r : rows) {
    auto it = refused_calibrate.find(r.group);
    if (r.refused.empty() && it == refused_calibrate.end()) {
      kept.push_back(std::move(r));
      continue;
    }
    if (left_out != nullptr) {
      left_out->push_back(fmt::format("{} ({}): {}", RowPlace(r), r.group,
                                      !r.refused.empty() ? r.refused
                                                         : fmt::format("its group's calibrate row (line {}) is refused",
                                                                       it->second)));
    }
  }
  return kept;
}

StatusOr<std::vector<SuiteRow>> LoadSuiteFile(const std::string& path, const Catalog& catalog) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("cannot open suite '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseSuite(text.str(), path, catalog);
}

StatusOr<std::vector<SuiteRow>> LoadSuiteFiles(const std::vector<std::string>& paths, const Catalog& catalog) {
  if (paths.empty()) return Status::InvalidArgument("no suite named: give --suite FILE.csv (one or more)");
  std::vector<SuiteRow> rows;
  std::map<std::string, std::pair<std::string, int>> group_at;  // group -> (file, first line)
  for (const auto& path : paths) {
    DITUNE_ASSIGN_OR_RETURN(std::vector<SuiteRow> more, LoadSuiteFile(path, catalog));
    for (const auto& r : more) {
      auto [it, added] = group_at.emplace(r.group, std::make_pair(r.origin, r.line));
      if (!added && it->second.first != r.origin) {
        return Status::InvalidArgument(fmt::format(
            "group '{}' is in {} (line {}) and in {} (line {}): a group is one suite's; rename one of them", r.group,
            it->second.first, it->second.second, r.origin, r.line));
      }
    }
    rows.insert(rows.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return rows;
}

std::string PublisherOf(const SuiteRow& row) {
  std::string_view s = row.source;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (s.empty()) return "unknown";
  if (s.starts_with("github:")) {
    s.remove_prefix(7);
    const size_t slash = s.find('/');
    if (slash != std::string_view::npos && slash > 0) return std::string(s.substr(0, slash));
  }
  const std::string word(s.substr(0, s.find_first_of(" \t/,;:")));
  return word.empty() ? "unknown" : word;
}

std::string RowPlace(const SuiteRow& row) {
  if (row.origin.empty()) return fmt::format("line {}", row.line);
  return fmt::format("{} line {}", std::filesystem::path(row.origin).filename().string(), row.line);
}

}  // namespace ditune
