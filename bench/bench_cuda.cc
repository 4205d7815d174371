// GPU kernel throughput at DiT shapes (run on the GPU machine: tools/device/first_contact.sh):
// bf16 GEMMs (cuBLASLt), the fused attention and the tensor-core FlashAttention, in TFLOP/s
// and as a share of the largest GEMM's rate (the bf16 peak measured on this device), timed
// with CUDA events after warm-up on random inputs (never zeros, which run faster than data).
//   bench_cuda                 the table
//   bench_cuda --csv FILE      the table, and every row as CSV (bench/torch_kernels.py
//                              times PyTorch on the same shapes and prints the ratios)
//   bench_cuda --shapes        the shapes as that CSV's first columns; needs no GPU
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "executor/cuda/cuda_backend.h"
#include "executor/cuda/cuda_device_impl.h"
#include "executor/cuda/flash_attention.h"
#include "executor/device.h"
#include "executor/kernels.h"

using namespace ditune;
using namespace ditune::exec;

namespace {

// kind: gemm (m x k x n), attention (the fused kernel: q = kv = tokens, heads x head_dim, q,
// k, v in separate buffers), flash (FlashAttention reading q, k, v as column slices of one
// fused [tokens x 3H] buffer, as the engine lays them out).
struct Shape {
  const char* kind;
  const char* label;
  long m = 0, k = 0, n = 0;
  long tokens = 0;
  int heads = 0, head_dim = 0;
};

const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> s = {
      {"gemm", "peak probe", 8192, 8192, 8192},
      {"gemm", "flux qkv", 4608, 3072, 9216},
      {"gemm", "flux mlp", 4608, 3072, 12288},
      {"gemm", "flux mlp-down", 4608, 12288, 3072},
      {"gemm", "pixart qkv", 8192, 1152, 3456},
      {"gemm", "sd3", 4429, 1536, 6144},
      {"attention", "flux", 0, 0, 0, 4096, 24, 128},
      {"attention", "flux", 0, 0, 0, 4608, 24, 128},
      {"attention", "pixart 2k", 0, 0, 0, 16384, 16, 72},
      {"attention", "cogvideox", 0, 0, 0, 17776, 48, 64},
      // Head dim 128 from 4k to 64k tokens: the range of the goal against PyTorch's flash SDPA.
      {"flash", "flux", 0, 0, 0, 4096 + 512, 24, 128},
      {"flash", "pixart", 0, 0, 0, 4096, 16, 72},
      {"flash", "hunyuan", 0, 0, 0, 4096, 16, 88},
      {"flash", "sd3", 0, 0, 0, 4096 + 333, 24, 64},
      {"flash", "flux", 0, 0, 0, 16384 + 512, 24, 128},
      {"flash", "pixart", 0, 0, 0, 16384, 16, 72},
      {"flash", "video", 0, 0, 0, 32768, 24, 128},
      {"flash", "video", 0, 0, 0, 65536, 24, 128},
  };
  return s;
}

double Flops(const Shape& s) {
  if (std::strcmp(s.kind, "gemm") == 0) return 2.0 * s.m * s.k * s.n;
  return 4.0 * s.tokens * s.tokens * s.heads * s.head_dim;  // the two GEMMs of attention
}

template <typename F>
double TimeIt(Device* d, F&& f, int reps = 20) {
  for (int i = 0; i < 3; ++i) f();
  auto s = d->stream()->Record();
  for (int i = 0; i < reps; ++i) f();
  auto e = d->stream()->Record();
  return *(*e)->SecondsSince(**s) / reps;
}

void PrintShapeColumns(std::FILE* f, const Shape& s) {
  std::fprintf(f, "%s,%s,%ld,%ld,%ld,%ld,%d,%d", s.kind, s.label, s.m, s.k, s.n, s.tokens, s.heads, s.head_dim);
}

constexpr const char* kHeader = "kind,label,m,k,n,tokens,heads,head_dim";

// Random bf16 values in a buffer of `bytes`.
bool Random(Device* d, Buffer* b, uint64_t seed) {
  return cuda::FillRandom(d, b->data(), b->bytes() / 2, 1.0f, seed, 0).ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::string csv_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--shapes") == 0) {
      std::printf("%s\n", kHeader);
      for (const Shape& s : Shapes()) {
        PrintShapeColumns(stdout, s);
        std::printf("\n");
      }
      return 0;
    }
    if (std::strcmp(argv[i], "--csv") == 0 && i + 1 < argc) {
      csv_path = argv[++i];
      continue;
    }
    std::fprintf(stderr, "bench_cuda: unknown argument '%s' (valid: --shapes, --csv FILE)\n", argv[i]);
    return 2;
  }
  std::FILE* csv = nullptr;
  if (!csv_path.empty()) {
    csv = std::fopen(csv_path.c_str(), "w");
    if (csv == nullptr) {
      std::fprintf(stderr, "bench_cuda: cannot write %s\n", csv_path.c_str());
      return 2;
    }
    std::fprintf(csv, "%s,ms,tflops\n", kHeader);
  }
  auto dev = cuda::NewCudaDevice(0);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
    return 2;
  }
  Device* d = dev->get();
  auto cd = cuda::AsCuda(d);
  if (!cd.ok()) return 1;
  const cudaStream_t stream = (*cd)->raw_stream();
  std::printf("device: %s\n", d->props().name.c_str());
  std::printf("%-10s %-34s %10s %10s %8s\n", "kind", "shape", "ms", "TFLOP/s", "of peak");
  double peak = 0;
  uint64_t seed = 1;
  for (const Shape& s : Shapes()) {
    char label[96];
    double t = 0;
    if (std::strcmp(s.kind, "gemm") == 0) {
      std::snprintf(label, sizeof(label), "%s %ldx%ldx%ld", s.label, s.m, s.k, s.n);
      auto a = d->Alloc(s.m * s.k * 2), b = d->Alloc(s.k * s.n * 2), c = d->Alloc(s.m * s.n * 2);
      if (!a.ok() || !b.ok() || !c.ok() || !Random(d, a->get(), seed++) || !Random(d, b->get(), seed++)) return 1;
      t = TimeIt(d, [&] { (void)cuda::Gemm(d, (*a)->data(), (*b)->data(), (*c)->data(), s.m, s.k, s.n); });
    } else if (std::strcmp(s.kind, "attention") == 0) {
      std::snprintf(label, sizeof(label), "%s %ld, %d x %d", s.label, s.tokens, s.heads, s.head_dim);
      const long bytes = s.tokens * s.heads * s.head_dim * 2;
      auto q = d->Alloc(bytes), k = d->Alloc(bytes), v = d->Alloc(bytes), o = d->Alloc(bytes);
      if (!q.ok() || !k.ok() || !v.ok() || !o.ok() || !Random(d, q->get(), seed++) || !Random(d, k->get(), seed++) ||
          !Random(d, v->get(), seed++)) {
        return 1;
      }
      t = TimeIt(d, [&] {
        (void)cuda::Attention(d, (*q)->data(), (*k)->data(), (*v)->data(), (*o)->data(), s.tokens, s.tokens, s.heads,
                              s.head_dim);
      }, 5);
    } else {
      std::snprintf(label, sizeof(label), "%s %ld, %d x %d", s.label, s.tokens, s.heads, s.head_dim);
      const long h = static_cast<long>(s.heads) * s.head_dim;
      auto qkv = d->Alloc(s.tokens * 3 * h * 2), o = d->Alloc(s.tokens * h * 2);
      if (!qkv.ok() || !o.ok() || !Random(d, qkv->get(), seed++)) return 1;
      const auto* base = static_cast<const unsigned char*>((*qkv)->data());
      AttentionArgs a;
      a.q = base;
      a.k = base + h * 2;
      a.v = base + h * 4;
      a.o = (*o)->data();
      a.ldq = a.ldk = a.ldv = 3 * h;
      a.ldo = h;
      a.q_rows = a.kv_rows = s.tokens;
      a.heads = s.heads;
      a.head_dim = s.head_dim;
      if (const Status st = cuda::FlashAttention(a, stream); !st.ok()) {
        std::printf("%-10s %-34s %s\n", s.kind, label, st.ToString().c_str());
        continue;
      }
      t = TimeIt(d, [&] { (void)cuda::FlashAttention(a, stream); }, s.tokens > 20000 ? 3 : 10);
    }
    const double tf = Flops(s) / t / 1e12;
    if (peak == 0) peak = tf;  // the first row is the peak probe
    std::printf("%-10s %-34s %10.3f %10.1f %7.0f%%\n", s.kind, label, t * 1e3, tf, 100 * tf / peak);
    if (csv != nullptr) {
      PrintShapeColumns(csv, s);
      std::fprintf(csv, ",%.6f,%.3f\n", t * 1e3, tf);
    }
  }
  if (csv != nullptr && std::fclose(csv) != 0) {
    std::fprintf(stderr, "bench_cuda: writing %s failed\n", csv_path.c_str());
    return 1;
  }
  if (!d->stream()->Synchronize().ok()) return 1;
  return 0;
}
