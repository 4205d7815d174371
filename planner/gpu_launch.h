// Automatic configuration at launch: detect the GPUs, map them to the catalog, and build
// the command line that runs the chosen configuration.
#ifndef DITUNE_PLANNER_GPU_LAUNCH_H_
#define DITUNE_PLANNER_GPU_LAUNCH_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/cluster.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/topology.h"
#include "core/workload.h"
#include "planner/launch.h"

namespace ditune {

// Runs a shell command and returns its standard output; NotFound when the program is not
// there. Injected so that detection can be tested without GPUs.
using CommandRunner = std::function<StatusOr<std::string>(const std::string& command)>;
CommandRunner SystemCommandRunner();

struct DetectedGpus {
  int count = 0;
  std::string name;       // as the driver reports it
  double memory_gb = 0;
  bool nvlink = false;    // every pair joined by NVLink (nvidia-smi topo -m)
  bool two_sockets = false;  // some pairs only through the CPU interconnect (SYS)
  std::string gpu_id;     // catalog id, empty when unknown
  std::string intra_id;   // catalog link id
  // The whole `nvidia-smi topo -m` matrix where it parsed (--topology's input), else null.
  std::shared_ptr<const MachineTopology> topology;
};

// Asks nvidia-smi for the GPUs and their topology. InvalidArgument, saying so plainly and
// how to go on (--gpu ID --gpus N), when there are none or nvidia-smi is missing. An unknown model
// leaves gpu_id empty: the caller asks for --gpu.
StatusOr<DetectedGpus> DetectGpus(const Catalog& catalog, const CommandRunner& run);

// The catalog id for a driver-reported name: an exact device name first, else the longest
// device name contained in it ("NVIDIA H200" is not taken for an "NVIDIA H20").
StatusOr<std::string> MapGpuName(const std::string& name, const Catalog& catalog);

// COMMAND ARGS... with the plan's parallel flags appended, in the names the model's xDiT
// entry point takes (`launch` from MakeLaunch).
StatusOr<std::vector<std::string>> WithParallelFlags(const std::vector<std::string>& command, const Launch& launch);

// `mpirun -np N ditune run [--backend cuda] --config SPEC WORKLOAD` for ditune's own executor:
// the DiT engine on the cuda kernels for GPUs, on the cpu kernels for the CPU "GPU".
std::vector<std::string> DituneRunCommand(const std::string& ditune_binary, const Workload& workload,
                                          const ParallelConfig& config, const Cluster& cluster);

// A command line a shell reads back as the same words.
std::string ShellJoin(const std::vector<std::string>& words);

}  // namespace ditune

#endif  // DITUNE_PLANNER_GPU_LAUNCH_H_
