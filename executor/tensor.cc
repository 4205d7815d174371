#include "executor/tensor.h"

#include <malloc.h>

#include <cmath>
#include <limits>
#include <random>

#include "executor/cpu_isa.h"

namespace ditune::exec {

Mat MatMul(const ConstMatRef& a, const ConstMatRef& b) {
  Mat c;
  MatMulInto(a, b, &c);
  return c;
}

Vec VecMul(const Vec& a, const ConstMatRef& b) {
  Vec c(b.cols());
  CpuGemmArgs g;
  g.a = a.data();
  g.lda = a.cols();
  g.b = b.data();
  g.ldb = b.outerStride();
  g.c = c.data();
  g.ldc = c.cols();
  g.m = 1;
  g.k = a.cols();
  g.n = b.cols();
  CpuKernels().gemm(g);
  return c;
}

void MatMulInto(const ConstMatRef& a, const ConstMatRef& b, Mat* c, bool accumulate) {
  if (!accumulate) c->resize(a.rows(), b.cols());
  CpuGemmArgs g;
  g.a = a.data();
  g.lda = a.outerStride();
  g.b = b.data();
  g.ldb = b.outerStride();
  g.c = c->data();
  g.ldc = c->cols();
  g.m = a.rows();
  g.k = a.cols();
  g.n = b.cols();
  g.accumulate = accumulate;
  CpuKernels().gemm(g);
}

Mat NormModulate(const Mat& x, const Vec& shift, const Vec& scale) {
  Mat y(x.rows(), x.cols());
  CpuKernels().norm_modulate(x.data(), x.cols(), y.data(), y.cols(), x.rows(), x.cols(), shift.data(), scale.data());
  return y;
}

Mat Gelu(const Mat& x) {
  Mat y(x.rows(), x.cols());
  CpuKernels().gelu(x.data(), y.data(), x.size());
  return y;
}

Vec Silu(const Vec& x) {
  return x.unaryExpr([](float v) { return v / (1.0f + std::exp(-v)); });
}

OnlineSoftmax::OnlineSoftmax(int64_t queries, int h, int d)
    : heads(h), head_dim(d), m(Mat::Constant(queries, h, -std::numeric_limits<float>::infinity())),
      l(Mat::Zero(queries, h)), acc(Mat::Zero(queries, static_cast<int64_t>(h) * d)) {}

void OnlineSoftmax::Add(const Mat& q, const Mat& k, const Mat& v, int64_t block_rows) {
  CpuAttentionArgs a;
  a.q = q.data();
  a.ldq = q.cols();
  a.k = k.data();
  a.ldk = k.cols();
  a.v = v.data();
  a.ldv = v.cols();
  a.queries = q.rows();
  a.keys = k.rows();
  a.heads = heads;
  a.head_dim = head_dim;
  a.m = m.data();
  a.l = l.data();
  a.acc = acc.data();
  a.ld_acc = acc.cols();
  a.key_block = block_rows;
  CpuKernels().attention(a);
}

Mat OnlineSoftmax::Finish() const {
  Mat out = acc;
  for (int64_t i = 0; i < out.rows(); ++i) {
    for (int h = 0; h < heads; ++h) {
      out.block(i, static_cast<int64_t>(h) * head_dim, 1, head_dim) /= l(i, h);
    }
  }
  return out;
}

Mat Attention(const Mat& q, const Mat& k, const Mat& v, int heads, int head_dim) {
  OnlineSoftmax s(q.rows(), heads, head_dim);
  s.Add(q, k, v);
  return s.Finish();
}

void TuneAllocator() {
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    return true;
  }();
  (void)done;
}

Mat RandomMat(int64_t rows, int64_t cols, float stddev, uint64_t seed, uint64_t stream) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + stream);
  std::normal_distribution<float> n(0.0f, stddev);
  Mat m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = n(rng);
  return m;
}

double MaxRelativeError(const Mat& a, const Mat& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace ditune::exec
