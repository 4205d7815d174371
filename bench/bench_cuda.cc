// GPU kernel throughput at DiT shapes (run on the GPU machine: tools/device/gpu_check.sh):
// bf16 GEMMs (cuBLASLt) and the fused attention, in TFLOP/s and as a share of the largest
// GEMM's rate (the bf16 peak measured on this device), timed with CUDA events after warm-up.
#include <cstdio>
#include <vector>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_device_impl.h"
#include "executor/cuda/flash_attention.h"
#include "executor/device.h"
#include "executor/kernels.h"

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

  // The tensor-core FlashAttention at DiT shapes, reading q, k, v as column slices of one
  // fused [tokens x 3H] QKV buffer (ld 3H) the way the engine lays them out. FLOPs: the two
  // GEMMs, 4 q kv heads head_dim per sequence.
  auto cd = cuda::AsCuda(d);
  if (!cd.ok()) return 1;
  const cudaStream_t stream = (*cd)->raw_stream();
  struct F {
    const char* model;
    long tokens;
    int heads, d;
  };
  std::printf("\n%-34s %10s %10s %8s\n", "flash attn (model tokens, heads x dim)", "ms", "TFLOP/s", "of peak");
  for (const F& f : std::vector<F>{{"flux", 4096 + 512, 24, 128},
                                   {"pixart", 4096, 16, 72},
                                   {"hunyuan", 4096, 16, 88},
                                   {"sd3", 4096 + 333, 24, 64},
                                   {"flux", 16384 + 512, 24, 128},
                                   {"pixart", 16384, 16, 72}}) {
    const long h = static_cast<long>(f.heads) * f.d;
    auto qkv = d->Alloc(f.tokens * 3 * h * 2), o = d->Alloc(f.tokens * h * 2);
    if (!qkv.ok() || !o.ok()) return 1;
    if (!cuda::Zero(d, (*qkv)->data(), f.tokens * 3 * h * 2).ok()) return 1;
    const auto* base = static_cast<const unsigned char*>((*qkv)->data());
    AttentionArgs a;
    a.q = base;
    a.k = base + h * 2;
    a.v = base + h * 4;
    a.o = (*o)->data();
    a.ldq = a.ldk = a.ldv = 3 * h;
    a.ldo = h;
    a.q_rows = a.kv_rows = f.tokens;
    a.heads = f.heads;
    a.head_dim = f.d;
    char label[64];
    std::snprintf(label, sizeof(label), "%s %ld, %d x %d", f.model, f.tokens, f.heads, f.d);
    if (const Status st = cuda::FlashAttention(a, stream); !st.ok()) {
      std::printf("%-34s %s\n", label, st.ToString().c_str());
      continue;
    }
    const double t = TimeIt(d, [&] { (void)cuda::FlashAttention(a, stream); }, 10);
    const double tf = 4.0 * f.tokens * f.tokens * h / t / 1e12;
    std::printf("%-34s %10.3f %10.1f %7.0f%%\n", label, t * 1e3, tf, 100 * tf / peak);
  }
  if (!d->stream()->Synchronize().ok()) return 1;
  return 0;
}
