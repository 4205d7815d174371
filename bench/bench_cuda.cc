// GPU kernel throughput at DiT shapes (run on the GPU machine: tools/device/gpu_check.sh):
// bf16 GEMMs (cuBLASLt) and the fused attention, in TFLOP/s and as a share of the largest
// GEMM's rate (the bf16 peak measured on this device), timed with CUDA events after warm-up.
#include <cstdio>
#include <vector>

#include "executor/cuda/cuda_backend.h"
#include "executor/device.h"

using namespace ditune;
using namespace ditune::exec;

namespace {

template <typename F>
double TimeIt(Device* d, F&& f, int reps = 20) {
  for (int i = 0; i < 3; ++i) f();
  auto s = d->stream()->Record();
  for (int i = 0; i < reps; ++i) f();
  auto e = d->stream()->Record();
  return *(*e)->SecondsSince(**s) / reps;
}

}  // namespace

int main() {
  auto dev = cuda::NewCudaDevice(0);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
    return 2;
  }
  Device* d = dev->get();
  std::printf("device: %s\n", d->props().name.c_str());
  struct G {
    const char* what;
    long m, k, n;
  };
  const std::vector<G> gemms = {{"peak probe", 8192, 8192, 8192},       {"flux qkv 4608x3072x9216", 4608, 3072, 9216},
                                {"flux mlp 4608x3072x12288", 4608, 3072, 12288}, {"flux mlp-down 4608x12288x3072", 4608, 12288, 3072},
                                {"pixart qkv 8192x1152x3456", 8192, 1152, 3456}, {"sd3 1024x1536x6144", 4429, 1536, 6144}};
  double peak = 0;
  std::printf("%-34s %10s %10s %8s\n", "GEMM (m x k x n)", "ms", "TFLOP/s", "of peak");
  for (const auto& g : gemms) {
    auto a = d->Alloc(g.m * g.k * 2), b = d->Alloc(g.k * g.n * 2), c = d->Alloc(g.m * g.n * 2);
    if (!a.ok() || !b.ok() || !c.ok()) return 1;
    const double t = TimeIt(d, [&] { (void)cuda::Gemm(d, (*a)->data(), (*b)->data(), (*c)->data(), g.m, g.k, g.n); });
    const double tf = 2.0 * g.m * g.k * g.n / t / 1e12;
    if (peak == 0) peak = tf;
    std::printf("%-34s %10.3f %10.1f %7.0f%%\n", g.what, t * 1e3, tf, 100 * tf / peak);
  }
  struct A {
    long s;
    int heads, d;
  };
  std::printf("\n%-34s %10s %10s %8s\n", "attention (tokens, heads x dim)", "ms", "TFLOP/s", "of peak");
  for (const A& a : std::vector<A>{{4096, 24, 128}, {4608, 24, 128}, {16384, 16, 72}, {17776, 48, 64}}) {
    auto q = d->Alloc(a.s * a.heads * a.d * 2), k = d->Alloc(a.s * a.heads * a.d * 2), v = d->Alloc(a.s * a.heads * a.d * 2),
         o = d->Alloc(a.s * a.heads * a.d * 2);
    if (!q.ok() || !k.ok() || !v.ok() || !o.ok()) return 1;
    const double t = TimeIt(d, [&] {
      (void)cuda::Attention(d, (*q)->data(), (*k)->data(), (*v)->data(), (*o)->data(), a.s, a.s, a.heads, a.d);
    }, 5);
    const double tf = 4.0 * a.s * a.s * a.heads * a.d / t / 1e12;
    char label[64];
    std::snprintf(label, sizeof(label), "%ld, %d x %d", a.s, a.heads, a.d);
    std::printf("%-34s %10.3f %10.1f %7.0f%%\n", label, t * 1e3, tf, 100 * tf / peak);
  }
  return 0;
}
