// Pieces shared by `ditune run`'s two paths: the CPU executor (cmd_run.cc) and the DiT engine
// on one device (cmd_run_engine.cc).
#ifndef DITUNE_CLI_RUN_COMMON_H_
#define DITUNE_CLI_RUN_COMMON_H_

#include <string>

#include <cxxopts.hpp>

#include "core/parallel_config.h"
#include "core/status.h"
#include "core/workload.h"

namespace ditune::cli {

// The configuration --config SPEC or --plan FILE (the best of `ditune plan --json`) names; a plan
// made for another workload than `workload` is InvalidArgument.
StatusOr<ParallelConfig> ReadRunConfig(const cxxopts::ParseResult& args, const Workload& workload);

// `ditune run --backend cuda|ref` after parsing; returns the exit status.
int RunOnEngine(const cxxopts::ParseResult& args, const std::string& backend);

}  // namespace ditune::cli

#endif  // DITUNE_CLI_RUN_COMMON_H_
