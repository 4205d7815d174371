// What-if capacity planning: the best configuration and its latency across GPU types,
// counts, links, resolutions and frame counts; the smallest cluster that meets a latency
// objective; CSV and an SVG figure of latency and speedup against GPU count.
#ifndef DITUNE_PLANNER_WHATIF_H_
#define DITUNE_PLANNER_WHATIF_H_

#include <optional>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "store/store.h"
#include "planner/plan.h"

namespace ditune {

struct WhatIfQuery {
  Workload workload;                // the base workload
  std::vector<std::string> gpus;    // GPU ids
  std::vector<int> counts;          // GPU counts
  std::vector<std::string> intras;  // empty: each GPU's usual link
  std::vector<std::string> inters;  // empty: none on one node, ib-ndr across nodes
  std::vector<std::pair<int, int>> sizes;  // (height, width); empty: the workload's
  std::vector<int> frames;          // empty: the workload's
  PlanOptions plan;
};

struct WhatIfRow {
  std::string gpu, intra, inter;
  int gpus = 0, nodes = 0, height = 0, width = 0, frames = 1;
  bool feasible = false;
  std::string config;      // the best configuration's label
  double latency_s = 0;
  double speedup = 0;      // against one GPU of the same type (0 when one GPU does not fit)
  double gpu_seconds = 0;  // per image
  std::string note;        // why infeasible, or what was assumed
  bool inter_swept = false;  // the inter-node link was one the query compared
};

StatusOr<std::vector<WhatIfRow>> RunWhatIf(const Catalog& catalog, const WhatIfQuery& query,
                                           const std::vector<Fit>& fits);

struct SloAnswer {
  // Per GPU type (and link, size, frames): the smallest count that meets the objective.
  std::vector<WhatIfRow> smallest;
  // Across them: the fewest GPU-seconds per image among those that meet it.
  std::optional<WhatIfRow> cheapest;
};
SloAnswer MeetSlo(const std::vector<WhatIfRow>& rows, double slo_s);

std::string WhatIfCsv(const std::vector<WhatIfRow>& rows);
// Latency (log scale) and speedup against GPU count, a line per hardware (GPU, links, size),
// each point labelled with its best configuration.
std::string WhatIfSvg(const std::vector<WhatIfRow>& rows, const std::string& title);

}  // namespace ditune

#endif  // DITUNE_PLANNER_WHATIF_H_
