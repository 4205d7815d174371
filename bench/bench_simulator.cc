// Simulation speed: one prediction of Flux.1-dev 2048x2048, 28 steps, on 8 H100s, per
// configuration (the planner runs one per candidate).
#include <benchmark/benchmark.h>

#include "core/catalog.h"
#include "simulator/simulate.h"

namespace ditune {
namespace {

const char* const kConfigs[] = {"",
                                "ulysses=8",
                                "ring=8",
                                "ulysses=2,ring=4",
                                "pipefusion=8,patches=16",
                                "ulysses=2,pipefusion=4,patches=8",
                                "tp=8",
                                "tp=2,ulysses=4",
                                "distrifusion=8",
                                "dp=2,ulysses=4"};

void BM_SimulateFlux2048On8(benchmark::State& state) {
  static const Catalog catalog = *Catalog::Load(DITUNE_DATA_DIR);
  const char* spec = kConfigs[state.range(0)];
  const bool single = spec[0] == '\0';
  const Cluster cluster = *ResolveCluster({"h100-sxm5-80gb", single ? 1 : 8}, catalog);
  const ComputeModel compute = ComputeModel::Defaults(*cluster.gpu);
  const CommModel comm(cluster);
  SimInput in{*catalog.Model("flux.1-dev"),
              {"flux.1-dev", 2048, 2048, 1, 28, single ? 1 : 2, OutputType::kDecoded},
              &cluster,
              *ParseParallelConfig(spec),
              &compute,
              &comm};
  int tasks = 0, steps = 0;
  for (auto _ : state) {
    auto r = Simulate(in);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    tasks = r->tasks;
    steps = r->simulated_steps;
    benchmark::DoNotOptimize(r->total);
  }
  state.SetLabel(single ? "1 device" : spec);
  state.counters["tasks"] = tasks;
  state.counters["steps_simulated"] = steps;
}
BENCHMARK(BM_SimulateFlux2048On8)->DenseRange(0, 9)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ditune

BENCHMARK_MAIN();
