// Core throughput: config parsing and validation, the inner loop of the planner's
// enumeration.
#include <benchmark/benchmark.h>

#include "core/catalog.h"
#include "core/config_rules.h"

namespace ditune {
namespace {

void BM_ParseConfig(benchmark::State& state) {
  for (auto _ : state) {
    auto c = ParseParallelConfig("ulysses=2,ring=2,pipefusion=2,patches=4,cfg=2");
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_ParseConfig);

void BM_IsValidConfig(benchmark::State& state) {
  auto catalog = Catalog::Load(DITUNE_DATA_DIR);
  if (!catalog.ok()) {
    state.SkipWithError(catalog.status().ToString().c_str());
    return;
  }
  const ModelSpec& m = **catalog->Model("pixart-alpha");
  Workload w{"pixart-alpha", 2048, 2048, 1, 20, 1, OutputType::kDecoded};
  ValidationContext ctx{&m, *ComputeTokenGeometry(m, w), 20, 1, 16};
  ParallelConfig c;
  c.ulysses = 2;
  c.ring = 2;
  c.pipefusion = 2;
  c.patches = 4;
  c.cfg = 2;
  for (auto _ : state) benchmark::DoNotOptimize(IsValidConfig(ctx, c));
}
BENCHMARK(BM_IsValidConfig);

}  // namespace
}  // namespace ditune

BENCHMARK_MAIN();
