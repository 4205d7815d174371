// Pieces of `ditune run`: reading the configuration to run, the catalog GPU a run's device is,
// the report of a measured run (prediction, record, output: run_report.cc), and the kernel
// profile beside the model's price of each kernel (`--profile`).
#ifndef DITUNE_CLI_RUN_COMMON_H_
#define DITUNE_CLI_RUN_COMMON_H_

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "core/parallel_config.h"
#include "core/status.h"
#include "core/units.h"
#include "core/catalog.h"
#include "core/cluster.h"
#include "core/workload.h"
#include "store/store.h"
#include "executor/comm.h"
#include "executor/engine_run.h"
#include "executor/profiling_kernels.h"

namespace ditune::cli {

// The configuration --config SPEC or --plan FILE (the best of `ditune plan --json`) names; a plan
// made for another workload than `workload` is InvalidArgument.
StatusOr<ParallelConfig> ReadRunConfig(const cxxopts::ParseResult& args, const Workload& workload);

// The catalog GPU a run's device is: --gpu when given, else "cpu" for the kernels that run on
// the host, else the GPU's own name (`device_name`) mapped onto the catalog.
StatusOr<std::string> RunGpuId(const cxxopts::ParseResult& args, const Catalog& catalog, const std::string& backend,
                               const std::string& device_name);

// The cluster a run is predicted on: the CLUSTER flags (--gpus must be the plan's ranks), else
// the plan's ranks on `gpu_id`.
StatusOr<Cluster> RunCluster(const cxxopts::ParseResult& args, const Catalog& catalog, const std::string& gpu_id,
                             const ParallelConfig& config);

// What `ditune run` ran, for its report.
struct RunReport {
  const ModelSpec* model = nullptr;
  Workload workload;
  ParallelConfig config;
  std::string backend;        // the kernels: cpu, cuda or ref
  int rank = 0;               // the rank measured (--emulate-rank), else 0
  bool emulate = false;
  int ranks = 1;              // the plan's ranks
  exec::Comm* world = nullptr;  // the ranks' world when they exchanged for real
  std::string trace_path;     // --trace's file for this rank, or empty
  StatusOr<std::string> gpu_id = std::string();  // RunGpuId, or why there is none
};

// On rank 0 after the run: predicts the same run, records a whole run on the device it ran on
// (and a profiled run's kernels), and prints the report; returns the exit status.
int ReportRun(const cxxopts::ParseResult& args, const Catalog& catalog, const std::vector<Fit>& fits, Store* store,
              const RunReport& report, const exec::EngineRunResult& r);

struct ProfileLine {
  std::string kernel;
  int64_t calls = 0;
  double measured_s = 0, flops = 0, bytes = 0;
  std::optional<double> modelled_s;  // where the model prices this kernel
};

// The measured kernels with the model's price of each beside them, and the kernels the
// model prices that did not run (measured 0), in decreasing measured time.
std::vector<ProfileLine> ProfileRows(const std::vector<exec::KernelProfileRow>& measured,
                                     const std::map<std::string, Seconds>& modelled);

// The profile as a table: each kernel's calls, time, share, achieved rate and modelled time.
void PrintProfile(const std::vector<exec::KernelProfileRow>& measured, const std::map<std::string, Seconds>& modelled,
                  double loop_s, int rank, std::ostream& os);

}  // namespace ditune::cli

#endif  // DITUNE_CLI_RUN_COMMON_H_
