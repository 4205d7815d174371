// The command that runs a configuration through the model's own xDiT entry point — the
// unified runner, an example script, or the model's launcher — with only the flags that
// entry point accepts (the model file's "xdit" section says which).
#ifndef DITUNE_PLANNER_XDIT_LAUNCH_H_
#define DITUNE_PLANNER_XDIT_LAUNCH_H_

#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/model_spec.h"
#include "core/parallel_config.h"
#include "core/status.h"
#include "core/workload.h"

namespace ditune {

// Runner options that change time or memory, printed when chosen and the entry point runs
// them for the model.
struct XditRunOptions {
  bool torch_compile = false;
  bool parallel_vae = false;
};

struct XditLaunch {
  std::string command;              // one shell line
  std::string parallel_flags;       // the parallel flags alone, in the entry point's names
  std::vector<std::string> appended;  // every word after the entry point's own command
  std::vector<std::string> notes;   // what the line cannot express (e.g. latent output)
};

// OK when xDiT runs the model at all and this workload as asked (an entry point may fix the
// frame count); otherwise InvalidArgument naming why, with the source.
Status XditRunsWorkload(const ModelSpec& model, const Workload& workload);

// OK when xDiT runs `config` for the model on `gpus` devices; otherwise InvalidArgument
// naming every rule it breaks, each with its source and the nearest launchable choices.
Status CheckXditRuns(const ModelSpec& model, const Workload& workload, const ParallelConfig& config, int gpus);

// The launch line of `config` for `workload` on `cluster`. Fails as CheckXditRuns does.
StatusOr<XditLaunch> MakeXditLaunch(const ModelSpec& model, const Workload& workload, const Cluster& cluster,
                                    const ParallelConfig& config, const XditRunOptions& options = {});

}  // namespace ditune

#endif  // DITUNE_PLANNER_XDIT_LAUNCH_H_
