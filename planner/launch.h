// The command that runs a configuration through a runtime's entry point for the model —
// xDiT's unified runner or an example script, Wan's generate.py, `sglang generate`, ... —
// with only the flags that entry point accepts (ModelSpec::runtimes says which).
#ifndef DITUNE_PLANNER_LAUNCH_H_
#define DITUNE_PLANNER_LAUNCH_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.h"
#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/workload.h"

namespace ditune {

// Options that change time or memory, printed when chosen and the entry point runs them for
// the model.
struct LaunchOptions {
  bool torch_compile = false;
  bool parallel_vae = false;
  // The runtime's eager mode where it compiles by default (eager=1).
  bool eager = false;
};

struct Launch {
  std::string runtime;              // the runtime's id
  std::string command;              // one shell line
  std::string parallel_flags;       // the parallel flags alone, in the entry point's names
  std::vector<std::string> appended;  // every word after the entry point's own command
  std::vector<std::string> notes;   // what the line cannot express (e.g. latent output)
  // The file the command reads, where the runtime takes one (RuntimeSupport::config_name):
  // write `config_text` to `config_name` beside the command.
  std::string config_name;
  std::string config_text;
};

// OK when `runtime` runs the model at all and this workload as asked (an entry point may fix
// the frame count); otherwise InvalidArgument naming why, with the source.
Status RuntimeRunsWorkload(const ModelSpec& model, std::string_view runtime, const Workload& workload);

// OK when `runtime` runs `config` for the model on `gpus` devices; otherwise InvalidArgument
// naming every rule it breaks, each with its source and the nearest launchable choices.
Status CheckRuntimeRuns(const ModelSpec& model, std::string_view runtime, const Workload& workload,
                        const ParallelConfig& config, int gpus);

// The launch line of `config` for `workload` on `cluster` through `runtime`'s entry point.
// Fails as CheckRuntimeRuns does.
StatusOr<Launch> MakeLaunch(const ModelSpec& model, std::string_view runtime, const Workload& workload,
                            const Cluster& cluster, const ParallelConfig& config, const LaunchOptions& options = {});

// How a person reads the launch: "launch with <runtime name>: <command>", its notes, and the
// config file to write beside it (indented), one item per line, newline-terminated.
std::string LaunchText(const Launch& launch, std::string_view runtime_name);

}  // namespace ditune

#endif  // DITUNE_PLANNER_LAUNCH_H_
