// Host tensors and their kernels: fp32, row-major (tokens x features), Eigen — the ref
// kernels' math, the engine's host-side inputs, and tests. The products, attention, norm and
// activation run on the kernels built for this CPU's instruction set (cpu_isa.h); the rest is
// Eigen built for the baseline.
#ifndef DITUNE_EXECUTOR_TENSOR_H_
#define DITUNE_EXECUTOR_TENSOR_H_

#include <cstdint>

#include <Eigen/Dense>

namespace ditune::exec {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::Matrix<float, 1, Eigen::Dynamic>;

// Row or column blocks of a Mat bind without a copy (any leading dimension).
using ConstMatRef = Eigen::Ref<const Mat>;

// a b.
Mat MatMul(const ConstMatRef& a, const ConstMatRef& b);
// The row vector a b.
Vec VecMul(const Vec& a, const ConstMatRef& b);
// *c = a b, or *c += a b with accumulate (then *c must already be a.rows() x b.cols()).
// *c must not alias a or b.
void MatMulInto(const ConstMatRef& a, const ConstMatRef& b, Mat* c, bool accumulate = false);

// LayerNorm over features (no affine), then x * (1 + scale) + shift (adaLN modulation).
Mat NormModulate(const Mat& x, const Vec& shift, const Vec& scale);
// tanh-approximated GELU, elementwise.
Mat Gelu(const Mat& x);
// SiLU, elementwise.
Vec Silu(const Vec& x);

// Running state of blockwise attention with an online softmax: for each query row and
// head, the maximum logit, the sum of exponentials and the unnormalised output. Keys and
// values arrive in blocks (a Ring pass, a stale buffer); the S x S matrix never exists.
struct OnlineSoftmax {
  int heads = 0;
  int head_dim = 0;
  Mat m;    // queries x heads: running max
  Mat l;    // queries x heads: running sum of exp
  Mat acc;  // queries x (heads * head_dim): running weighted sum of values

  OnlineSoftmax(int64_t queries, int h, int d);
  // Folds one block of keys/values (kv x heads*head_dim) into the state for queries `q`.
  // `block_rows` bounds the working set: keys are consumed in tiles of at most that many
  // rows (and at most the kernel's own tile, cpu_kernels_isa.cc).
  void Add(const Mat& q, const Mat& k, const Mat& v, int64_t block_rows = 256);
  // The attention output (queries x heads*head_dim).
  Mat Finish() const;
};

// Softmax attention of q over (k, v) for `heads` heads of width head_dim, blockwise.
Mat Attention(const Mat& q, const Mat& k, const Mat& v, int heads, int head_dim);

// Keeps freed blocks in the process heap instead of returning each large temporary to the
// kernel (glibc's default maps and unmaps every block over 128 KB, so every attention block
// would page-fault afresh). Called by the runner and the microbenchmarks alike, so that
// calibration sees the allocator the runs see. Idempotent.
void TuneAllocator();

// Deterministic pseudo-random matrix, N(0, stddev^2), from (seed, stream): the same on every
// rank and every run.
Mat RandomMat(int64_t rows, int64_t cols, float stddev, uint64_t seed, uint64_t stream);

// Max-norm relative error max_i |a_i - b_i| / max_i |b_i|: for checking a parallel result
// against the serial one (elementwise ratios would divide rounding noise by values that
// happen to be near zero).
double MaxRelativeError(const Mat& a, const Mat& b);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_TENSOR_H_
