// Shared pieces of the ditune subcommands: the WORKLOAD and CLUSTER flags, output
// helpers, and the mapping of a Status to an exit code and a message.
#ifndef DITUNE_CLI_CLI_COMMON_H_
#define DITUNE_CLI_CLI_COMMON_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cxxopts.hpp>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "store/store.h"
#include "core/workload.h"

namespace ditune::cli {

// Adds --model --height --width --frames --steps --batch --output-type.
void AddWorkloadOptions(cxxopts::Options& options);
// Adds --gpu --gpus --gpus-per-node --nodes --intra --inter.
void AddClusterOptions(cxxopts::Options& options);

// Reads the workload flags; height, width, steps default to the model's usual values.
StatusOr<Workload> ReadWorkload(const cxxopts::ParseResult& args, const Catalog& catalog);
// The largest cluster the CLUSTER flags describe.
inline constexpr int kMaxClusterGpus = 65536;
// The catalog id of a GPU as the user typed it (core/names.h: ids in any case, nvidia-smi's
// names, short forms such as H100); a short form taken as one of several is said on stderr.
StatusOr<std::string> GpuIdOf(const std::string& typed);
StatusOr<ClusterSpec> ReadClusterSpec(const cxxopts::ParseResult& args);

// The WORKLOAD, CLUSTER and --config flags read, resolved against the catalog and
// validated together (the rules of core/validate.h).
struct ConfigInputs {
  const Catalog* catalog = nullptr;
  const ModelSpec* model = nullptr;
  Workload workload;
  TokenGeometry tokens;
  Cluster cluster;
  ParallelConfig config;
};
// `runtime`: validate with that runtime's rules for the model (its entry point's support
// data), on GPUs; empty, ditune's engine's rules, which the CPU device always takes. `validate`
// false leaves the configuration unchecked, for a caller that checks it by the rules of
// whoever will run it.
StatusOr<ConfigInputs> ReadConfigInputs(const cxxopts::ParseResult& args, std::string_view runtime = {},
                                        bool validate = true);

// Adds --runtime (who runs it: a runtime of the catalog, or "any" where `any_allowed`) and
// --executor, its older name.
void AddRuntimeOptions(cxxopts::Options& options, bool any_allowed);
// The runtime --runtime (or --executor) names, default "xdit": InvalidArgument naming the
// valid ids for an unknown one, "any" where it is not allowed, or the two flags disagreeing.
StatusOr<std::string> ReadRuntime(const cxxopts::ParseResult& args, const Catalog& catalog, bool any_allowed);

// Parses argv with `options`, turning cxxopts errors into InvalidArgument that names the
// flag and points at --help. Sets *help when --help was given (its text already printed).
StatusOr<cxxopts::ParseResult> Parse(cxxopts::Options& options, int argc, char** argv, bool* help);

// Prints "ditune <cmd>: <message>" to stderr and returns the exit code for `status`.
int Fail(const std::string& command, const Status& status);

// Opens the calibration store at `path`; a new store starts with the factory calibration
// shipped in the data directory (planner/factory.h).
StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& path);

// The store a pricing command reads (--db, else the default): OpenStoreForPricing, with its
// note on stderr where the shipped factory calibration stands in for an unopenable default.
StatusOr<std::unique_ptr<Store>> OpenPricingStore(const cxxopts::ParseResult& args);

// Writes `text` to `path`, the value of --`flag`: InvalidArgument naming the flag and the path
// when it cannot be opened, IOError when writing fails.
Status WriteOutputFile(const std::string& flag, const std::string& path, const std::string& text);

// A plain text table: a header row, then rows; columns padded to their widest cell.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace ditune::cli

#endif  // DITUNE_CLI_CLI_COMMON_H_
