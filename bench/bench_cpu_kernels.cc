// The cpu kernels' hot loops per instruction set (executor/cpu_isa.h), one thread: GEMMs at
// DiT shapes and attention, each as GFLOP/s and as a fraction of the measured one-core peak
// (an FMA-throughput loop at the ISA's widest vectors); attention before (the row loop) and
// after (the tiled kernel); and a whole tiny-pixart 512² denoising step of the engine on the
// cpu kernels.
//
//   bench_cpu_kernels [--benchmark_filter=Gemm]
//
// Times are this thread's CPU time (the development host is shared: wall time would count
// other processes' turns). Counters: GFLOPS; of_peak = GFLOPS / the best ISA's peak (the
// machine's); of_isa_peak = GFLOPS / this ISA's own peak. The Peak rows print each ISA's peak.
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/catalog.h"
#include "executor/comm.h"
#include "executor/cpu_isa.h"
#include "executor/device.h"
#include "executor/engine.h"
#include "executor/kernels.h"
#include "executor/tensor.h"

namespace ditune::exec {
namespace {

// This thread's CPU time, seconds.
double ThreadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Each ISA's measured peak FLOP/s, once per process.
double PeakOf(CpuIsa isa) {
  static std::map<CpuIsa, double> peaks;
  auto it = peaks.find(isa);
  if (it != peaks.end()) return it->second;
  CpuKernelsFor(isa).peak_flops(0.05);  // warm the clocks up
  double best = 0;
  for (int i = 0; i < 3; ++i) best = std::max(best, CpuKernelsFor(isa).peak_flops(0.2));
  return peaks[isa] = best;
}

double MachinePeak() { return PeakOf(BestCpuIsa()); }

// Runs `body` (doing `flops` per call) under `state`, and sets the rate counters.
template <typename F>
void Measure(benchmark::State& state, CpuIsa isa, double flops, F&& body) {
  const double peak_isa = PeakOf(isa), peak = MachinePeak();
  double seconds = 0;
  int64_t calls = 0;
  for (auto _ : state) {
    const double t0 = ThreadSeconds();
    body();
    seconds += ThreadSeconds() - t0;
    ++calls;
  }
  const double rate = flops * static_cast<double>(calls) / seconds;
  state.counters["GFLOPS"] = rate / 1e9;
  state.counters["of_peak"] = rate / peak;
  state.counters["of_isa_peak"] = rate / peak_isa;
}

void BM_Peak(benchmark::State& state, CpuIsa isa) {
  for (auto _ : state) benchmark::DoNotOptimize(PeakOf(isa));
  state.counters["GFLOPS"] = PeakOf(isa) / 1e9;
  state.counters["of_peak"] = PeakOf(isa) / MachinePeak();
}

void BM_Gemm(benchmark::State& state, CpuIsa isa, int64_t m, int64_t k, int64_t n) {
  const CpuKernelTable& t = CpuKernelsFor(isa);
  const Mat a = RandomMat(m, k, 1.0f, 1, 1), b = RandomMat(k, n, 1.0f, 1, 2);
  Mat c(m, n);
  CpuGemmArgs g{a.data(), k, b.data(), n, c.data(), n, m, k, n, false};
  Measure(state, isa, 2.0 * m * k * n, [&] {
    t.gemm(g);
    benchmark::DoNotOptimize(c.data());
  });
}

// Attention of `tokens` queries over as many keys, `heads` x `d`; tiled or the row loop.
void BM_Attention(benchmark::State& state, CpuIsa isa, bool tiled, int64_t tokens, int heads,
                  int d) {
  const CpuKernelTable& t = CpuKernelsFor(isa);
  const int64_t w = static_cast<int64_t>(heads) * d;
  const Mat q = RandomMat(tokens, w, 1.0f, 2, 1), k = RandomMat(tokens, w, 1.0f, 2, 2),
            v = RandomMat(tokens, w, 1.0f, 2, 3);
  Measure(state, isa, 4.0 * tokens * tokens * w, [&] {
    OnlineSoftmax s(tokens, heads, d);
    CpuAttentionArgs a{q.data(), w, k.data(),   w,          v.data(),     w, tokens, tokens,
                       heads,    d, s.m.data(), s.l.data(), s.acc.data(), w, 256};
    (tiled ? t.attention : t.attention_rowwise)(a);
    benchmark::DoNotOptimize(s.acc.data());
  });
}

// One denoising step (both classifier-free-guidance branches) of `model` at `size`², serial.
void BM_DitStep(benchmark::State& state, CpuIsa isa, const char* model, int size) {
  if (!SetCpuIsa(isa).ok()) {
    state.SkipWithError("isa not usable");
    return;
  }
  auto catalog = Catalog::Load(DITUNE_DATA_DIR);
  auto device = CreateDevice("cpu");
  if (!catalog.ok() || !device.ok()) {
    state.SkipWithError("catalog or device");
    return;
  }
  auto kernels = CreateKernels("cpu", device->get());
  const ModelSpec& m = **catalog->Model(model);
  Workload w{model, size, size, 1, 1, 1, OutputType::kLatent};
  auto work = EngineWorkFor(m, w, ParallelConfig{}, 0);
  if (!kernels.ok() || !work.ok()) {
    state.SkipWithError("kernels or work");
    return;
  }
  auto runner = DitEngine::Create(m, w, *work, kernels->get(), EngineOptions{});
  if (!runner.ok()) {
    state.SkipWithError(runner.status().ToString().c_str());
    return;
  }
  for (auto _ : state) {
    auto r = (*runner)->Generate();
    benchmark::DoNotOptimize(r);
  }
  (void)SetCpuIsa(BestCpuIsa());
}

void Register() {
  struct Shape {
    const char* name;
    int64_t m, k, n;
  };
  // pixart-alpha at 1024² (4096 tokens, hidden 1152, MLP 4608) and tiny-pixart at 512²
  // (1024 tokens, hidden 64, MLP 256).
  const Shape gemms[] = {{"pixart_qkvo", 4096, 1152, 1152},
                         {"pixart_mlp_up", 4096, 1152, 4608},
                         {"pixart_mlp_down", 4096, 4608, 1152},
                         {"tiny_qkvo", 1024, 64, 64},
                         {"tiny_mlp_up", 1024, 64, 256}};
  for (CpuIsa isa : UsableCpuIsas()) {
    const std::string i(CpuIsaName(isa));
    benchmark::RegisterBenchmark(("Peak/" + i).c_str(), BM_Peak, isa)->Iterations(1);
    for (const Shape& s : gemms) {
      benchmark::RegisterBenchmark(("Gemm/" + i + "/" + s.name).c_str(), BM_Gemm, isa, s.m, s.k,
                                   s.n)
          ->Unit(benchmark::kMillisecond);
    }
    for (bool tiled : {false, true}) {
      const std::string loop = tiled ? "tiled" : "rowloop";
      benchmark::RegisterBenchmark(("Attention/" + i + "/" + loop + "/tiny_pixart_512").c_str(),
                                   BM_Attention, isa, tiled, 1024, 4, 16)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("Attention/" + i + "/" + loop + "/pixart_512").c_str(),
                                   BM_Attention, isa, tiled, 1024, 16, 72)
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(("DitStep/" + i + "/tiny_pixart_512").c_str(), BM_DitStep, isa,
                                 "tiny-pixart", 512)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace ditune::exec

int main(int argc, char** argv) {
  ditune::exec::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
