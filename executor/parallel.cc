#include "executor/parallel.h"

#include <functional>
#include <utility>

#include <fmt/format.h>

#include "core/rank_share.h"

namespace ditune::exec {
namespace {

constexpr float kGuidance = 4.0f;
constexpr int kTagRing = 11, kTagActivation = 21, kTagLatent = 22, kTagResult = 23;

// Rows [start, start + n) of m.
Mat RowBlock(const Mat& m, int64_t start, int64_t n) { return m.middleRows(start, n); }

// Runs of rows of the whole image: (first row, count).
using Segments = std::vector<std::pair<int64_t, int64_t>>;

// The rows of m in `segs`, one under the other.
Mat Stack(const Mat& m, const Segments& segs) {
  int64_t total = 0;
  for (const auto& g : segs) total += g.second;
  Mat out(total, m.cols());
  int64_t at = 0;
  for (const auto& [row0, count] : segs) {
    out.middleRows(at, count) = m.middleRows(row0, count);
    at += count;
  }
  return out;
}

// The inverse: src's rows, one under the other, to rows `segs` (shifted by `offset`) of dst.
void Unstack(const Eigen::Ref<const Mat>& src, const Segments& segs, Mat* dst, int64_t offset) {
  int64_t at = 0;
  for (const auto& [row0, count] : segs) {
    dst->middleRows(offset + row0, count) = src.middleRows(at, count);
    at += count;
  }
}

}  // namespace

struct ParallelRunner::Impl {
  const ModelSpec* model = nullptr;
  Workload workload;
  TokenGeometry tokens;
  ParallelConfig config;
  Comm* world = nullptr;
  uint64_t seed = 0;
  RankLayout layout;
  RankCoords coords;
  std::unique_ptr<Comm> ulysses, ring, tp, cfg, dp, sp, pp, distri;
  std::unique_ptr<DitModel> dit;
  int stage = 0, stages = 1;
  OpTimers timers;
  int ring_tag = 0;

  // DistriFusion: per branch and block, K and V of the whole sequence ([text; image] rows,
  // text where the block attends over it); this rank's rows fresh, the others' as of the
  // last all-gather (one step stale after the synchronous warm-up steps).
  std::vector<std::vector<std::pair<Mat, Mat>>> df_kv;
  int cur_block = 0, cur_branch = 0;
  bool df_sync = false, df_gather_after = false;

  int64_t n() const { return tokens.image_tokens(); }
  // The sequence's split: sequence parallelism, or DistriFusion's patches (which stand alone).
  int seq_degree() const { return config.sp() * config.distrifusion; }
  int seq_index() const { return coords[Axis::kSp] + config.sp() * coords[Axis::kDistriFusion]; }
  int64_t n_local() const { return n() / seq_degree(); }
  bool cfg_branches_here(int branch) const { return config.cfg == 1 || coords[Axis::kCfg] == branch; }

  // Ulysses: this rank's image rows of m (its last nl rows) traded for the group's image rows
  // of head group g (columns [g width, (g + 1) width)): u nl rows, in group order.
  StatusOr<Mat> ScatterHeads(const Mat& m, int64_t nl, int64_t width) {
    const int u = config.ulysses;
    if (u == 1) return Mat(m.bottomRows(nl));
    std::vector<float> send(static_cast<size_t>(nl * width * u)), recv(send.size());
    for (int j = 0; j < u; ++j) {
      Eigen::Map<Mat>(send.data() + j * nl * width, nl, width) = m.bottomRows(nl).middleCols(j * width, width);
    }
    const double t0 = world->Now();
    DITUNE_RETURN_IF_ERROR(ulysses->AllToAll(send.data(), recv.data(), static_cast<size_t>(nl * width)));
    timers.comm += world->Now() - t0;
    return Mat(Eigen::Map<Mat>(recv.data(), u * nl, width));
  }
  // The way back: O holds T text rows then the group's u nl image rows of this rank's head
  // group; out gets this rank's T + nl rows with every head of the group.
  StatusOr<Mat> GatherHeads(const Mat& O, int64_t T, int64_t nl, int64_t width) {
    const int u = config.ulysses;
    Mat out(T + nl, u * width);
    if (u == 1) {
      out = O;
      return out;
    }
    std::vector<float> send(static_cast<size_t>(u * nl * width)), recv(send.size());
    Eigen::Map<Mat>(send.data(), u * nl, width) = O.bottomRows(u * nl);
    const double t0 = world->Now();
    DITUNE_RETURN_IF_ERROR(ulysses->AllToAll(send.data(), recv.data(), static_cast<size_t>(nl * width)));
    for (int j = 0; j < u; ++j) {
      out.bottomRows(nl).middleCols(j * width, width) = Eigen::Map<Mat>(recv.data() + j * nl * width, nl, width);
    }
    if (T > 0) {
      // Text rows: every rank computed its head group; gather the others.
      std::vector<float> mine(static_cast<size_t>(T * width)), all(static_cast<size_t>(u * T * width));
      Eigen::Map<Mat>(mine.data(), T, width) = O.topRows(T);
      DITUNE_RETURN_IF_ERROR(ulysses->AllGather(mine.data(), all.data(), mine.size()));
      for (int j = 0; j < u; ++j) out.topRows(T).middleCols(j * width, width) = Eigen::Map<Mat>(all.data() + j * T * width, T, width);
    }
    timers.comm += world->Now() - t0;
    return out;
  }
  // Ring: passes `block` (rows x cols) around the ring group; `visit(block, origin)` sees
  // each ring rank's block in turn (this rank's first), overlapping the next transfer.
  Status RingPass(std::vector<float> block, const std::function<void(const float*, int)>& visit) {
    const int r = config.ring, me = coords[Axis::kRing];
    const int next = (me + 1) % r, prev = (me + r - 1) % r;
    std::vector<float> nxt(block.size());
    for (int s = 0; s < r; ++s) {
      std::unique_ptr<Request> rq, sq;
      if (s + 1 < r) {
        const int tag = kTagRing + 2 * (ring_tag++ % 1000);
        DITUNE_ASSIGN_OR_RETURN(rq, ring->Irecv(nxt.data(), nxt.size(), prev, tag));
        DITUNE_ASSIGN_OR_RETURN(sq, ring->Isend(block.data(), block.size(), next, tag));
      }
      visit(block.data(), (me - s + r) % r);
      if (s + 1 < r) {
        const double t0 = world->Now();
        DITUNE_RETURN_IF_ERROR(rq->Wait());
        DITUNE_RETURN_IF_ERROR(sq->Wait());
        timers.comm += world->Now() - t0;
        std::swap(block, nxt);
      }
    }
    return Status::Ok();
  }

  // Sequence-parallel attention over this rank's rows (text rows first, on every rank).
  StatusOr<Mat> SpAttention(const Mat& q, const Mat& k, const Mat& v, int64_t T) {
    const int u = config.ulysses, r = config.ring;
    const int hl = dit->heads_local();
    const int d = model->head_dim;
    if (u == 1 && r == 1) return Attention(q, k, v, hl, d);
    const int hu = hl / u;
    const int64_t width = static_cast<int64_t>(hu) * d;
    const int64_t nl = q.rows() - T;
    const int g = coords[Axis::kUlysses];
    DITUNE_ASSIGN_OR_RETURN(Mat qi, ScatterHeads(q, nl, width));
    DITUNE_ASSIGN_OR_RETURN(Mat ki, ScatterHeads(k, nl, width));
    DITUNE_ASSIGN_OR_RETURN(Mat vi, ScatterHeads(v, nl, width));
    Mat Q(T + qi.rows(), width);
    Q << q.topRows(T).middleCols(g * width, width), qi;
    OnlineSoftmax state(Q.rows(), hu, d);
    if (T > 0) state.Add(Q, k.topRows(T).middleCols(g * width, width), v.topRows(T).middleCols(g * width, width));
    // Ring: pass the image K/V around, overlapping each transfer with the attention over the
    // block already here.
    const int64_t rows = ki.rows();
    std::vector<float> block(static_cast<size_t>(2 * rows * width));
    Eigen::Map<Mat>(block.data(), rows, width) = ki;
    Eigen::Map<Mat>(block.data() + rows * width, rows, width) = vi;
    DITUNE_RETURN_IF_ERROR(RingPass(std::move(block), [&](const float* b, int /*origin*/) {
      state.Add(Q, Eigen::Map<const Mat>(b, rows, width), Eigen::Map<const Mat>(b + rows * width, rows, width));
    }));
    return GatherHeads(state.Finish(), T, nl, width);
  }

  // PipeFusion's attention with sequence parallelism inside the stage: this rank's rows of
  // the forward (`segs`: where they sit in the image) are its share of the patch. Ulysses
  // trades them for the group's rows of this rank's head group; Ring passes that fresh K/V
  // block around; every block lands at its rows of the buffers K, V (Tk text rows, then the
  // image), and the queries attend over the whole buffer. The text, replicated on every rank,
  // is fresh everywhere.
  StatusOr<Mat> PipeSpAttention(const Mat& q, const Mat& k, const Mat& v, int64_t T, Mat* K, Mat* V, int64_t Tk,
                                const std::function<Segments(int)>& segs) {
    const int u = config.ulysses;
    const int hu = dit->heads_local() / u, d = model->head_dim;
    const int64_t width = static_cast<int64_t>(hu) * d, nl = q.rows() - T;
    const int g = coords[Axis::kUlysses];
    DITUNE_ASSIGN_OR_RETURN(Mat qi, ScatterHeads(q, nl, width));
    DITUNE_ASSIGN_OR_RETURN(Mat ki, ScatterHeads(k, nl, width));
    DITUNE_ASSIGN_OR_RETURN(Mat vi, ScatterHeads(v, nl, width));
    K->topRows(T) = k.topRows(T).middleCols(g * width, width);
    V->topRows(T) = v.topRows(T).middleCols(g * width, width);
    std::vector<float> block(static_cast<size_t>(2 * u * nl * width));
    Eigen::Map<Mat>(block.data(), u * nl, width) = ki;
    Eigen::Map<Mat>(block.data() + u * nl * width, u * nl, width) = vi;
    DITUNE_RETURN_IF_ERROR(RingPass(std::move(block), [&](const float* b, int origin) {
      // Chunk j of the block from ring rank `origin` is sequence-parallel rank j + u origin's.
      for (int j = 0; j < u; ++j) {
        const Segments rows = segs(j + u * origin);
        Unstack(Eigen::Map<const Mat>(b + j * nl * width, nl, width), rows, K, Tk);
        Unstack(Eigen::Map<const Mat>(b + (u + j) * nl * width, nl, width), rows, V, Tk);
      }
    }));
    Mat Q(T + qi.rows(), width);
    Q << q.topRows(T).middleCols(g * width, width), qi;
    return GatherHeads(Attention(Q, *K, *V, hu, d), T, nl, width);
  }

  // DistriFusion's attention of this rank's rows (the first T of q, k, v the text, replicated
  // here): its fresh rows into the block's buffer, queries over the whole buffer. Where the
  // text splits evenly over the ranks, each rank's share of it is its own and the others' are
  // gathered like the image rows (as the engine splits it); otherwise every rank's text is
  // fresh. Warm-up steps gather before attending; later ones after, for the next step.
  StatusOr<Mat> DfAttention(const Mat& q, const Mat& k, const Mat& v, int64_t T) {
    const int nd = config.distrifusion, me = coords[Axis::kDistriFusion];
    const int64_t nl = q.rows() - T, N = n(), width = k.cols();
    const bool split_text = T > 0 && T % nd == 0;
    const int64_t tl = split_text ? T / nd : 0;  // text rows this rank owns
    auto& per_branch = df_kv[static_cast<size_t>(cur_branch)];
    if (per_branch.size() <= static_cast<size_t>(cur_block)) per_branch.resize(static_cast<size_t>(cur_block) + 1);
    auto& [K, V] = per_branch[static_cast<size_t>(cur_block)];
    if (K.rows() != T + N) {
      K = Mat::Zero(T + N, width);
      V = Mat::Zero(T + N, width);
    }
    if (split_text) {
      K.middleRows(me * tl, tl) = k.middleRows(me * tl, tl);
      V.middleRows(me * tl, tl) = v.middleRows(me * tl, tl);
    } else if (T > 0) {
      K.topRows(T) = k.topRows(T);
      V.topRows(T) = v.topRows(T);
    }
    K.middleRows(T + me * nl, nl) = k.bottomRows(nl);
    V.middleRows(T + me * nl, nl) = v.bottomRows(nl);
    auto gather = [&]() -> Status {
      const int64_t own = tl + nl;  // rows per rank: its text share, then its image rows
      std::vector<float> mine(static_cast<size_t>(2 * own * width)), all(mine.size() * nd);
      Eigen::Map<Mat> mk(mine.data(), own, width), mv(mine.data() + own * width, own, width);
      mk.topRows(tl) = K.middleRows(me * tl, tl);
      mk.bottomRows(nl) = K.middleRows(T + me * nl, nl);
      mv.topRows(tl) = V.middleRows(me * tl, tl);
      mv.bottomRows(nl) = V.middleRows(T + me * nl, nl);
      const double t0 = world->Now();
      DITUNE_RETURN_IF_ERROR(distri->AllGather(mine.data(), all.data(), mine.size()));
      timers.comm += world->Now() - t0;
      for (int j = 0; j < nd; ++j) {
        Eigen::Map<const Mat> jk(all.data() + j * mine.size(), own, width), jv(all.data() + j * mine.size() + own * width, own, width);
        K.middleRows(j * tl, tl) = jk.topRows(tl);
        V.middleRows(j * tl, tl) = jv.topRows(tl);
        K.middleRows(T + j * nl, nl) = jk.bottomRows(nl);
        V.middleRows(T + j * nl, nl) = jv.bottomRows(nl);
      }
      return Status::Ok();
    };
    if (df_sync) DITUNE_RETURN_IF_ERROR(gather());
    Mat out = Attention(q, K, V, dit->heads_local(), model->head_dim);
    if (!df_sync && df_gather_after) DITUNE_RETURN_IF_ERROR(gather());
    return out;
  }

  ParallelHooks Hooks() {
    ParallelHooks h;
    if (config.distrifusion > 1) {
      h.attention = [this](const Mat& q, const Mat& k, const Mat& v, int64_t T) { return DfAttention(q, k, v, T); };
    }
    if (config.sp() > 1) {
      h.attention = [this](const Mat& q, const Mat& k, const Mat& v, int64_t T) { return SpAttention(q, k, v, T); };
    }
    if (config.tp > 1) {
      h.tp_reduce = [this](Mat* m) { return tp->AllReduceSum(m->data(), static_cast<size_t>(m->size())); };
    }
    return h;
  }

  // The model's prediction for this rank's latent rows.
  StatusOr<Mat> Predict(const Mat& latent_rows, const Vec& c, Mat ctx) {
    Mat x = dit->Embed(latent_rows, &timers);
    const ParallelHooks hooks = Hooks();
    for (int b = 0; b < dit->num_blocks(); ++b) {
      cur_block = b;
      DITUNE_RETURN_IF_ERROR(dit->Block(b, c, &x, &ctx, hooks, &timers));
    }
    return dit->Final(x, c, &timers);
  }

  // v = v_u + g (v_c - v_u), with the branches here or across the CFG group.
  StatusOr<Mat> Guide(const std::vector<Mat>& mine) {
    if (!model->uses_cfg) return mine[0];
    if (config.cfg == 1) return Mat(mine[1] + kGuidance * (mine[0] - mine[1]));
    std::vector<float> all(static_cast<size_t>(2 * mine[0].size()));
    const double t0 = world->Now();
    DITUNE_RETURN_IF_ERROR(cfg->AllGather(mine[0].data(), all.data(), static_cast<size_t>(mine[0].size())));
    timers.comm += world->Now() - t0;
    Eigen::Map<Mat> vc(all.data(), mine[0].rows(), mine[0].cols());
    Eigen::Map<Mat> vu(all.data() + mine[0].size(), mine[0].rows(), mine[0].cols());
    return Mat(vu + kGuidance * (vc - vu));
  }

  std::vector<int> Branches() const {
    if (!model->uses_cfg) return {0};
    if (config.cfg == 2) return {coords[Axis::kCfg]};
    return {0, 1};
  }

  StatusOr<Mat> GenerateSync(int prompt, std::vector<double>* step_seconds) {
    const int64_t nl = n_local();
    const Mat full = RandomMat(n(), dit->latent_width(), 1.0f, seed, 1000 + static_cast<uint64_t>(prompt));
    Mat x = RowBlock(full, seq_index() * nl, nl);
    const std::vector<int> branches = Branches();
    std::vector<Mat> ctx;
    for (int b : branches) ctx.push_back(dit->ProjectText(PromptEmbedding(*model, seed, prompt, b == 1), &timers));
    const int S = workload.steps;
    const int df_warmup = std::min(S, std::max(1, config.warmup));
    df_kv.assign(branches.size(), {});
    for (int k = 0; k < S; ++k) {
      const double t0 = world->Now();
      const float sigma = 1.0f - static_cast<float>(k) / S, next = 1.0f - static_cast<float>(k + 1) / S;
      const Vec c = dit->Conditioning(sigma * 1000.0f, &timers);
      df_sync = k < df_warmup;
      df_gather_after = k + 1 < S;
      std::vector<Mat> v;
      for (size_t i = 0; i < branches.size(); ++i) {
        cur_branch = static_cast<int>(i);
        DITUNE_ASSIGN_OR_RETURN(Mat p, Predict(x, c, ctx[i]));
        v.push_back(std::move(p));
      }
      DITUNE_ASSIGN_OR_RETURN(Mat g, Guide(v));
      x += (next - sigma) * g;
      step_seconds->push_back(world->Now() - t0);
    }
    if (seq_degree() == 1) return x;
    std::vector<float> all(static_cast<size_t>(n() * x.cols()));
    Comm* seq = config.distrifusion > 1 ? distri.get() : sp.get();
    DITUNE_RETURN_IF_ERROR(seq->AllGather(x.data(), all.data(), static_cast<size_t>(x.size())));
    return Mat(Eigen::Map<Mat>(all.data(), n(), x.cols()));
  }

  // PipeFusion: this stage's blocks over patches, attention reading a one-step-stale K/V
  // buffer of the whole sequence (fresh for the patches already done this step). With
  // sequence parallelism inside the stage each patch's rows are split over the group (patch,
  // then rank, as xDiT); every rank keeps the buffers of the whole sequence and the group
  // all-gathers each forward's fresh image K/V into them, so each rank's queries attend over
  // what one device would hold (the text, replicated on every rank here, is fresh everywhere).
  // Tensor parallelism splits the heads (and the buffers with them) and sums the blocks'
  // partial products.
  StatusOr<Mat> GeneratePipe(int prompt, std::vector<double>* step_seconds) {
    const int64_t N = n(), H = model->hidden;
    const int M = config.patches, spd = config.sp();
    const int64_t pr = N / M, share = pr / spd;  // rows of a patch, and of one rank's share of it
    const int S = workload.steps;
    const int w = std::min(config.warmup, S);
    const bool first = stage == 0, last = stage == stages - 1;
    const int prev_stage = stage - 1, next_stage = stage + 1;
    // Ranks of the neighbouring stages in the PipeFusion group are their stage indices.
    Mat latent = RandomMat(N, dit->latent_width(), 1.0f, seed, 1000 + static_cast<uint64_t>(prompt));
    const std::vector<int> branches = Branches();
    std::vector<Mat> ctx;
    for (int b : branches) ctx.push_back(dit->ProjectText(PromptEmbedding(*model, seed, prompt, b == 1), &timers));
    // K/V buffers per branch and block: [text; image] rows (text where the block attends over
    // it) x this rank's heads.
    const int64_t T = model->text_tokens, Ht = model->text_stream_hidden;
    // (With Ulysses: its head group.)
    const int64_t width = static_cast<int64_t>(dit->heads_local()) * model->head_dim / config.ulysses;
    std::vector<std::vector<std::pair<Mat, Mat>>> kv(branches.size());
    for (auto& per_branch : kv) {
      for (int b = 0; b < dit->num_blocks(); ++b) {
        const bool text = model->family_of(dit->first_block() + b) != BlockFamily::kCross;
        const int64_t rows = N + (text ? T : 0);
        per_branch.emplace_back(Mat::Zero(rows, width), Mat::Zero(rows, width));
      }
    }
    // The image rows (first row, count) a forward of sequence-parallel rank `sr` computes:
    // its share of patch p, or of every patch in a warm-up step.
    auto rows_of = [&](int sr, bool warm, int p) {
      Segments segs;
      for (int q = warm ? 0 : p; q < (warm ? M : p + 1); ++q) segs.emplace_back(q * pr + sr * share, share);
      return segs;
    };
    const int me = coords[Axis::kSp];
    std::vector<std::unique_ptr<Request>> pending;
    std::vector<std::vector<float>> send_buffers;
    auto send = [&](const Mat& m, int to, int tag) -> Status {
      send_buffers.emplace_back(m.data(), m.data() + m.size());
      DITUNE_ASSIGN_OR_RETURN(auto r, pp->Isend(send_buffers.back().data(), send_buffers.back().size(), to, tag));
      pending.push_back(std::move(r));
      return Status::Ok();
    };
    auto recv = [&](int64_t rows, int64_t cols, int from, int tag) -> StatusOr<Mat> {
      Mat m(rows, cols);
      const double t0 = world->Now();
      DITUNE_ASSIGN_OR_RETURN(auto r, pp->Irecv(m.data(), static_cast<size_t>(m.size()), from, tag));
      DITUNE_RETURN_IF_ERROR(r->Wait());
      timers.comm += world->Now() - t0;
      return m;
    };
    // One forward of this stage's blocks over this rank's image rows of a patch (or of a
    // warm-up step) in branch bi, with the text rows in `text` (all of them in the first patch
    // of a step, none in the later ones, which attend over the text K/V the first left:
    // xDiT's scheme). Cross blocks take the whole projected text for their cross-attention.
    auto forward = [&](size_t bi, bool warm, int p, const Vec& c, Mat* h, Mat* text) -> Status {
      int cur = 0;
      ParallelHooks hooks;
      hooks.attention = [&](const Mat& q, const Mat& k, const Mat& v, int64_t Tq) -> StatusOr<Mat> {
        auto& [K, V] = kv[bi][static_cast<size_t>(cur)];
        const int64_t Tk = K.rows() - N, nl = k.rows() - Tq;
        if (spd > 1) {
          return PipeSpAttention(q, k, v, Tq, &K, &V, Tk, [&](int sr) { return rows_of(sr, warm, p); });
        }
        K.topRows(Tq) = k.topRows(Tq);
        V.topRows(Tq) = v.topRows(Tq);
        Unstack(k.bottomRows(nl), rows_of(me, warm, p), &K, Tk);
        Unstack(v.bottomRows(nl), rows_of(me, warm, p), &V, Tk);
        return Attention(q, K, V, dit->heads_local(), model->head_dim);
      };
      if (config.tp > 1) {
        hooks.tp_reduce = [this](Mat* m) { return tp->AllReduceSum(m->data(), static_cast<size_t>(m->size())); };
      }
      Mat whole = ctx[bi];
      for (cur = 0; cur < dit->num_blocks(); ++cur) {
        const bool cross = model->family_of(dit->first_block() + cur) == BlockFamily::kCross;
        DITUNE_RETURN_IF_ERROR(dit->Block(cur, c, h, cross ? &whole : text, hooks, &timers));
      }
      return Status::Ok();
    };
    // Whether the residual stream carries text rows (joint and single blocks).
    bool stream_text = false;
    for (int b = 0; b < model->num_blocks(); ++b) stream_text |= model->family_of(b) != BlockFamily::kCross;
    for (int k = 0; k < S; ++k) {
      const double t0 = world->Now();
      const float sigma = 1.0f - static_cast<float>(k) / S, next = 1.0f - static_cast<float>(k + 1) / S;
      const Vec c = dit->Conditioning(sigma * 1000.0f, &timers);
      const bool warm = k < w;
      const int patches = warm ? 1 : M;
      for (int p = 0; p < patches; ++p) {
        const auto mine = rows_of(me, warm, p);
        const int64_t rows = warm ? M * share : share;
        if (first && stages > 1 && k > 0) {
          // The latest latent rows from the last stage (all of this rank's after a warm-up step).
          const bool prev_warm = k - 1 < w;
          if (!prev_warm || p == 0) {
            const auto back = rows_of(me, prev_warm, p);
            DITUNE_ASSIGN_OR_RETURN(Mat part, recv(prev_warm ? M * share : share, latent.cols(), stages - 1, kTagLatent));
            Unstack(part, back, &latent, 0);
          }
        }
        std::vector<Mat> v;
        const int64_t text_rows = stream_text && (warm || p == 0) ? T : 0;
        for (size_t bi = 0; bi < branches.size(); ++bi) {
          Mat h, text(0, Ht);
          if (first) {
            h = dit->Embed(Stack(latent, mine), &timers);
            if (text_rows > 0) text = ctx[bi];
          } else {
            DITUNE_ASSIGN_OR_RETURN(h, recv(rows, H, prev_stage, kTagActivation));
            if (text_rows > 0) {
              DITUNE_ASSIGN_OR_RETURN(text, recv(text_rows, Ht, prev_stage, kTagActivation));
            }
          }
          DITUNE_RETURN_IF_ERROR(forward(bi, warm, p, c, &h, &text));
          if (!last) {
            DITUNE_RETURN_IF_ERROR(send(h, next_stage, kTagActivation));
            if (text_rows > 0) DITUNE_RETURN_IF_ERROR(send(text, next_stage, kTagActivation));
          } else {
            v.push_back(dit->Final(h, c, &timers));
          }
        }
        if (last) {
          DITUNE_ASSIGN_OR_RETURN(Mat g, Guide(v));
          Mat updated = Stack(latent, mine);
          updated += (next - sigma) * g;
          Unstack(updated, mine, &latent, 0);
          if (stages > 1 && k + 1 < S) DITUNE_RETURN_IF_ERROR(send(updated, 0, kTagLatent));
        }
      }
      step_seconds->push_back(world->Now() - t0);
    }
    for (auto& r : pending) DITUNE_RETURN_IF_ERROR(r->Wait());
    pending.clear();
    // Every rank gets the result: the last stage's sequence-parallel group gathers its rows,
    // then hands the whole latent to the earlier stages.
    if (last && spd > 1) {
      const Mat own = Stack(latent, rows_of(me, true, 0));
      std::vector<float> all(static_cast<size_t>(own.size() * spd));
      DITUNE_RETURN_IF_ERROR(sp->AllGather(own.data(), all.data(), static_cast<size_t>(own.size())));
      for (int j = 0; j < spd; ++j) {
        Unstack(Eigen::Map<const Mat>(all.data() + j * own.size(), own.rows(), own.cols()), rows_of(j, true, 0), &latent, 0);
      }
    }
    if (stages > 1) {
      if (last) {
        for (int s = 0; s + 1 < stages; ++s) DITUNE_RETURN_IF_ERROR(send(latent, s, kTagResult));
        for (auto& r : pending) DITUNE_RETURN_IF_ERROR(r->Wait());
      } else {
        DITUNE_ASSIGN_OR_RETURN(latent, recv(N, latent.cols(), stages - 1, kTagResult));
      }
    }
    return latent;
  }
};

StatusOr<std::unique_ptr<ParallelRunner>> ParallelRunner::Create(const ModelSpec& model, const Workload& workload,
                                                                 const ParallelConfig& config, Comm* world,
                                                                 uint64_t seed) {
  TuneAllocator();
  DITUNE_RETURN_IF_ERROR(ExecutorRunsModel(model));
  if (config.world_size() != world->size()) {
    return Status::InvalidArgument(fmt::format("config '{}' needs {} ranks; {} were launched", Label(config),
                                               config.world_size(), world->size()));
  }
  std::unique_ptr<ParallelRunner> r(new ParallelRunner());
  auto impl = std::make_unique<Impl>();
  impl->model = &model;
  impl->workload = workload;
  DITUNE_ASSIGN_OR_RETURN(impl->tokens, ComputeTokenGeometry(model, workload));
  impl->config = config;
  impl->world = world;
  impl->seed = seed;
  DITUNE_ASSIGN_OR_RETURN(impl->layout, RankLayout::Create(config, world->size()));
  impl->coords = impl->layout.CoordsOf(world->rank());
  auto split = [&](Axis a) { return world->Split(impl->layout.GroupOf(world->rank(), a)); };
  DITUNE_ASSIGN_OR_RETURN(impl->ulysses, split(Axis::kUlysses));
  DITUNE_ASSIGN_OR_RETURN(impl->ring, split(Axis::kRing));
  DITUNE_ASSIGN_OR_RETURN(impl->sp, split(Axis::kSp));
  DITUNE_ASSIGN_OR_RETURN(impl->tp, split(Axis::kTp));
  DITUNE_ASSIGN_OR_RETURN(impl->cfg, split(Axis::kCfg));
  DITUNE_ASSIGN_OR_RETURN(impl->dp, split(Axis::kDp));
  DITUNE_ASSIGN_OR_RETURN(impl->pp, split(Axis::kPipeFusion));
  DITUNE_ASSIGN_OR_RETURN(impl->distri, split(Axis::kDistriFusion));
  impl->stages = config.pipefusion;
  impl->stage = impl->coords[Axis::kPipeFusion];
  int first = 0, count = 0;
  StageBlocks(model.num_blocks(), config.pipefusion, impl->stage, &first, &count);
  impl->dit = std::make_unique<DitModel>(model, seed, first, count, config.tp, impl->coords[Axis::kTp]);
  r->impl_ = std::move(impl);
  return r;
}

ParallelRunner::~ParallelRunner() = default;

int64_t ParallelRunner::WeightBytes() const { return impl_->dit->WeightBytes(); }

StatusOr<GenerationResult> ParallelRunner::Generate() {
  Impl& m = *impl_;
  GenerationResult out;
  m.timers = OpTimers{};
  const int B = m.workload.batch;
  const int per = B / m.config.dp;
  const int first = m.coords[Axis::kDp] * per;
  const bool pipe = m.config.pipefusion > 1 || m.config.patches > 1;
  DITUNE_RETURN_IF_ERROR(m.world->Barrier());
  const double t0 = m.world->Now();
  std::vector<Mat> mine;
  for (int p = first; p < first + per; ++p) {
    DITUNE_ASSIGN_OR_RETURN(Mat x, pipe ? m.GeneratePipe(p, &out.step_seconds) : m.GenerateSync(p, &out.step_seconds));
    mine.push_back(std::move(x));
  }
  out.dit_seconds = m.world->Now() - t0;
  // Data parallel: every rank gets every prompt's latent.
  const int64_t size = mine.front().size();
  std::vector<float> send(static_cast<size_t>(per * size)), all(static_cast<size_t>(B * size));
  for (int i = 0; i < per; ++i) std::copy(mine[i].data(), mine[i].data() + size, send.begin() + i * size);
  DITUNE_RETURN_IF_ERROR(m.dp->AllGather(send.data(), all.data(), send.size()));
  for (int p = 0; p < B; ++p) {
    out.latents.push_back(Eigen::Map<Mat>(all.data() + p * size, mine.front().rows(), mine.front().cols()));
  }
  out.timers = m.timers;
  return out;
}

}  // namespace ditune::exec
