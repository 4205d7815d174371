#include "executor/dit.h"

#include <chrono>
#include <cmath>

#include <fmt/format.h>

namespace ditune::exec {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the seconds since `start` to `*slot` when timers are kept.
class Scoped {
 public:
  explicit Scoped(double* slot) : slot_(slot), start_(Clock::now()) {}
  ~Scoped() {
    if (slot_ != nullptr) *slot_ += std::chrono::duration<double>(Clock::now() - start_).count();
  }

 private:
  double* slot_;
  Clock::time_point start_;
};

double* Slot(OpTimers* t, double OpTimers::*field) { return t == nullptr ? nullptr : &(t->*field); }

Mat Cols(const Mat& m, int64_t start, int64_t n) { return m.middleCols(start, n); }
Mat Rows(const Mat& m, int64_t start, int64_t n) { return m.middleRows(start, n); }

// A stable stream id per (block, weight name).
uint64_t StreamOf(int block, const std::string& name) {
  uint64_t h = 1469598103934665603ULL ^ static_cast<uint64_t>(block + 1);
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

Vec Chunk(const Vec& v, int i, int64_t width) { return v.segment(static_cast<int64_t>(i) * width, width); }

void AddGated(Mat* x, const Vec& gate, const Mat& y) { x->array() += y.array().rowwise() * gate.array(); }

}  // namespace

DitModel::DitModel(const ModelSpec& spec, uint64_t seed, int first_block, int blocks, int tp, int tp_rank)
    : spec_(spec), first_block_(first_block), tp_(tp), tp_rank_(tp_rank) {
  const int64_t H = spec.hidden, M = spec.mlp_hidden, Ht = spec.text_stream_hidden;
  const int64_t Mt = M * Ht / H;
  const int64_t hs = H / tp, ms = M / tp, mts = Mt / tp;  // this rank's slices
  const int64_t lat = latent_width();
  auto full = [&](int block, const std::string& name, int64_t rows, int64_t cols) {
    return RandomMat(rows, cols, 1.0f / std::sqrt(static_cast<float>(rows)), seed, StreamOf(block, name));
  };
  auto small = [&](int block, const std::string& name, int64_t rows, int64_t cols) {
    return RandomMat(rows, cols, 0.1f / std::sqrt(static_cast<float>(rows)), seed, StreamOf(block, name));
  };
  auto cols = [&](const Mat& m, int64_t width) { return Cols(m, tp_rank * width, width); };
  auto rows = [&](const Mat& m, int64_t width) { return Rows(m, tp_rank * width, width); };
  for (int b = first_block; b < first_block + blocks; ++b) {
    BlockWeights bw;
    bw.family = spec.family_of(b);
    auto& w = bw.w;
    switch (bw.family) {
      case BlockFamily::kCross:
        w["mod"] = small(b, "mod", H, 6 * H);
        for (const char* n : {"wq", "wk", "wv", "xq", "xk", "xv"}) w[n] = cols(full(b, n, H, H), hs);
        w["wo"] = rows(full(b, "wo", H, H), hs);
        w["xo"] = rows(full(b, "xo", H, H), hs);
        w["w1"] = cols(full(b, "w1", H, M), ms);
        w["w2"] = rows(full(b, "w2", M, H), ms);
        break;
      case BlockFamily::kJoint:
        w["mod"] = small(b, "mod", H, 6 * H);
        w["tmod"] = small(b, "tmod", H, 6 * Ht);
        for (const char* n : {"wq", "wk", "wv"}) w[n] = cols(full(b, n, H, H), hs);
        for (const char* n : {"tq", "tk", "tv"}) w[n] = cols(full(b, n, Ht, H), hs);
        w["wo"] = rows(full(b, "wo", H, H), hs);
        w["to"] = rows(full(b, "to", H, Ht), hs);
        w["w1"] = cols(full(b, "w1", H, M), ms);
        w["w2"] = rows(full(b, "w2", M, H), ms);
        w["t1"] = cols(full(b, "t1", Ht, Mt), mts);
        w["t2"] = rows(full(b, "t2", Mt, Ht), mts);
        break;
      case BlockFamily::kSingle:
        w["mod"] = small(b, "mod", H, 3 * H);
        for (const char* n : {"wq", "wk", "wv"}) w[n] = cols(full(b, n, H, H), hs);
        w["w1"] = cols(full(b, "w1", H, M), ms);
        w["oa"] = rows(full(b, "oa", H, H), hs);
        w["om"] = rows(full(b, "om", M, H), ms);
        break;
      case BlockFamily::kSpatial:
      case BlockFamily::kTemporal:
        break;  // ExecutorRunsModel refuses these models before weights are made
    }
    blocks_.push_back(std::move(bw));
  }
  io_["t1"] = full(-1, "t1", 256, H);
  io_["t2"] = full(-1, "t2", H, H);
  io_["text"] = full(-1, "text", spec.text_hidden, Ht);
  io_["patch"] = full(-1, "patch", lat, H);
  io_["fmod"] = small(-1, "fmod", H, 2 * H);
  io_["out"] = full(-1, "out", H, lat);
}

int64_t DitModel::WeightBytes() const {
  int64_t n = 0;
  for (const auto& b : blocks_) {
    for (const auto& [k, m] : b.w) n += m.size();
  }
  for (const auto& [k, m] : io_) n += m.size();
  return n * static_cast<int64_t>(sizeof(float));
}

Vec DitModel::Conditioning(float t, OpTimers* timers) const {
  Scoped s(Slot(timers, &OpTimers::gemm));
  Vec e(256);
  for (int i = 0; i < 128; ++i) {
    const float f = std::exp(-std::log(10000.0f) * static_cast<float>(i) / 128.0f);
    e[i] = std::cos(t * f);
    e[128 + i] = std::sin(t * f);
  }
  Vec h = Silu(VecMul(e, io_.at("t1")));
  return Silu(VecMul(h, io_.at("t2")));
}

Mat DitModel::ProjectText(const Mat& text, OpTimers* timers) const {
  Scoped s(Slot(timers, &OpTimers::gemm));
  return MatMul(text, io_.at("text"));
}

Mat DitModel::Embed(const Mat& latent_rows, OpTimers* timers) const {
  Scoped s(Slot(timers, &OpTimers::gemm));
  return MatMul(latent_rows, io_.at("patch"));
}

Mat DitModel::Final(const Mat& x, const Vec& c, OpTimers* timers) const {
  Scoped s(Slot(timers, &OpTimers::gemm));
  const int64_t H = spec_.hidden;
  Vec m = VecMul(c, io_.at("fmod"));
  return MatMul(NormModulate(x, Chunk(m, 0, H), Chunk(m, 1, H)), io_.at("out"));
}

Status DitModel::Block(int index, const Vec& c, Mat* x, Mat* ctx, const ParallelHooks& hooks, OpTimers* timers) const {
  if (index < 0 || index >= num_blocks()) return Status::Internal(fmt::format("block {} not on this rank", index));
  const BlockWeights& bw = blocks_[index];
  const auto& w = bw.w;
  const int64_t H = spec_.hidden, Ht = spec_.text_stream_hidden;
  const int hl = heads_local();
  auto attend = [&](const Mat& q, const Mat& k, const Mat& v, int64_t text_rows) -> StatusOr<Mat> {
    Scoped s(Slot(timers, &OpTimers::attention));
    if (hooks.attention) return hooks.attention(q, k, v, text_rows);
    return Attention(q, k, v, hl, spec_.head_dim);
  };
  auto reduce = [&](Mat* m) -> Status {
    if (!hooks.tp_reduce) return Status::Ok();
    Scoped s(Slot(timers, &OpTimers::comm));
    return hooks.tp_reduce(m);
  };
  switch (bw.family) {
    case BlockFamily::kCross: {
      const Vec m = VecMul(c, w.at("mod"));
      Mat q, k, v;
      SelfQkv(bw, m, *x, &q, &k, &v, timers);
      DITUNE_ASSIGN_OR_RETURN(Mat o, attend(q, k, v, 0));
      Mat y = MatMul(o, w.at("wo"));
      DITUNE_RETURN_IF_ERROR(reduce(&y));
      AddGated(x, Chunk(m, 2, H), y);
      return CrossTail(bw, m, x, *ctx, reduce, timers);
    }
    case BlockFamily::kJoint: {
      const Vec m = VecMul(c, w.at("mod"));
      const Vec mt = VecMul(c, w.at("tmod"));
      const int64_t T = ctx->rows(), n = x->rows();
      Mat q(T + n, H / tp_), k(T + n, H / tp_), v(T + n, H / tp_);
      {
        Scoped s(Slot(timers, &OpTimers::gemm));
        const Mat hi = NormModulate(*x, Chunk(m, 0, H), Chunk(m, 1, H));
        const Mat ht = NormModulate(*ctx, Chunk(mt, 0, Ht), Chunk(mt, 1, Ht));
        q << MatMul(ht, w.at("tq")), MatMul(hi, w.at("wq"));
        k << MatMul(ht, w.at("tk")), MatMul(hi, w.at("wk"));
        v << MatMul(ht, w.at("tv")), MatMul(hi, w.at("wv"));
      }
      DITUNE_ASSIGN_OR_RETURN(Mat o, attend(q, k, v, T));
      Mat yi = MatMul(o.bottomRows(n), w.at("wo"));
      Mat yt = MatMul(o.topRows(T), w.at("to"));
      DITUNE_RETURN_IF_ERROR(reduce(&yi));
      DITUNE_RETURN_IF_ERROR(reduce(&yt));
      AddGated(x, Chunk(m, 2, H), yi);
      AddGated(ctx, Chunk(mt, 2, Ht), yt);
      Mat fi, ft;
      {
        Scoped s(Slot(timers, &OpTimers::gemm));
        fi = MatMul(Gelu(MatMul(NormModulate(*x, Chunk(m, 3, H), Chunk(m, 4, H)), w.at("w1"))), w.at("w2"));
        ft = MatMul(Gelu(MatMul(NormModulate(*ctx, Chunk(mt, 3, Ht), Chunk(mt, 4, Ht)), w.at("t1"))), w.at("t2"));
      }
      DITUNE_RETURN_IF_ERROR(reduce(&fi));
      DITUNE_RETURN_IF_ERROR(reduce(&ft));
      AddGated(x, Chunk(m, 5, H), fi);
      AddGated(ctx, Chunk(mt, 5, Ht), ft);
      return Status::Ok();
    }
    case BlockFamily::kSingle: {
      const Vec m = VecMul(c, w.at("mod"));
      const int64_t T = ctx->rows(), n = x->rows();
      Mat seq(T + n, H);
      seq << *ctx, *x;
      Mat q, k, v, a;
      {
        Scoped s(Slot(timers, &OpTimers::gemm));
        const Mat h = NormModulate(seq, Chunk(m, 0, H), Chunk(m, 1, H));
        q = MatMul(h, w.at("wq"));
        k = MatMul(h, w.at("wk"));
        v = MatMul(h, w.at("wv"));
        a = Gelu(MatMul(h, w.at("w1")));
      }
      DITUNE_ASSIGN_OR_RETURN(Mat o, attend(q, k, v, T));
      Mat y = MatMul(o, w.at("oa"));
      MatMulInto(a, w.at("om"), &y, /*accumulate=*/true);
      DITUNE_RETURN_IF_ERROR(reduce(&y));
      AddGated(&seq, Chunk(m, 2, H), y);
      *ctx = seq.topRows(T);
      *x = seq.bottomRows(n);
      return Status::Ok();
    }
    case BlockFamily::kSpatial:
    case BlockFamily::kTemporal:
      return Status::NotSupported("the CPU executor has no spatial or temporal blocks");
  }
  return Status::Internal("unknown block family");
}

void DitModel::SelfQkv(const BlockWeights& bw, const Vec& m, const Mat& x, Mat* q, Mat* k, Mat* v,
                       OpTimers* timers) const {
  Scoped s(Slot(timers, &OpTimers::gemm));
  const int64_t H = spec_.hidden;
  const Mat h = NormModulate(x, Chunk(m, 0, H), Chunk(m, 1, H));
  *q = MatMul(h, bw.w.at("wq"));
  *k = MatMul(h, bw.w.at("wk"));
  *v = MatMul(h, bw.w.at("wv"));
}

Status DitModel::CrossTail(const BlockWeights& bw, const Vec& m, Mat* x, const Mat& ctx,
                           const std::function<Status(Mat*)>& reduce, OpTimers* timers) const {
  const auto& w = bw.w;
  const int64_t H = spec_.hidden;
  // Cross-attention to the text: every rank holds all of it, so no exchange.
  Mat y2;
  {
    Scoped s(Slot(timers, &OpTimers::attention));
    const Mat h2 = NormModulate(*x, Vec::Zero(H), Vec::Zero(H));
    y2 = MatMul(Attention(MatMul(h2, w.at("xq")), MatMul(ctx, w.at("xk")), MatMul(ctx, w.at("xv")), heads_local(),
                              spec_.head_dim),
                    w.at("xo"));
  }
  DITUNE_RETURN_IF_ERROR(reduce(&y2));
  *x += y2;
  Mat y3;
  {
    Scoped s(Slot(timers, &OpTimers::gemm));
    y3 = MatMul(Gelu(MatMul(NormModulate(*x, Chunk(m, 3, H), Chunk(m, 4, H)), w.at("w1"))), w.at("w2"));
  }
  DITUNE_RETURN_IF_ERROR(reduce(&y3));
  AddGated(x, Chunk(m, 5, H), y3);
  return Status::Ok();
}

Mat PromptEmbedding(const ModelSpec& spec, uint64_t seed, int prompt, bool negative) {
  return RandomMat(spec.text_tokens, spec.text_hidden, 1.0f, seed + 7919ULL * static_cast<uint64_t>(prompt + 1),
                   negative ? 0xBADC0FFEULL : 0x5EEDULL);
}

}  // namespace ditune::exec
