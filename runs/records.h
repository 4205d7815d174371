// What ditune's own runs leave in the calibration store: the measurement of a measured DiT
// loop (kind e2e, op "dit") and the record of the run (its plan, prediction, measured time and
// every rank's), under a run id no other run has.
#ifndef DITUNE_RUNS_RECORDS_H_
#define DITUNE_RUNS_RECORDS_H_

#include <string>

#include <nlohmann/json.hpp>

#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/workload.h"
#include "costmodels/measurement.h"
#include "store/store.h"
#include "executor/engine_run.h"

namespace ditune::calibration {

// "run-<unix seconds>-<tag>-<process id>-<nanoseconds>": runs end seconds apart or less, and
// the store keys runs by this id.
std::string NewRunId(const std::string& tag);

// A measured DiT loop on `ranks` ranks: its slowest rank's median, p10 and p90 over `iters`
// iterations (p10 <= median <= p90 enforced), with `extra` added to its parameters.
Measurement DitMeasurement(const ModelSpec& model, const Workload& w, const ParallelConfig& config, int ranks,
                           const std::string& backend, const std::string& device, double median_s, double p10_s,
                           double p90_s, int iters, const std::string& run_id, nlohmann::json extra);

// The record of one run of ditune's engine: the plan it ran (workload, config, ranks,
// backend, device, and `comm` when it ran across ranks), its predicted DiT loop and the
// measured one with every rank's median (the one rank's when it ran alone).
RunRecord EngineRunRecord(const ModelSpec& model, const Workload& w, const ParallelConfig& config,
                          const std::string& backend, const std::string& device, const std::string& comm,
                          double predicted_s, const exec::EngineRunResult& r, const std::string& run_id);

}  // namespace ditune::calibration

#endif  // DITUNE_RUNS_RECORDS_H_
