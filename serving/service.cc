#include "serving/service.h"

#include <map>

#include <fmt/format.h>

#include "serving/layout.h"

namespace ditune::serving {

StatusOr<ServiceTable> PriceServiceTimes(const PricingContext& ctx, const std::vector<RequestShape>& shapes,
                                         const std::vector<ParallelConfig>& types, int max_batch) {
  ServiceTable table(static_cast<int>(shapes.size()), static_cast<int>(types.size()), max_batch);
  // Types by GPU count: one replica cluster and one pricing pass per count.
  std::map<int, std::vector<int>> by_gpus;
  for (int t = 0; t < static_cast<int>(types.size()); ++t) by_gpus[types[t].world_size()].push_back(t);
  for (const auto& [gpus, members] : by_gpus) {
    DITUNE_ASSIGN_OR_RETURN(Cluster replica, ResolveCluster(ReplicaClusterSpec(ctx.cluster, gpus), *ctx.catalog));
    std::vector<ParallelConfig> configs;
    for (int t : members) configs.push_back(types[t]);
    for (int s = 0; s < static_cast<int>(shapes.size()); ++s) {
      for (int batch = 1; batch <= max_batch; ++batch) {
        Workload w = WorkloadOf(shapes[s], ctx.base);
        w.batch = batch;
        DITUNE_ASSIGN_OR_RETURN(auto priced, PriceConfigs(*ctx.catalog, w, replica, *ctx.fits, ctx.plan, configs));
        for (size_t i = 0; i < members.size(); ++i) {
          const int t = members[i];
          if (batch > 1 && table.MaxBatch(s, t) < batch - 1) continue;
          if (!priced[i].ok()) {
            if (batch == 1) table.Refuse(s, t, fmt::format("{}: {}", Label(types[t]), priced[i].status().message()));
            continue;
          }
          const SimResult& r = priced[i]->result;
          if (!r.fits) {
            if (batch == 1) {
              table.Refuse(s, t, fmt::format("{}: needs {:.1f} GB per GPU of {:.0f} GB", Label(types[t]),
                                             r.peak_memory.value() / 1e9, replica.gpu->memory.value() / 1e9));
            }
            continue;
          }
          table.Set(s, t, batch, r.total);
        }
      }
    }
  }
  return table;
}

}  // namespace ditune::serving
