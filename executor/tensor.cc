#include "executor/tensor.h"

#include <malloc.h>

#include <cmath>
#include <limits>
#include <random>

namespace ditune::exec {

Mat NormModulate(const Mat& x, const Vec& shift, const Vec& scale) {
  Mat y(x.rows(), x.cols());
  const float eps = 1e-6f;
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const float mean = x.row(i).mean();
    const float var = (x.row(i).array() - mean).square().mean();
    const float inv = 1.0f / std::sqrt(var + eps);
    y.row(i) = ((x.row(i).array() - mean) * inv * (1.0f + scale.array()) + shift.array()).matrix();
  }
  return y;
}

Mat Gelu(const Mat& x) {
  // Eigen's packet tanh: a scalar std::tanh per element would make the activation, not the
  // GEMMs, the cost of the MLP.
  const float c = std::sqrt(2.0f / static_cast<float>(M_PI));
  const auto a = x.array();
  return (0.5f * a * (1.0f + (c * (a + 0.044715f * a.cube())).tanh())).matrix();
}

Vec Silu(const Vec& x) {
  return x.unaryExpr([](float v) { return v / (1.0f + std::exp(-v)); });
}

OnlineSoftmax::OnlineSoftmax(int64_t queries, int h, int d)
    : heads(h), head_dim(d), m(Mat::Constant(queries, h, -std::numeric_limits<float>::infinity())),
      l(Mat::Zero(queries, h)), acc(Mat::Zero(queries, static_cast<int64_t>(h) * d)) {}

void OnlineSoftmax::Add(const Mat& q, const Mat& k, const Mat& v, int64_t block_rows) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  Mat work(q.rows(), std::min(block_rows, k.rows()));  // one workspace for every block
  for (int64_t start = 0; start < k.rows(); start += block_rows) {
    const int64_t n = std::min(block_rows, k.rows() - start);
    for (int h = 0; h < heads; ++h) {
      const auto qh = q.middleCols(static_cast<int64_t>(h) * head_dim, head_dim);
      const auto kh = k.block(start, static_cast<int64_t>(h) * head_dim, n, head_dim);
      const auto vh = v.block(start, static_cast<int64_t>(h) * head_dim, n, head_dim);
      auto s = work.leftCols(n);  // queries x n
      s.noalias() = qh * kh.transpose();
      s *= scale;
      for (int64_t i = 0; i < s.rows(); ++i) {
        const float block_max = s.row(i).maxCoeff();
        const float new_max = std::max(m(i, h), block_max);
        const float correction = std::isinf(m(i, h)) ? 0.0f : std::exp(m(i, h) - new_max);
        s.row(i) = (s.row(i).array() - new_max).exp().matrix();
        l(i, h) = l(i, h) * correction + s.row(i).sum();
        acc.block(i, static_cast<int64_t>(h) * head_dim, 1, head_dim) *= correction;
        m(i, h) = new_max;
      }
      acc.middleCols(static_cast<int64_t>(h) * head_dim, head_dim).noalias() += s * vh;
    }
  }
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
