// Planner speed: the full search (enumerate, prune by memory, simulate every candidate,
// rank) for Flux.1-dev 2048x2048, 28 steps, on 8, 64 and 1024 H100s (8 per node, NDR
// between nodes), single core. Goals: 50 ms, 0.5 s, 5 s.
#include <benchmark/benchmark.h>

#include "core/catalog.h"
#include "planner/plan.h"

namespace ditune {
namespace {

void BM_PlanFlux2048(benchmark::State& state) {
  static const Catalog catalog = *Catalog::Load(DITUNE_DATA_DIR);
  const int gpus = static_cast<int>(state.range(0));
  ClusterSpec spec{"h100-sxm5-80gb", gpus};
  if (gpus > 8) spec.inter_id = "ib-ndr";
  const Cluster cluster = *ResolveCluster(spec, catalog);
  const Workload w{"flux.1-dev", 2048, 2048, 1, 28, 1, OutputType::kDecoded};
  int enumerated = 0;
  for (auto _ : state) {
    auto plan = MakePlan(catalog, w, cluster, {});
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    enumerated = plan->enumerated;
    benchmark::DoNotOptimize(plan->ranked.front().result.total);
  }
  state.counters["configs"] = enumerated;
}
BENCHMARK(BM_PlanFlux2048)->Arg(8)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ditune

BENCHMARK_MAIN();
