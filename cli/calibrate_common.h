// Helpers shared by `ditune calibrate`'s subcommands (cmd_calibrate*.cc).
#ifndef DITUNE_CLI_CALIBRATE_COMMON_H_
#define DITUNE_CLI_CALIBRATE_COMMON_H_

#include <memory>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "store/store.h"

namespace ditune::cli {

// The store --db names, or the default one. A command that records (`records`) refuses a
// store in memory (`--db :memory:`): what it keeps would vanish with the process.
StatusOr<std::unique_ptr<Store>> OpenStoreFromArgs(const cxxopts::ParseResult& args, bool records = true);
// The fits as a table: kind, key, points, error and each fit's parameters.
void PrintFits(const std::vector<Fit>& fits);

// The subcommands: `ingest FILE` (cmd_calibrate_ingest.cc), `compute` and `comm`
// (cmd_calibrate_sweeps.cc); each returns the exit status.
int CalibrateIngest(int argc, char** argv);
int CalibrateCompute(int argc, char** argv);
int CalibrateComm(int argc, char** argv);

}  // namespace ditune::cli

#endif  // DITUNE_CLI_CALIBRATE_COMMON_H_
