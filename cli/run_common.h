// Pieces shared by `ditune run`'s two paths: the CPU executor (cmd_run.cc) and the DiT engine
// on one device (cmd_run_engine.cc).
#ifndef DITUNE_CLI_RUN_COMMON_H_
#define DITUNE_CLI_RUN_COMMON_H_

#include <string>

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/workload.h"
#include "costmodels/measurement.h"
#include "costmodels/store.h"
#include "executor/engine_run.h"

namespace ditune::cli {

// The configuration --config SPEC or --plan FILE (the best of `ditune plan --json`) names; a plan
// made for another workload than `workload` is InvalidArgument.
StatusOr<ParallelConfig> ReadRunConfig(const cxxopts::ParseResult& args, const Workload& workload);

// The store's record of a measured DiT loop on `ranks` ranks (its slowest rank's median, p10
// and p90 over `iters` iterations), with `extra` added to its parameters.
Measurement DitMeasurement(const ModelSpec& model, const Workload& w, const ParallelConfig& config, int ranks,
                           const std::string& backend, const std::string& device, double median_s, double p10_s,
                           double p90_s, int iters, const std::string& run_id, nlohmann::json extra);

// The store's record of one run of ditune's engine: the plan it ran (workload, config,
// ranks, backend, device, and `comm` when it ran across ranks), its predicted DiT loop and the
// measured one with every rank's median (the one rank's when it ran alone).
RunRecord EngineRunRecord(const ModelSpec& model, const Workload& w, const ParallelConfig& config,
                          const std::string& backend, const std::string& device, const std::string& comm,
                          double predicted_s, const exec::EngineRunResult& r, const std::string& run_id);

// A run id no other run has: "run-<unix seconds>-<tag>-<process id>-<nanoseconds>" (runs
// end seconds apart or less, and the store keys runs by this id).
std::string NewRunId(const std::string& tag);

// `ditune run --backend cuda|ref` after parsing; returns the exit status.
int RunOnEngine(const cxxopts::ParseResult& args, const std::string& backend);

}  // namespace ditune::cli

#endif  // DITUNE_CLI_RUN_COMMON_H_
