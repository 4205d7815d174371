// The cpu kernels' hot loops (cpu_kernels.h) on raw fp32 row-major buffers, one table per
// instruction set. cpu_kernels_isa.cc is compiled once per ISA (baseline x86-64, x86-64-v3, x86-64-v4),
// each copy in its own namespace with its own renamed copy of Eigen, so that no inline or
// template function built for one ISA can be merged by the linker into another's code.
// Nothing here includes Eigen: the table is the whole interface between the ISA objects and
// the rest of the executor. cpu_isa.h chooses the table at run time.
//
// Conventions: matrices are row-major float with a leading dimension `ld` (elements between
// the starts of consecutive rows, >= the columns used). Buffers must not overlap unless a
// call says so. Every kernel runs on the calling thread and is thread-safe.
#ifndef DITUNE_EXECUTOR_CPU_KERNELS_ISA_H_
#define DITUNE_EXECUTOR_CPU_KERNELS_ISA_H_

#include <cstdint>

namespace ditune::exec {

// C (m x n) = A (m x k) B (k x n), or C += A B with accumulate.
struct CpuGemmArgs {
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  int64_t m = 0, k = 0, n = 0;
  bool accumulate = false;
};

// One block of keys/values folded into the online-softmax state of `queries` query rows
// (see OnlineSoftmax in tensor.h): for each query row i and head h, with scores
// s_j = q_i,h . k_j,h / sqrt(head_dim) over the block's `keys` rows,
//   m' = max(m, max_j s_j),  l' = l e^(m - m') + sum_j e^(s_j - m'),
//   acc' = acc e^(m - m') + sum_j e^(s_j - m') v_j,h.
// m and l are queries x heads (ld = heads); acc is queries x heads*head_dim (ld_acc).
// Head h of a row occupies columns [h head_dim, (h+1) head_dim) of q, k, v and acc.
struct CpuAttentionArgs {
  const float* q = nullptr;
  int64_t ldq = 0;
  const float* k = nullptr;
  int64_t ldk = 0;
  const float* v = nullptr;
  int64_t ldv = 0;
  int64_t queries = 0, keys = 0;
  int heads = 0, head_dim = 0;
  float* m = nullptr;
  float* l = nullptr;
  float* acc = nullptr;
  int64_t ld_acc = 0;
  // Keys per block at most (the blocked kernel's key tile is the smaller of this and its own).
  int64_t key_block = 256;
};

struct CpuKernelTable {
  const char* isa;  // "baseline", "v3" or "v4"
  void (*gemm)(const CpuGemmArgs& args);
  // The blocked online-softmax kernel: query and key tiles sized for the caches.
  void (*attention)(const CpuAttentionArgs& args);
  // The original loop (all queries at once, one row at a time over each key block): kept as
  // the benchmark's "before" and a second opinion in tests. Same contract as `attention`.
  void (*attention_rowwise)(const CpuAttentionArgs& args);
  // y = LayerNorm(x) (no affine, eps 1e-6) * (1 + scale) + shift per row; shift and scale
  // hold `cols` floats. y may equal x.
  void (*norm_modulate)(const float* x, int64_t ldx, float* y, int64_t ldy, int64_t rows,
                        int64_t cols, const float* shift, const float* scale);
  // y = gelu_tanh(x) over `count` contiguous floats; y may equal x.
  void (*gelu)(const float* x, float* y, int64_t count);
  // Times `seconds` (of this thread's CPU time) of independent multiply-adds at this ISA's widest
  // vectors (FMA where the ISA has it) and returns the FLOP/s reached: the one-core peak GEMMs are
  // compared with.
  double (*peak_flops)(double seconds);
};

// The tables compiled into this binary; v3 and v4 exist only on x86-64 (cpu_isa.h says
// whether the CPU can run them — calling one it cannot is an illegal instruction).
namespace isa_baseline {
const CpuKernelTable& KernelTable();
}
namespace isa_v3 {
const CpuKernelTable& KernelTable();
}
namespace isa_v4 {
const CpuKernelTable& KernelTable();
}

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_CPU_KERNELS_ISA_H_
