// Validation suites: published or measured latencies to predict (DESIGN.md, "Validation
// suites"). A suite is a CSV whose header names these columns, in any order:
//   group,model,height,width,frames,steps,scope,gpu,gpus,nodes,gpus_per_node,intra,inter,
//   config,role,latency_s,source
// and optionally `runtime` (who ran it; absent or empty: xdit), `memory_gb` (the published
// peak per GPU) and `quote` (the source's words). A row a runtime ditune does not price yet,
// or a configuration it cannot read, is kept and marked refused with the reason (validate
// reports it and predicts the rest); a malformed field is an error naming the line.
#ifndef DITUNE_CALIBRATION_SUITE_H_
#define DITUNE_CALIBRATION_SUITE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/workload.h"

namespace ditune {

// e2e: text encoding + denoising + VAE decode; dit: denoising only; step: one steady step.
enum class SuiteScope { kE2e, kDit, kStep };
enum class SuiteRole { kCalibrate, kPredict };

struct SuiteRow {
  std::string origin;  // the CSV it was read from, as named to ParseSuite
  int line = 0;        // in the CSV
  std::string group;
  Workload workload;
  SuiteScope scope = SuiteScope::kE2e;
  ClusterSpec cluster;
  std::string config_text;             // as written
  std::optional<ParallelConfig> config;  // empty for "best"
  SuiteRole role = SuiteRole::kPredict;
  std::optional<double> latency_s;     // empty for OOM
  std::string source;
  std::string runtime = "xdit";     // who ran it
  std::optional<double> memory_gb;  // published peak per GPU, where given
  std::string refused;              // why ditune cannot predict it; empty when it can

  bool best() const { return !config.has_value(); }
};

// Parses and checks a suite: the header, every field (ids against the catalog, numbers,
// enums, configs), and exactly one calibrate row per group. Errors name "origin:line".
StatusOr<std::vector<SuiteRow>> ParseSuite(std::string_view text, std::string_view origin, const Catalog& catalog);

// ParseSuite of a file; NotFound naming the path when it cannot be read.
StatusOr<std::vector<SuiteRow>> LoadSuiteFile(const std::string& path, const Catalog& catalog);

// LoadSuiteFile of each path, the rows in order. A group is one file's: a group named in two
// files is InvalidArgument naming both (its calibrate row would calibrate the other's rows).
StatusOr<std::vector<SuiteRow>> LoadSuiteFiles(const std::vector<std::string>& paths, const Catalog& catalog);

// Who published a row: the owner of the repository its source names ("github:Wan-Video/
// Wan2.1 README.md ..." -> "Wan-Video": Wan2.1's and Wan2.2's tables are one publisher's), or
// else the source's first word ("xDiT docs/performance/flux.md" -> "xDiT"); "unknown" for an
// empty source. Leave-one-source-out holds out every row of one publisher at once.
std::string PublisherOf(const SuiteRow& row);

// Where a row is from, for people: "FILE line N", the file without its folders ("line N"
// where it has no origin).
std::string RowPlace(const SuiteRow& row);

std::string_view SuiteScopeName(SuiteScope s);

// The rows ditune can price: without those marked refused (SuiteRow::refused) and those of a
// group whose calibrate row is; `*left_out` (when given) receives a line for each row left out.
std::vector<SuiteRow> PricedRows(std::vector<SuiteRow> rows, std::vector<std::string>* left_out = nullptr);

}  // namespace ditune

#endif  // DITUNE_CALIBRATION_SUITE_H_
