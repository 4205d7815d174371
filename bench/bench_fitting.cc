// Calibration fitting: FitPiecewiseLatency on one curve of many measurements (a GEMM or
// collective sweep ingested from many runs). Synthetic data: two regimes (5 us + x / 60 GB/s
// below 128 KiB, 25 us + x / 300 GB/s above), 1% Gaussian noise, 1% of the points slowed 3x.
// Counters: points fitted, and peak_rss_mib, the process's peak resident set after the runs
// (getrusage ru_maxrss; a high-water mark, so run one size per process, e.g.
// --benchmark_filter=BM_FitPiecewise/100000, to read the peak of that size alone).
#include <sys/resource.h>

#include <cmath>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "costmodels/fitting.h"

namespace ditune {
namespace {

std::vector<FitPoint> TwoRegimes(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> log2_size(10, 28);  // 1 KiB .. 256 MiB
  std::normal_distribution<double> noise(0.0, 0.01);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<FitPoint> pts;
  pts.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const double x = std::exp2(log2_size(rng));
    double t = x < 131072 ? 5e-6 + x / 60e9 : 25e-6 + x / 300e9;
    t *= 1 + noise(rng);
    if (u(rng) < 0.01) t *= 3;  // a disturbed run
    pts.push_back({x, t});
  }
  return pts;
}

double PeakRssMib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void BM_FitPiecewise(benchmark::State& state) {
  const std::vector<FitPoint> pts = TwoRegimes(static_cast<int>(state.range(0)), 7);
  for (auto _ : state) {
    auto fit = FitPiecewiseLatency(pts);
    if (!fit.ok()) {
      state.SkipWithError(fit.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(fit);
  }
  state.counters["points"] = static_cast<double>(pts.size());
  state.counters["peak_rss_mib"] = PeakRssMib();
}
BENCHMARK(BM_FitPiecewise)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ditune

BENCHMARK_MAIN();
