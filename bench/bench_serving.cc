// Serving simulation speed on 64 H100s (8 per node, NDR between nodes), single core:
//  - one hour of Poisson requests at 10 per second (about 36,000; PixArt-alpha 1024x1024) on
//    32 replicas of ulysses=2: pricing, queueing and the summary. Goal: under 1 s.
//  - the --slo search (p99 within 3 s, 10 requests per second, a 3:1 mix of 1024x1024 and
//    2048x2048, size-aware routing) over layouts of up to 64 GPUs, and the highest rate the
//    answer sustains. Goal: under 10 s.
#include <benchmark/benchmark.h>

#include "core/catalog.h"
#include "serving/serve.h"

namespace ditune::serving {
namespace {

ServeQuery Query(double slo_s) {
  static const Catalog catalog = *Catalog::Load(DITUNE_DATA_DIR);
  static const std::vector<Fit> fits;
  ServeQuery q;
  q.pricing.catalog = &catalog;
  q.pricing.fits = &fits;
  q.pricing.cluster = *ResolveCluster({"h100-sxm5-80gb", 64, 8, 8, "", "ib-ndr"}, catalog);
  q.pricing.base = Workload{"pixart-alpha", 1024, 1024, 1, 20, 1, OutputType::kDecoded};
  q.source.rate_rps = 10;
  q.source.duration = Seconds(3600);
  q.source.seed = 1;
  q.source.mix = {{ShapeOf(q.pricing.base), 1}};
  if (slo_s > 0) {
    q.slo = Seconds(slo_s);
    q.source.mix = *ParseMix("1024x1024:3,2048x2048:1", ShapeOf(q.pricing.base));
    q.queue.policy = Policy::kSizeAware;
  }
  return q;
}

void BM_ServeOneHourAt10PerSecond(benchmark::State& state) {
  const ServeQuery q = Query(0);
  const Layout layout = *ParseLayout("32x(ulysses=2)");
  int requests = 0;
  for (auto _ : state) {
    auto e = ServeLayout(q, layout);
    if (!e.ok()) {
      state.SkipWithError(e.status().ToString().c_str());
      return;
    }
    requests = e->summary.requests;
    benchmark::DoNotOptimize(e->summary.p99);
  }
  state.counters["requests"] = requests;
}
BENCHMARK(BM_ServeOneHourAt10PerSecond)->Unit(benchmark::kMillisecond);

void BM_SloSearch64Gpus(benchmark::State& state) {
  const ServeQuery q = Query(3.0);
  int layouts = 0, gpus = 0;
  for (auto _ : state) {
    auto a = SearchLayouts(q);
    if (!a.ok() || !a->best) {
      state.SkipWithError(a.ok() ? a->why_none.c_str() : a.status().ToString().c_str());
      return;
    }
    layouts = a->layouts;
    gpus = a->best->gpus;
  }
  state.counters["layouts"] = layouts;
  state.counters["answer_gpus"] = gpus;
}
BENCHMARK(BM_SloSearch64Gpus)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace ditune::serving

BENCHMARK_MAIN();
