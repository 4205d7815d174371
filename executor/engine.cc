#include "executor/engine.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/rank_layout.h"
#include "core/rank_share.h"
#include "executor/device_comm.h"
#include "executor/model_inputs.h"

namespace ditune::exec {
namespace {

constexpr int kTagActivation = 21, kTagLatent = 22;

// A stable stream id per (block, weight name) for the device-side generator.
uint64_t WeightStream(int block, const std::string& name) {
  uint64_t h = 0x51ED270B27A1C3F5ULL ^ static_cast<uint64_t>(block + 7);
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

// Shapes of one forward of one rank, derived from its RankWork.
struct Dims {
  int64_t b = 1;    // sequences per forward
  int64_t ni = 0;   // image rows per sequence in projections and MLP
  int64_t nt = 0;   // text rows per sequence in the residual stream (joint, single)
  int64_t T = 0;    // text tokens of the whole prompt
  int64_t N = 0;    // image tokens of the whole sequence
  int64_t Hl = 0;   // projection width per rank (H / tp)
  int64_t Ml = 0;   // MLP width per rank
  int64_t Mtl = 0;  // text-stream MLP width per rank (joint)
  int64_t qa = 0;   // query rows per sequence in self/joint attention
  int64_t kva = 0;  // key/value rows per sequence
  int heads_attn = 0;
  bool direct = false;  // attention runs on the projections themselves (no exchange stands between)
};

}  // namespace

StatusOr<EngineWork> EngineWorkFor(const ModelSpec& model, const Workload& workload, const ParallelConfig& config,
                                   int rank) {
  DITUNE_RETURN_IF_ERROR(ExecutorRunsModel(model));
  DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, workload));
  if (rank < 0 || rank >= config.world_size()) {
    return Status::InvalidArgument(fmt::format("rank {}: '{}' has ranks 0 to {}", rank, Label(config),
                                               config.world_size() - 1));
  }
  DITUNE_ASSIGN_OR_RETURN(RankLayout layout, RankLayout::Create(config, config.world_size()));
  const std::vector<RankShare> shares = ComputeRankShares(model, tokens, workload, config, layout);
  const RankShare& s = shares.at(static_cast<size_t>(rank));
  EngineWork w;
  ParallelConfig whole = config;
  whole.patches = 1;
  whole.pipefusion = 1;
  w.warmup = ComputeRankWork(model, tokens, workload, whole);
  const bool pipelined = config.pipefusion > 1 || config.patches > 1;
  w.steady = pipelined ? ComputeRankWork(model, tokens, workload, config) : w.warmup;
  // Synchronous warm-up steps: PipeFusion's as configured; DistriFusion's at least one (its
  // stale K/V must come from somewhere).
  if (pipelined) {
    w.warmup_steps = std::min(workload.steps, config.warmup);
  } else if (config.distrifusion > 1) {
    w.warmup_steps = std::min(workload.steps, std::max(1, config.warmup));
  }
  w.first_block = s.first_block;
  w.blocks = s.blocks;
  w.branches = model.uses_cfg ? (config.cfg == 2 ? 1 : 2) : 1;
  w.prompts = w.steady.batch / w.branches;
  w.exact = config.world_size() == 1 && !pipelined;
  w.config = config;
  w.rank = rank;
  return w;
}

struct DitEngine::Impl {
  const ModelSpec* m = nullptr;
  Workload wl;
  EngineWork work;
  Kernels* k = nullptr;
  Device* d = nullptr;
  int64_t eb = 2;  // bytes of an act element (Kernels::element_bytes)
  EngineOptions opt;
  std::unique_ptr<ModelInputs> inputs;  // prompts, conditioning, input and output layers (host)
  bool gated = false;              // MLPs gated (SwiGLU)
  bool extras = false;
  bool unified = false;            // text and image rows share one residual buffer per sequence
  int64_t H = 0, Ht = 0, M = 0, D = 0, lat = 0;
  RankCoords coords;               // this rank's place in the plan (all zero on one device)
  int sp = 1;                      // sequence-parallel degree (Ulysses x Ring)

  // Real transfers (a world was given): the groups the engine exchanges over.
  bool parallel = false;
  Comm* world = nullptr;
  std::vector<std::unique_ptr<Comm>> owned_groups;
  std::unique_ptr<DeviceComm> ulysses, ring, tp, cfg, distri;
  int ring_tag = 0;
  // PipeFusion computed for real (on one device, or across stages): patches attend over
  // per-block K/V buffers of the whole sequence, fresh for the rows already done this step
  // and one step stale for the rest; stages hand activations forward (pp_fwd) and the last
  // stage hands the updated latent rows back to the first (pp_back).
  bool pipeline = false;
  int stage = 0, stages = 1;
  std::unique_ptr<DeviceComm> pp_fwd, pp_back;
  // Sends in flight per patch: activations forward, latent rows back (Handoff, Settle).
  std::vector<std::unique_ptr<Request>> fwd_pending, back_pending;
  // DistriFusion across ranks: the same per-block K/V buffers, this rank's rows fresh and the
  // others' one step stale, refreshed by a nonblocking in-place all-gather launched after
  // each block's attention and completed before that block's attention in the next step
  // (synchronous warm-up steps gather before attending).
  bool distri_real = false;
  bool distri_in_turn = false;  // every rank's share in turn on one device (EngineOptions)
  bool kv_sync = false;          // this step gathers before attending
  bool kv_gather_after = false;  // this step refreshes the others' buffers for the next
  std::vector<std::unique_ptr<Request>> kv_pending;  // per block: the gather in flight
  int cur_block = 0;        // the block being computed (index in this rank's blocks)
  bool exact = false;       // this rank ends with the model's output
  int seq_index = 0;        // this rank's share of the sequence (sequence parallel, DistriFusion)
  // Which image rows a rank holds. The image is cut into `row_patches` patches (PipeFusion's;
  // else one), each patch into `shares` equal shares (sequence parallel x DistriFusion) of
  // `share_rows` rows — xDiT's order: patch, then sequence-parallel rank. A rank holds its
  // share of every patch, in patch order (GlobalImageRow).
  int row_patches = 1, shares = 1;
  int64_t share_rows = 0;
  // This forward: its first text row in the prompt (split text) and its first image row
  // among the rank's rows.
  int64_t text_row0 = 0, fwd_row0 = 0;

  struct BlockW {
    BlockFamily family = BlockFamily::kCross;
    std::map<std::string, std::unique_ptr<Buffer>> w;
    void* p(const std::string& n) { return w.at(n)->data(); }
  };
  std::vector<BlockW> blocks;
  std::map<std::string, std::unique_ptr<Buffer>> io;
  std::map<std::string, std::unique_ptr<Buffer>> scratch;
  int64_t weight_bytes = 0;

  // ---- memory ----
  StatusOr<void*> Scratch(const std::string& name, int64_t bytes) {
    auto& b = scratch[name];
    if (!b || b->bytes() < bytes) {
      // Kernels queued on the stream may still read the old buffer.
      if (b) DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());
      b.reset();
      DITUNE_ASSIGN_OR_RETURN(b, d->Alloc(std::max<int64_t>(bytes, 64)));
      DITUNE_RETURN_IF_ERROR(k->Zero(b->data(), b->bytes() / eb));
    }
    return b->data();
  }
  StatusOr<std::unique_ptr<Buffer>> Weight(int block, const std::string& name, int64_t rows, int64_t cols,
                                           float stddev) {
    DITUNE_ASSIGN_OR_RETURN(auto b, d->Alloc(rows * cols * eb));
    DITUNE_RETURN_IF_ERROR(k->FillRandom(b->data(), rows * cols, stddev, opt.seed, WeightStream(block, name)));
    weight_bytes += rows * cols * eb;
    return b;
  }
  // This tensor-parallel rank's slice of a weight the generator draws whole: the full matrix
  // is rows x sum(parts) (row_split: rows tp x parts[0]); the slice takes columns
  // [t part / tp, (t + 1) part / tp) of every column part (row_split: rows [t rows, ..)), so
  // that the ranks of a tensor-parallel group hold exactly the pieces of the one-device model.
  StatusOr<std::unique_ptr<Buffer>> TpWeight(int block, const std::string& name, int64_t rows,
                                             const std::vector<int64_t>& parts, bool row_split, float stddev) {
    int64_t full_cols = 0;
    for (int64_t c : parts) full_cols += c;
    const int tpd = work.steady.tp;
    if (tpd == 1) return Weight(block, name, rows, full_cols, stddev);
    const int t = coords[Axis::kTp];
    const int64_t full_rows = row_split ? rows * tpd : rows;
    DITUNE_ASSIGN_OR_RETURN(auto whole, d->Alloc(full_rows * full_cols * eb));
    DITUNE_RETURN_IF_ERROR(k->FillRandom(whole->data(), full_rows * full_cols, stddev, opt.seed, WeightStream(block, name)));
    const int64_t cols = row_split ? full_cols : full_cols / tpd;
    DITUNE_ASSIGN_OR_RETURN(auto b, d->Alloc(rows * cols * eb));
    if (row_split) {
      DITUNE_RETURN_IF_ERROR(k->Copy(b->data(), cols, At(whole->data(), t * rows * full_cols), full_cols, rows, cols));
    } else {
      int64_t from = 0, to = 0;
      for (int64_t part : parts) {
        const int64_t w = part / tpd;
        DITUNE_RETURN_IF_ERROR(k->Copy(At(b->data(), to), cols, At(whole->data(), from + t * w), full_cols, rows, w));
        from += part;
        to += w;
      }
    }
    // The whole matrix is freed on return: let the copies finish first.
    DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());
    weight_bytes += rows * cols * eb;
    return b;
  }
  StatusOr<std::unique_ptr<Buffer>> Upload(const Mat& host_m) {
    DITUNE_ASSIGN_OR_RETURN(auto b, d->Alloc(host_m.size() * eb));
    DITUNE_RETURN_IF_ERROR(k->Upload(host_m.data(), b->data(), host_m.size()));
    weight_bytes += host_m.size() * eb;
    return b;
  }
  // The act element `elems` past p.
  void* At(void* p, int64_t elems) const { return static_cast<char*>(p) + elems * eb; }
  const void* At(const void* p, int64_t elems) const { return static_cast<const char*>(p) + elems * eb; }

  // ---- set-up ----
  Status Load() {
    H = m->hidden;
    Ht = m->text_stream_hidden;
    M = m->mlp_hidden;
    D = m->head_dim;
    gated = extras && m->mlp_gated;
    bool has_single = false, has_joint = false;
    for (int b = work.first_block; b < work.first_block + work.blocks; ++b) {
      has_single |= m->family_of(b) == BlockFamily::kSingle;
      has_joint |= m->family_of(b) == BlockFamily::kJoint;
    }
    unified = Ht == H;
    if (has_single && !unified) return Status::NotSupported("single blocks need the text stream at the hidden width");
    if (m->attention != AttentionKind::kSoftmax) {
      return Status::NotSupported(fmt::format("{}: the engine runs softmax attention; linear attention is not implemented",
                                              m->id));
    }
    (void)has_joint;
    const int tpd = work.steady.tp;
    const int64_t Hl = H / tpd, Ml = M / tpd, Mtl = M * Ht / H / tpd;
    inputs = std::make_unique<ModelInputs>(*m, opt.seed);
    lat = inputs->latent_width();
    for (const char* name : {"patch", "out", "fmod", "text"}) {
      DITUNE_ASSIGN_OR_RETURN(io[name], Upload(inputs->io_weight(name)));
    }
    auto sd = [](int64_t fan_in) { return 1.0f / std::sqrt(static_cast<float>(fan_in)); };
    auto small = [](int64_t fan_in) { return 0.1f / std::sqrt(static_cast<float>(fan_in)); };
    // An MLP input projection's column parts: [gate | up] when gated.
    auto mlp_parts = [&](int64_t inner) { return gated ? std::vector<int64_t>{inner, inner} : std::vector<int64_t>{inner}; };
    for (int i = 0; i < work.blocks; ++i) {
      const int b = work.first_block + i;
      BlockW bw;
      bw.family = m->family_of(b);
      auto& w = bw.w;
      switch (bw.family) {
        case BlockFamily::kCross: {
          DITUNE_ASSIGN_OR_RETURN(w["mod"], Weight(b, "mod", H, 6 * H, small(H)));
          DITUNE_ASSIGN_OR_RETURN(w["wqkv"], TpWeight(b, "wqkv", H, {H, H, H}, false, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["wo"], TpWeight(b, "wo", Hl, {H}, true, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["xq"], TpWeight(b, "xq", H, {H}, false, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["xkv"], TpWeight(b, "xkv", Ht, {H, H}, false, sd(Ht)));
          DITUNE_ASSIGN_OR_RETURN(w["xo"], TpWeight(b, "xo", Hl, {H}, true, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["w1"], TpWeight(b, "w1", H, mlp_parts(M), false, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["w2"], TpWeight(b, "w2", Ml, {H}, true, sd(M)));
          break;
        }
        case BlockFamily::kJoint: {
          DITUNE_ASSIGN_OR_RETURN(w["mod"], Weight(b, "mod", H, 6 * H, small(H)));
          DITUNE_ASSIGN_OR_RETURN(w["tmod"], Weight(b, "tmod", H, 6 * Ht, small(H)));
          DITUNE_ASSIGN_OR_RETURN(w["wqkv"], TpWeight(b, "wqkv", H, {H, H, H}, false, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["tqkv"], TpWeight(b, "tqkv", Ht, {H, H, H}, false, sd(Ht)));
          DITUNE_ASSIGN_OR_RETURN(w["wo"], TpWeight(b, "wo", Hl, {H}, true, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["to"], TpWeight(b, "to", Hl, {Ht}, true, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["w1"], TpWeight(b, "w1", H, mlp_parts(M), false, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["w2"], TpWeight(b, "w2", Ml, {H}, true, sd(M)));
          DITUNE_ASSIGN_OR_RETURN(w["t1"], TpWeight(b, "t1", Ht, mlp_parts(M * Ht / H), false, sd(Ht)));
          DITUNE_ASSIGN_OR_RETURN(w["t2"], TpWeight(b, "t2", Mtl, {Ht}, true, sd(M * Ht / H)));
          break;
        }
        case BlockFamily::kSingle: {
          DITUNE_ASSIGN_OR_RETURN(w["mod"], Weight(b, "mod", H, 3 * H, small(H)));
          std::vector<int64_t> parts{H, H, H};
          for (int64_t part : mlp_parts(M)) parts.push_back(part);
          DITUNE_ASSIGN_OR_RETURN(w["wqkv1"], TpWeight(b, "wqkv1", H, parts, false, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["oa"], TpWeight(b, "oa", Hl, {H}, true, sd(H)));
          DITUNE_ASSIGN_OR_RETURN(w["om"], TpWeight(b, "om", Ml, {H}, true, sd(M)));
          break;
        }
        case BlockFamily::kSpatial:
        case BlockFamily::kTemporal:
          break;  // ExecutorRunsModel refuses these models before weights are made
      }
      blocks.push_back(std::move(bw));
    }
    return d->stream()->Synchronize();
  }

  Dims DimsOf(const RankWork& rw, BlockFamily family) const {
    Dims x;
    x.b = rw.batch;
    x.ni = rw.img_tokens;
    x.nt = family == BlockFamily::kCross ? 0 : rw.txt_tokens;
    x.T = rw.seq_txt_tokens;
    x.N = rw.seq_img_tokens;
    x.Hl = H / rw.tp;
    x.Ml = M / rw.tp;
    x.Mtl = M * Ht / H / rw.tp;
    x.heads_attn = rw.heads;
    x.qa = static_cast<int64_t>(rw.ulysses) * (x.ni + x.nt);
    x.kva = x.N + (family == BlockFamily::kCross ? 0 : x.T);
    x.direct = x.qa == x.nt + x.ni && x.kva == x.nt + x.ni && static_cast<int64_t>(rw.heads) * D == x.Hl;
    return x;
  }

  // ---- kernel helpers ----
  // C = A W (+ C) for `batch` sequences; folded into one GEMM when the sequences are contiguous.
  Status Mm(const void* a, int64_t lda, int64_t stride_a, const void* wt, int64_t ldw, void* c, int64_t ldc,
            int64_t stride_c, int64_t rows, int64_t kdim, int64_t n, int64_t batch, bool accumulate = false,
            Epilogue ep = Epilogue::kNone) {
    if (rows == 0) return Status::Ok();
    GemmArgs g;
    g.a = a;
    g.lda = lda;
    g.b = wt;
    g.ldb = ldw;
    g.c = c;
    g.ldc = ldc;
    g.k = kdim;
    g.n = n;
    g.accumulate = accumulate;
    g.epilogue = ep;
    if (batch == 1 || (stride_a == rows * lda && stride_c == rows * ldc)) {
      g.m = rows * batch;
    } else {
      g.m = rows;
      g.batch = static_cast<int>(batch);
      g.stride_a = stride_a;
      g.stride_c = stride_c;
    }
    return k->Gemm(g);
  }
  // The modulation vector(s) c W into an f32 buffer.
  Status Modulation(const void* cvec, const void* wt, int64_t n, float* out) {
    GemmArgs g;
    g.a = cvec;
    g.lda = H;
    g.b = wt;
    g.ldb = n;
    g.c = out;
    g.ldc = n;
    g.m = 1;
    g.k = H;
    g.n = n;
    g.c_f32 = true;
    return k->Gemm(g);
  }
  Status Norm(const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t cols, const float* shift,
              const float* scale) {
    NormArgs a;
    a.x = x;
    a.ldx = ldx;
    a.y = y;
    a.ldy = ldy;
    a.rows = rows;
    a.cols = cols;
    a.shift = shift;
    a.scale = scale;
    return k->NormModulate(a);
  }
  // Attention of `batch` sequences: q rows (ldq) `q_stride` apart, k and v rows (ldkv, v at
  // k + v_offset) `kv_stride` apart, o rows (ldo) `o_stride` apart; `lse`, when given, receives
  // the rows' log-sum-exps.
  Status Attend(const void* q, int64_t ldq, int64_t q_stride, const void* kv, int64_t v_offset, int64_t ldkv,
                int64_t kv_stride, void* o, int64_t ldo, int64_t o_stride, int64_t q_rows, int64_t kv_rows,
                int64_t batch, int64_t heads, float* lse = nullptr) {
    AttentionArgs a;
    a.q = q;
    a.ldq = ldq;
    a.q_batch_stride = q_stride;
    a.k = kv;
    a.v = At(kv, v_offset);
    a.ldk = a.ldv = ldkv;
    a.k_batch_stride = a.v_batch_stride = kv_stride;
    a.o = o;
    a.ldo = ldo;
    a.o_batch_stride = o_stride;
    a.q_rows = q_rows;
    a.kv_rows = kv_rows;
    a.batch = static_cast<int>(batch);
    a.heads = static_cast<int>(heads);
    a.head_dim = static_cast<int>(D);
    a.lse = lse;
    return k->Attention(a);
  }
  // Self/joint attention of a forward: on the projections when nothing stands between, else
  // over this rank's attention-shaped buffers (what the exchange would have delivered).
  Status SelfAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride, void* o, int64_t ldo,
                       int64_t o_stride) {
    if (pipeline || distri_real || distri_in_turn) return BufferedAttention(x, qkv, ld, seq_stride, o, ldo, o_stride);
    if (parallel && sp > 1) return SpAttention(x, qkv, ld, seq_stride, o, ldo, o_stride);
    if (x.direct) {
      return Attend(qkv, ld, seq_stride, At(qkv, x.Hl), x.Hl, ld, seq_stride, o, ldo, o_stride, x.nt + x.ni,
                    x.nt + x.ni, x.b, x.heads_attn);
    }
    const int64_t Ha = static_cast<int64_t>(x.heads_attn) * D;
    DITUNE_ASSIGN_OR_RETURN(void* q, Scratch("attn_q", x.b * x.qa * Ha * eb));
    DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch("attn_kv", x.b * x.kva * 2 * Ha * eb));
    DITUNE_ASSIGN_OR_RETURN(void* out, Scratch("attn_o", x.b * x.qa * Ha * eb));
    return Attend(q, Ha, x.qa * Ha, kv, Ha, 2 * Ha, x.kva * 2 * Ha, out, Ha, x.qa * Ha, x.qa, x.kva, x.b,
                  x.heads_attn);
  }
  // Rows of block i's K/V buffer per sequence: [the whole text (joint, single); the whole image].
  int64_t KvRows(int i, int64_t T, int64_t N) const { return N + (blocks[i].family == BlockFamily::kCross ? 0 : T); }
  // Columns of a K/V buffer row, [k | v]: this rank's heads (tensor parallel, then Ulysses).
  int64_t KvWidth() const { return 2 * H / (work.steady.tp * work.config.ulysses); }

  // The image row of the whole sequence that local row j of the rank with share s holds.
  int64_t GlobalImageRow(int s, int64_t j) const {
    return (j / share_rows) * share_rows * shares + s * share_rows + j % share_rows;
  }
  // Local rows [j0, j0 + n) of share s as runs contiguous in the whole image: one per patch
  // they cross (a patch forward: one; a whole step of a PipeFusion rank: one per patch).
  struct Segment {
    int64_t local = 0, global = 0, rows = 0;
  };
  std::vector<Segment> ImageSegments(int s, int64_t j0, int64_t n) const {
    std::vector<Segment> out;
    for (int64_t j = j0; j < j0 + n;) {
      const int64_t run = std::min(j0 + n - j, share_rows - j % share_rows);
      out.push_back({j, GlobalImageRow(s, j), run});
      j += run;
    }
    return out;
  }
  // Writes the K/V of `b` sequences of share s to their rows of a K/V buffer `dst` (`rows`
  // per sequence, the first Tk of them text; rows of KvWidth() columns, [k | v]). Sequence i
  // of the source starts at src + i src_stride: nt text rows (the prompt's from text_row),
  // then this forward's image rows, [k | v] at the first KvWidth() columns (leading ld_src).
  Status PutKv(void* dst, int64_t rows, int64_t Tk, const void* src, int64_t ld_src, int64_t src_stride, int64_t b,
               int64_t nt, int64_t ni, int s, int64_t text_row) {
    const int64_t w = KvWidth();
    const std::vector<Segment> segs = ImageSegments(s, fwd_row0, ni);
    for (int64_t i = 0; i < b; ++i) {
      const void* seq = At(src, i * src_stride);
      if (nt > 0) DITUNE_RETURN_IF_ERROR(k->Copy(At(dst, (i * rows + text_row) * w), w, seq, ld_src, nt, w));
      for (const Segment& g : segs) {
        DITUNE_RETURN_IF_ERROR(k->Copy(At(dst, (i * rows + Tk + g.global) * w), w,
                                       At(seq, (nt + g.local - fwd_row0) * ld_src), ld_src, g.rows, w));
      }
    }
    return Status::Ok();
  }

  // PipeFusion's and DistriFusion's attention: the forward's fresh K/V rows (this patch's, or
  // this rank's) go into the block's buffer of the whole sequence, and its queries attend over
  // all of it — the rows not computed here are as fresh as the method makes them: PipeFusion's
  // from this step's earlier patches or one step stale, DistriFusion's from the all-gather.
  // Row order in the buffer is [text; image] per sequence (keys need no order, but the
  // gathers need each rank's rows in place). K is stored after its rotary embedding.
  Status BufferedAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride, void* o, int64_t ldo,
                           int64_t o_stride) {
    if (parallel && sp > 1) return BufferedSpAttention(x, qkv, ld, seq_stride, o, ldo, o_stride);
    const int64_t b = x.b, nt = x.nt, ni = x.ni, Hl = x.Hl;
    // Keys per sequence, of which text: the buffer's rows, sized where Generate zeroes it.
    const int64_t rows = KvRows(cur_block, x.T, x.N), Tk = rows - x.N;
    DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch(fmt::format("stale_kv{}", cur_block), b * rows * 2 * Hl * eb));
    auto& pending = kv_pending[static_cast<size_t>(cur_block)];
    if (pending) {
      // The other ranks' rows of the previous step, before this step's land beside them.
      DITUNE_RETURN_IF_ERROR(pending->Wait());
      pending.reset();
    }
    auto put_fresh = [&](void* dst) {
      return PutKv(dst, rows, Tk, At(qkv, Hl), ld, seq_stride, b, nt, ni, seq_index, text_row0);
    };
    if (distri_in_turn && !kv_sync) {
      // One rank's share: the others' rows as the last step left them (the buffer is only
      // read), its own fresh; its fresh rows collect in the next step's buffer.
      DITUNE_ASSIGN_OR_RETURN(void* fresh, Scratch(fmt::format("fresh_kv{}", cur_block), b * rows * 2 * Hl * eb));
      DITUNE_ASSIGN_OR_RETURN(void* view, Scratch("kv_view", b * rows * 2 * Hl * eb));
      DITUNE_RETURN_IF_ERROR(k->Copy(view, 2 * Hl, kv, 2 * Hl, b * rows, 2 * Hl));
      DITUNE_RETURN_IF_ERROR(put_fresh(view));
      DITUNE_RETURN_IF_ERROR(put_fresh(fresh));
      return Attend(qkv, ld, seq_stride, view, Hl, 2 * Hl, rows * 2 * Hl, o, ldo, o_stride, nt + ni, rows, b, Hl / D);
    }
    DITUNE_RETURN_IF_ERROR(put_fresh(kv));
    // DistriFusion: every rank's image rows (and text rows where the text is split; replicated
    // text is fresh everywhere), one in-place all-gather per sequence and region.
    auto gather = [&]() -> StatusOr<std::unique_ptr<Request>> {
      auto group = std::make_unique<RequestGroup>();
      for (int64_t i = 0; i < b; ++i) {
        DITUNE_ASSIGN_OR_RETURN(auto r, distri->IAllGatherInPlace(At(kv, (i * rows + Tk) * 2 * Hl), ni * 2 * Hl));
        group->Add(std::move(r));
        if (nt > 0 && nt < Tk) {
          DITUNE_ASSIGN_OR_RETURN(auto t, distri->IAllGatherInPlace(At(kv, i * rows * 2 * Hl), nt * 2 * Hl));
          group->Add(std::move(t));
        }
      }
      return std::unique_ptr<Request>(std::move(group));
    };
    if (distri_real && kv_sync) {
      DITUNE_ASSIGN_OR_RETURN(auto r, gather());
      DITUNE_RETURN_IF_ERROR(r->Wait());
    }
    DITUNE_RETURN_IF_ERROR(
        Attend(qkv, ld, seq_stride, kv, Hl, 2 * Hl, rows * 2 * Hl, o, ldo, o_stride, nt + ni, rows, b, Hl / D));
    if (distri_real && !kv_sync && kv_gather_after) {
      DITUNE_ASSIGN_OR_RETURN(pending, gather());
    }
    return Status::Ok();
  }

  // Sequence-parallel self/joint attention with real transfers. Per sequence, qkv holds this
  // rank's L = nt + ni rows (its text rows, then its image rows) with q, k, v at columns 0,
  // Hl, 2 Hl. Ulysses trades the sequence sharding for head sharding with an all-to-all;
  // Ring then passes this rank's K/V block around its group, overlapping each shift with the
  // attention over the block at hand, and merges the blocks' results by their log-sum-exp;
  // a second all-to-all returns the outputs to the rows' owners.
  Status SpAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride, void* o, int64_t ldo,
                     int64_t o_stride) {
    const int u = work.config.ulysses, r = work.config.ring;
    const int64_t b = x.b, nt = x.nt, ni = x.ni, L = nt + ni, Hl = x.Hl, Ha = Hl / u;
    const int heads = static_cast<int>(Ha / D);
    if (seq_stride != L * ld || o_stride != L * ldo) {
      return Status::Internal("sequence-parallel attention needs the sequences back to back");
    }
    DITUNE_ASSIGN_OR_RETURN(const Chunks ch, UlyssesIn(qkv, ld, b, L, Hl));
    const void* chunks = ch.data;
    const int64_t ldr = ch.ld, koff = ch.koff, chunk_stride = ch.stride;
    // This rank's keys and values per sequence, [k | v] rows: every chunk's rows; when the text
    // is replicated on every rank (its length does not divide), the text rows only once.
    const bool replicated = nt > 0 && nt == x.T;
    const int64_t kvr = replicated ? nt + u * ni : u * L;
    const int64_t block = b * kvr * 2 * Ha;
    DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch("sp_kv", block * eb));
    for (int64_t i = 0; i < b; ++i) {
      int64_t row = 0;
      for (int j = 0; j < u; ++j) {
        const int64_t skip = replicated && j > 0 ? nt : 0;
        DITUNE_RETURN_IF_ERROR(k->Copy(At(kv, (i * kvr + row) * 2 * Ha), 2 * Ha,
                                       At(chunks, j * chunk_stride + (i * L + skip) * ldr + koff), ldr, L - skip, 2 * Ha));
        row += L - skip;
      }
    }
    // One attention call covers every chunk when there is one sequence (the chunks lie back
    // to back).
    DITUNE_ASSIGN_OR_RETURN(const OutChunks oc, AttentionOut(o, ldo, b, L, Hl));
    void* out = oc.data;
    const int64_t ld_out = oc.ld, out_chunk = oc.stride;
    const int calls = b == 1 ? 1 : u;
    const int64_t q_rows = b == 1 ? u * L : L;
    const int64_t lse_per_call = b * heads * q_rows;
    float *lse = nullptr, *lse2 = nullptr;
    void *out2 = nullptr, *kv_next = nullptr;
    if (r > 1) {
      DITUNE_ASSIGN_OR_RETURN(void* l1, Scratch("sp_lse", calls * lse_per_call * 4));
      DITUNE_ASSIGN_OR_RETURN(void* l2, Scratch("sp_lse2", calls * lse_per_call * 4));
      lse = static_cast<float*>(l1);
      lse2 = static_cast<float*>(l2);
      DITUNE_ASSIGN_OR_RETURN(out2, Scratch("sp_out2", u * b * L * Ha * eb));
      DITUNE_ASSIGN_OR_RETURN(kv_next, Scratch("sp_kv2", block * eb));
    }
    // Every chunk's queries over keys [key0, key0 + keys) of a K/V block.
    auto attend = [&](const void* kvb, int64_t key0, int64_t keys, void* dst, int64_t ld_dst, int64_t dst_chunk,
                      float* l) -> Status {
      for (int c = 0; c < calls; ++c) {
        DITUNE_RETURN_IF_ERROR(Attend(At(chunks, c * chunk_stride), ldr, L * ldr, At(kvb, key0 * 2 * Ha), Ha, 2 * Ha,
                                      kvr * 2 * Ha, At(dst, c * dst_chunk), ld_dst, L * ld_dst, q_rows, keys, b, heads,
                                      l != nullptr ? l + c * lse_per_call : nullptr));
      }
      return Status::Ok();
    };
    const int me = coords[Axis::kRing];
    const void* cur = kv;
    void* nxt = kv_next;
    for (int s = 0; s < r; ++s) {
      std::unique_ptr<Request> shift;
      if (s + 1 < r) {
        const int tag = 31 + ring_tag++ % 1000;
        DITUNE_ASSIGN_OR_RETURN(shift, ring->SendRecv(cur, nxt, block, (me + 1) % r, (me + r - 1) % r, tag));
      }
      // The block that started on ring rank `origin`; replicated text counts on rank 0's only.
      const int origin = (me - s + r) % r;
      const int64_t skip = replicated && origin != 0 ? nt : 0;
      if (s == 0) {
        DITUNE_RETURN_IF_ERROR(attend(cur, skip, kvr - skip, out, ld_out, out_chunk, lse));
      } else {
        DITUNE_RETURN_IF_ERROR(attend(cur, skip, kvr - skip, out2, Ha, b * L * Ha, lse2));
        for (int c = 0; c < calls; ++c) {
          AttentionMergeArgs mg;
          mg.o = At(out, c * out_chunk);
          mg.ldo = ld_out;
          mg.o_batch_stride = L * ld_out;
          mg.lse = lse + c * lse_per_call;
          mg.o2 = At(out2, c * b * L * Ha);
          mg.ldo2 = Ha;
          mg.o2_batch_stride = L * Ha;
          mg.lse2 = lse2 + c * lse_per_call;
          mg.q_rows = q_rows;
          mg.batch = static_cast<int>(b);
          mg.heads = heads;
          mg.head_dim = static_cast<int>(D);
          DITUNE_RETURN_IF_ERROR(k->MergeAttention(mg));
        }
      }
      if (shift) {
        DITUNE_RETURN_IF_ERROR(shift->Wait());
        const void* done = cur;
        cur = nxt;
        nxt = const_cast<void*>(done);
      }
    }
    return u == 1 ? Status::Ok() : UlyssesOut(out, o, ldo, b, L, Hl);
  }

  // The Ulysses exchange into attention: chunk j (j < u) is Ulysses rank j's L rows of every
  // sequence (sequences `stride` apart inside a chunk, L ld apart), q, k and v of this rank's
  // head group at columns 0, koff, 2 koff. Without Ulysses the one chunk is qkv itself.
  struct Chunks {
    const void* data = nullptr;
    int64_t ld = 0, koff = 0, stride = 0;
  };
  StatusOr<Chunks> UlyssesIn(const void* qkv, int64_t ld, int64_t b, int64_t L, int64_t Hl) {
    const int u = work.config.ulysses;
    if (!parallel || u == 1) return Chunks{qkv, ld, Hl, 0};
    const int64_t Ha = Hl / u;
    DITUNE_ASSIGN_OR_RETURN(void* send, Scratch("sp_send", u * b * L * 3 * Ha * eb));
    DITUNE_ASSIGN_OR_RETURN(void* recv, Scratch("sp_recv", u * b * L * 3 * Ha * eb));
    for (int j = 0; j < u; ++j) {
      for (int c = 0; c < 3; ++c) {
        DITUNE_RETURN_IF_ERROR(
            k->Copy(At(send, j * b * L * 3 * Ha + c * Ha), 3 * Ha, At(qkv, c * Hl + j * Ha), ld, b * L, Ha));
      }
    }
    DITUNE_RETURN_IF_ERROR(ulysses->AllToAll(send, recv, b * L * 3 * Ha));
    return Chunks{recv, 3 * Ha, Ha, b * L * 3 * Ha};
  }
  // Where attention writes its outputs, in chunk layout: with Ulysses the buffer for the way
  // back (u chunks of b L rows of Hl / u, `stride` apart); without it o itself.
  struct OutChunks {
    void* data = nullptr;
    int64_t ld = 0, stride = 0;
  };
  StatusOr<OutChunks> AttentionOut(void* o, int64_t ldo, int64_t b, int64_t L, int64_t Hl) {
    const int u = work.config.ulysses;
    if (!parallel || u == 1) return OutChunks{o, ldo, 0};
    DITUNE_ASSIGN_OR_RETURN(void* out, Scratch("sp_out", b * L * Hl * eb));
    return OutChunks{out, Hl / u, b * L * (Hl / u)};
  }
  // The exchange back: each owner's rows of `out` (chunk layout), head group j from rank j,
  // into o (L rows per sequence, leading ldo).
  Status UlyssesOut(const void* out, void* o, int64_t ldo, int64_t b, int64_t L, int64_t Hl) {
    const int u = work.config.ulysses;
    const int64_t Ha = Hl / u;
    DITUNE_ASSIGN_OR_RETURN(void* back, Scratch("sp_send", u * b * L * 3 * Ha * eb));
    DITUNE_RETURN_IF_ERROR(ulysses->AllToAll(out, back, b * L * Ha));
    for (int j = 0; j < u; ++j) {
      DITUNE_RETURN_IF_ERROR(k->Copy(At(o, j * Ha), ldo, At(back, j * b * L * Ha), Ha, b * L, Ha));
    }
    return Status::Ok();
  }

  // PipeFusion's attention with sequence parallelism inside the stage. The patch's rows are
  // split over the sequence-parallel ranks; each rank keeps K/V buffers of the whole
  // sequence for its head group. Ulysses brings its group's rows of the patch for those
  // heads; Ring passes that block of fresh K/V around (each shift overlapping the placement
  // of the block before it), so that every rank of the group holds every fresh row of the
  // patch before its queries attend over the buffer — the same keys at the same places as on
  // one device — and Ulysses takes the outputs back.
  Status BufferedSpAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride, void* o, int64_t ldo,
                             int64_t o_stride) {
    const int u = work.config.ulysses, r = work.config.ring;
    const int64_t b = x.b, nt = x.nt, ni = x.ni, L = nt + ni, Hl = x.Hl, Ha = Hl / u, w = KvWidth();
    const int heads = static_cast<int>(Ha / D);
    if (seq_stride != L * ld || o_stride != L * ldo) {
      return Status::Internal("sequence-parallel attention needs the sequences back to back");
    }
    const int64_t rows = KvRows(cur_block, x.T, x.N), Tk = rows - x.N;
    DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch(fmt::format("stale_kv{}", cur_block), b * rows * w * eb));
    DITUNE_ASSIGN_OR_RETURN(const Chunks ch, UlyssesIn(qkv, ld, b, L, Hl));
    // Text split over the ranks (its length divides) sits at each share's rows; replicated
    // text is the same on every rank, and is written from this rank's rows only.
    const bool replicated = nt > 0 && nt == x.T;
    const int me = coords[Axis::kRing], mine = coords[Axis::kUlysses];
    // Chunk j of the block that started on ring rank `origin` holds share j + u origin.
    auto put = [&](const void* data, int64_t ldd, int64_t stride, int origin) -> Status {
      for (int j = 0; j < u; ++j) {
        const int share = j + u * origin;
        const bool own_text = !replicated || (origin == me && j == mine);
        const int64_t text_row = replicated ? 0 : share * nt;
        // A chunk's sequences lie L rows apart; its text rows, when skipped, are jumped over.
        const int64_t skip = own_text ? 0 : nt;
        DITUNE_RETURN_IF_ERROR(PutKv(kv, rows, Tk, At(data, j * stride + skip * ldd), ldd, L * ldd, b, nt - skip, ni,
                                     share, text_row));
      }
      return Status::Ok();
    };
    DITUNE_RETURN_IF_ERROR(put(At(ch.data, ch.koff), ch.ld, ch.stride, me));
    if (r > 1) {
      // This rank's fresh block, packed [k | v] (u chunks of b L rows), and a second for the shifts.
      const int64_t block = u * b * L * w;
      DITUNE_ASSIGN_OR_RETURN(void* cur, Scratch("pf_ring", block * eb));
      DITUNE_ASSIGN_OR_RETURN(void* nxt, Scratch("pf_ring2", block * eb));
      for (int j = 0; j < u; ++j) {
        DITUNE_RETURN_IF_ERROR(k->Copy(At(cur, j * b * L * w), w, At(ch.data, j * ch.stride + ch.koff), ch.ld, b * L, w));
      }
      int held = me;  // where the block in `cur` started
      for (int step = 1; step < r; ++step) {
        const int tag = 31 + ring_tag++ % 1000;
        DITUNE_ASSIGN_OR_RETURN(auto shift, ring->SendRecv(cur, nxt, block, (me + 1) % r, (me + r - 1) % r, tag));
        if (held != me) DITUNE_RETURN_IF_ERROR(put(cur, w, b * L * w, held));
        DITUNE_RETURN_IF_ERROR(shift->Wait());
        std::swap(cur, nxt);
        held = (me - step + r) % r;
      }
      DITUNE_RETURN_IF_ERROR(put(cur, w, b * L * w, held));
    }
    DITUNE_ASSIGN_OR_RETURN(const OutChunks oc, AttentionOut(o, ldo, b, L, Hl));
    // Every chunk's queries (one call when there is one sequence: the chunks lie back to back).
    const int calls = b == 1 ? 1 : u;
    const int64_t q_rows = b == 1 ? u * L : L;
    for (int c = 0; c < calls; ++c) {
      DITUNE_RETURN_IF_ERROR(Attend(At(ch.data, c * ch.stride), ch.ld, L * ch.ld, kv, Ha, w, rows * w,
                                    At(oc.data, c * oc.stride), oc.ld, L * oc.ld, q_rows, rows, b, heads));
    }
    return u == 1 ? Status::Ok() : UlyssesOut(oc.data, o, ldo, b, L, Hl);
  }
  // Sums a tensor-parallel partial result (rows x cols, packed) over the group.
  Status TpReduce(void* y, int64_t rows, int64_t cols) {
    if (!parallel || work.steady.tp == 1) return Status::Ok();
    return tp->AllReduceSum(y, rows * cols);
  }
  // Query-key norm and rotary embedding of each sequence's rows: text rows at their positions
  // in the prompt, image rows after the whole text at theirs in the image.
  Status Rope(void* qk, int64_t ld, int64_t b, int64_t nt, int64_t ni, int64_t T, int64_t heads) {
    const int64_t L = nt + ni;
    const std::vector<Segment> segs = ImageSegments(seq_index, fwd_row0, ni);
    for (int64_t i = 0; i < b; ++i) {
      if (nt > 0) {
        DITUNE_RETURN_IF_ERROR(k->QkNormRope(At(qk, i * L * ld), ld, nt, static_cast<int>(heads), static_cast<int>(D),
                                             text_row0));
      }
      for (const Segment& g : segs) {
        DITUNE_RETURN_IF_ERROR(k->QkNormRope(At(qk, (i * L + nt + g.local - fwd_row0) * ld), ld, g.rows,
                                             static_cast<int>(heads), static_cast<int>(D), T + g.global));
      }
    }
    return Status::Ok();
  }

  // MLP of `rows` contiguous rows of width `width`: out = act(h W1) W2.
  Status Mlp(const void* h, int64_t rows, int64_t width, int64_t inner, const void* w1, const void* w2, void* out) {
    DITUNE_ASSIGN_OR_RETURN(void* a, Scratch("mlp_a", rows * (gated ? 2 : 1) * inner * eb));
    if (gated) {
      DITUNE_RETURN_IF_ERROR(Mm(h, width, 0, w1, 2 * inner, a, 2 * inner, 0, rows, width, 2 * inner, 1));
      DITUNE_ASSIGN_OR_RETURN(void* g, Scratch("mlp_g", rows * inner * eb));
      DITUNE_RETURN_IF_ERROR(k->Activate(Activation::kSwiGlu, a, 2 * inner, g, inner, rows, inner));
      return Mm(g, inner, 0, w2, width, out, width, 0, rows, inner, width, 1);
    }
    DITUNE_RETURN_IF_ERROR(Mm(h, width, 0, w1, inner, a, inner, 0, rows, width, inner, 1, false, Epilogue::kGelu));
    return Mm(a, inner, 0, w2, width, out, width, 0, rows, inner, width, 1);
  }

  // The residual stream of one forward: text rows (nt x Ht) and image rows (ni x H) of each
  // sequence; one buffer [text; image] per sequence when the widths agree.
  struct Residual {
    void* txt = nullptr;
    int64_t txt_stride = 0;
    void* img = nullptr;
    int64_t img_stride = 0;
    void* seq = nullptr;  // unified only
    int64_t seq_stride = 0;
  };
  StatusOr<Residual> StreamFor(const RankWork& rw) {
    Residual s;
    const int64_t b = rw.batch, nt = HasText() ? rw.txt_tokens : 0, ni = rw.img_tokens;
    if (unified) {
      DITUNE_ASSIGN_OR_RETURN(s.seq, Scratch("x", b * (nt + ni) * H * eb));
      s.seq_stride = s.txt_stride = s.img_stride = (nt + ni) * H;
      s.txt = s.seq;
      s.img = At(s.seq, nt * H);
    } else {
      DITUNE_ASSIGN_OR_RETURN(s.txt, Scratch("x_txt", b * nt * Ht * eb));
      DITUNE_ASSIGN_OR_RETURN(s.img, Scratch("x_img", b * ni * H * eb));
      s.txt_stride = nt * Ht;
      s.img_stride = ni * H;
    }
    return s;
  }
  bool HasText() const {
    for (const auto& bw : blocks) {
      if (bw.family != BlockFamily::kCross) return true;
    }
    return false;
  }

  // ---- blocks ----
  Status Cross(BlockW& bw, const float* mod, const void* xkv, const Dims& x, Residual& s) {
    const int64_t rows = x.b * x.ni, Hl = x.Hl;
    void* X = s.img;  // cross blocks: no text rows, sequences contiguous
    DITUNE_ASSIGN_OR_RETURN(void* h, Scratch("h", rows * H * eb));
    DITUNE_ASSIGN_OR_RETURN(void* qkv, Scratch("qkv", rows * 3 * Hl * eb));
    DITUNE_ASSIGN_OR_RETURN(void* o, Scratch("o", rows * Hl * eb));
    DITUNE_ASSIGN_OR_RETURN(void* y, Scratch("y", rows * H * eb));
    DITUNE_RETURN_IF_ERROR(Norm(X, H, h, H, rows, H, mod, mod + H));
    DITUNE_RETURN_IF_ERROR(Mm(h, H, 0, bw.p("wqkv"), 3 * Hl, qkv, 3 * Hl, 0, rows, H, 3 * Hl, 1));
    DITUNE_RETURN_IF_ERROR(SelfAttention(x, qkv, 3 * Hl, x.ni * 3 * Hl, o, Hl, x.ni * Hl));
    DITUNE_RETURN_IF_ERROR(Mm(o, Hl, 0, bw.p("wo"), H, y, H, 0, rows, Hl, H, 1));
    DITUNE_RETURN_IF_ERROR(TpReduce(y, rows, H));
    DITUNE_RETURN_IF_ERROR(k->GatedResidual(X, H, mod + 2 * H, y, H, rows, H));
    // Cross-attention to the text (every rank holds all of it; K/V computed once per step).
    DITUNE_RETURN_IF_ERROR(Norm(X, H, h, H, rows, H, nullptr, nullptr));
    DITUNE_RETURN_IF_ERROR(Mm(h, H, 0, bw.p("xq"), Hl, qkv, Hl, 0, rows, H, Hl, 1));
    DITUNE_RETURN_IF_ERROR(Attend(qkv, Hl, x.ni * Hl, xkv, Hl, 2 * Hl, x.T * 2 * Hl, o, Hl, x.ni * Hl, x.ni, x.T, x.b,
                                  Hl / D));
    DITUNE_RETURN_IF_ERROR(Mm(o, Hl, 0, bw.p("xo"), H, y, H, 0, rows, Hl, H, 1));
    DITUNE_RETURN_IF_ERROR(TpReduce(y, rows, H));
    DITUNE_RETURN_IF_ERROR(k->GatedResidual(X, H, nullptr, y, H, rows, H));
    DITUNE_RETURN_IF_ERROR(Norm(X, H, h, H, rows, H, mod + 3 * H, mod + 4 * H));
    DITUNE_RETURN_IF_ERROR(Mlp(h, rows, H, x.Ml, bw.p("w1"), bw.p("w2"), y));
    DITUNE_RETURN_IF_ERROR(TpReduce(y, rows, H));
    return k->GatedResidual(X, H, mod + 5 * H, y, H, rows, H);
  }

  Status Joint(BlockW& bw, const float* mod, const float* tmod, const Dims& x, Residual& s) {
    const int64_t b = x.b, ni = x.ni, nt = x.nt, Hl = x.Hl, L = nt + ni;
    const int64_t ldt = unified ? H : Ht;  // the text rows' leading dimension in the stream
    DITUNE_ASSIGN_OR_RETURN(void* hi, Scratch("h", b * ni * H * eb));
    DITUNE_ASSIGN_OR_RETURN(void* ht, Scratch("ht", b * nt * Ht * eb));
    DITUNE_ASSIGN_OR_RETURN(void* qkv, Scratch("qkv", b * L * 3 * Hl * eb));
    DITUNE_ASSIGN_OR_RETURN(void* o, Scratch("o", b * L * Hl * eb));
    DITUNE_ASSIGN_OR_RETURN(void* yi, Scratch("y", b * ni * H * eb));
    DITUNE_ASSIGN_OR_RETURN(void* yt, Scratch("yt", b * nt * Ht * eb));
    for (int64_t i = 0; i < b; ++i) {
      DITUNE_RETURN_IF_ERROR(Norm(At(s.img, i * s.img_stride), H, At(hi, i * ni * H), H, ni, H, mod, mod + H));
      DITUNE_RETURN_IF_ERROR(Norm(At(s.txt, i * s.txt_stride), ldt, At(ht, i * nt * Ht), Ht, nt, Ht, tmod, tmod + Ht));
    }
    // [text; image] rows of each sequence, text first.
    DITUNE_RETURN_IF_ERROR(Mm(ht, Ht, nt * Ht, bw.p("tqkv"), 3 * Hl, qkv, 3 * Hl, L * 3 * Hl, nt, Ht, 3 * Hl, b));
    DITUNE_RETURN_IF_ERROR(Mm(hi, H, ni * H, bw.p("wqkv"), 3 * Hl, At(qkv, nt * 3 * Hl), 3 * Hl, L * 3 * Hl, ni, H,
                              3 * Hl, b));
    if (extras) DITUNE_RETURN_IF_ERROR(Rope(qkv, 3 * Hl, b, nt, ni, x.T, Hl / D));
    DITUNE_RETURN_IF_ERROR(SelfAttention(x, qkv, 3 * Hl, L * 3 * Hl, o, Hl, L * Hl));
    DITUNE_RETURN_IF_ERROR(Mm(At(o, nt * Hl), Hl, L * Hl, bw.p("wo"), H, yi, H, ni * H, ni, Hl, H, b));
    DITUNE_RETURN_IF_ERROR(Mm(o, Hl, L * Hl, bw.p("to"), Ht, yt, Ht, nt * Ht, nt, Hl, Ht, b));
    DITUNE_RETURN_IF_ERROR(TpReduce(yi, b * ni, H));
    DITUNE_RETURN_IF_ERROR(TpReduce(yt, b * nt, Ht));
    for (int64_t i = 0; i < b; ++i) {
      DITUNE_RETURN_IF_ERROR(k->GatedResidual(At(s.img, i * s.img_stride), H, mod + 2 * H, At(yi, i * ni * H), H, ni, H));
      DITUNE_RETURN_IF_ERROR(
          k->GatedResidual(At(s.txt, i * s.txt_stride), ldt, tmod + 2 * Ht, At(yt, i * nt * Ht), Ht, nt, Ht));
    }
    for (int64_t i = 0; i < b; ++i) {
      DITUNE_RETURN_IF_ERROR(Norm(At(s.img, i * s.img_stride), H, At(hi, i * ni * H), H, ni, H, mod + 3 * H, mod + 4 * H));
      DITUNE_RETURN_IF_ERROR(
          Norm(At(s.txt, i * s.txt_stride), ldt, At(ht, i * nt * Ht), Ht, nt, Ht, tmod + 3 * Ht, tmod + 4 * Ht));
    }
    DITUNE_RETURN_IF_ERROR(Mlp(hi, b * ni, H, x.Ml, bw.p("w1"), bw.p("w2"), yi));
    DITUNE_RETURN_IF_ERROR(Mlp(ht, b * nt, Ht, x.Mtl, bw.p("t1"), bw.p("t2"), yt));
    DITUNE_RETURN_IF_ERROR(TpReduce(yi, b * ni, H));
    DITUNE_RETURN_IF_ERROR(TpReduce(yt, b * nt, Ht));
    for (int64_t i = 0; i < b; ++i) {
      DITUNE_RETURN_IF_ERROR(k->GatedResidual(At(s.img, i * s.img_stride), H, mod + 5 * H, At(yi, i * ni * H), H, ni, H));
      DITUNE_RETURN_IF_ERROR(
          k->GatedResidual(At(s.txt, i * s.txt_stride), ldt, tmod + 5 * Ht, At(yt, i * nt * Ht), Ht, nt, Ht));
    }
    return Status::Ok();
  }

  Status Single(BlockW& bw, const float* mod, const Dims& x, Residual& s) {
    const int64_t L = x.nt + x.ni, rows = x.b * L, Hl = x.Hl, Ml = x.Ml;
    const int64_t W1 = 3 * Hl + (gated ? 2 : 1) * Ml;  // [q | k | v | mlp-in]
    DITUNE_ASSIGN_OR_RETURN(void* h, Scratch("h", rows * H * eb));
    DITUNE_ASSIGN_OR_RETURN(void* qkvm, Scratch("qkvm", rows * W1 * eb));
    DITUNE_ASSIGN_OR_RETURN(void* o, Scratch("o", rows * Hl * eb));
    DITUNE_ASSIGN_OR_RETURN(void* y, Scratch("y", rows * H * eb));
    DITUNE_RETURN_IF_ERROR(Norm(s.seq, H, h, H, rows, H, mod, mod + H));
    DITUNE_RETURN_IF_ERROR(Mm(h, H, 0, bw.p("wqkv1"), W1, qkvm, W1, 0, rows, H, W1, 1));
    const void* act = At(qkvm, 3 * Hl);
    int64_t ld_act = W1;
    if (gated) {
      DITUNE_ASSIGN_OR_RETURN(void* g, Scratch("mlp_g", rows * Ml * eb));
      DITUNE_RETURN_IF_ERROR(k->Activate(Activation::kSwiGlu, At(qkvm, 3 * Hl), W1, g, Ml, rows, Ml));
      act = g;
      ld_act = Ml;
    } else {
      DITUNE_RETURN_IF_ERROR(k->Activate(Activation::kGelu, At(qkvm, 3 * Hl), W1, At(qkvm, 3 * Hl), W1, rows, Ml));
    }
    if (extras) DITUNE_RETURN_IF_ERROR(Rope(qkvm, W1, x.b, x.nt, x.ni, x.T, Hl / D));
    DITUNE_RETURN_IF_ERROR(SelfAttention(x, qkvm, W1, L * W1, o, Hl, L * Hl));
    DITUNE_RETURN_IF_ERROR(Mm(o, Hl, 0, bw.p("oa"), H, y, H, 0, rows, Hl, H, 1));
    DITUNE_RETURN_IF_ERROR(Mm(act, ld_act, 0, bw.p("om"), H, y, H, 0, rows, Ml, H, 1, /*accumulate=*/true));
    DITUNE_RETURN_IF_ERROR(TpReduce(y, rows, H));
    return k->GatedResidual(s.seq, H, mod + 2 * H, y, H, rows, H);
  }

  // A patch's activations to the next stage (send) or from the previous one: the text rows
  // (where the patch has them) and the image rows of every sequence. A receive completes
  // before it returns. A send must not wait for its receiver, which may itself be waiting for
  // this rank's next receive (the latent rows back from the last stage): it copies the rows
  // to the send buffers of `slot` (the patch) and stays in flight.
  Status Handoff(const Residual& st, int64_t b, int64_t nt, int64_t ni, bool send, int slot) {
    struct Part {
      void* data;
      int64_t rows, cols;
    };
    std::vector<Part> parts;
    if (unified) {
      parts.push_back({st.seq != nullptr ? st.seq : st.img, b * (nt + ni), H});
    } else {
      if (nt > 0) parts.push_back({st.txt, b * nt, Ht});
      parts.push_back({st.img, b * ni, H});
    }
    if (!send) {
      for (const Part& part : parts) {
        DITUNE_ASSIGN_OR_RETURN(auto r, pp_fwd->Irecv(part.data, part.rows * part.cols, stage - 1, kTagActivation));
        DITUNE_RETURN_IF_ERROR(r->Wait());
      }
      return Status::Ok();
    }
    DITUNE_RETURN_IF_ERROR(Settle(&fwd_pending, slot));
    auto group = std::make_unique<RequestGroup>();
    for (size_t i = 0; i < parts.size(); ++i) {
      const Part& part = parts[i];
      DITUNE_ASSIGN_OR_RETURN(void* buf, Scratch(fmt::format("handoff{}_{}", slot, i), part.rows * part.cols * eb));
      DITUNE_RETURN_IF_ERROR(k->Copy(buf, part.cols, part.data, part.cols, part.rows, part.cols));
      DITUNE_ASSIGN_OR_RETURN(auto r, pp_fwd->Isend(buf, part.rows * part.cols, stage + 1, kTagActivation));
      group->Add(std::move(r));
    }
    fwd_pending[static_cast<size_t>(slot)] = std::move(group);
    return Status::Ok();
  }
  // Completes the send in flight from `slot` (all slots: -1) before its buffer is rewritten.
  // Deadlock-free: a slot is reused a step later, after this rank has received what its
  // receiver could only produce once it had taken the slot's data.
  static Status Settle(std::vector<std::unique_ptr<Request>>* pending, int slot) {
    for (size_t i = 0; i < pending->size(); ++i) {
      auto& r = (*pending)[i];
      if (r == nullptr || (slot >= 0 && i != static_cast<size_t>(slot))) continue;
      DITUNE_RETURN_IF_ERROR(r->Wait());
      r.reset();
    }
    return Status::Ok();
  }

  // Host seconds in this engine's transfers so far.
  double CommSeconds() const {
    double total = 0;
    for (const auto* g : {ulysses.get(), ring.get(), tp.get(), cfg.get(), distri.get(), pp_fwd.get(), pp_back.get()}) {
      if (g != nullptr) total += g->seconds();
    }
    return total;
  }

  // Every prompt's whole latent on every rank, from each rank's rows of its prompts.
  StatusOr<std::vector<Mat>> GatherLatents(const float* xf, int64_t N, int64_t R, int P) {
    const int64_t mine_n = static_cast<int64_t>(P) * R * lat;
    std::vector<float> mine(static_cast<size_t>(mine_n)), all(static_cast<size_t>(mine_n * world->size()));
    DITUNE_RETURN_IF_ERROR(k->DownloadF32(xf, mine.data(), mine_n));
    DITUNE_RETURN_IF_ERROR(world->host()->AllGather(mine.data(), all.data(), static_cast<size_t>(mine_n)));
    DITUNE_ASSIGN_OR_RETURN(RankLayout layout, RankLayout::Create(work.config, work.config.world_size()));
    std::vector<Mat> latents(static_cast<size_t>(wl.batch), Mat::Zero(N, lat));
    for (int q = 0; q < world->size(); ++q) {
      const RankCoords c = layout.CoordsOf(q);
      if (c[Axis::kPipeFusion] != stages - 1) continue;  // the last stage holds the latents
      const int share = c[Axis::kSp] + sp * c[Axis::kDistriFusion];
      for (int i = 0; i < P; ++i) {
        const float* rows = all.data() + (q * static_cast<int64_t>(P) + i) * R * lat;
        for (const Segment& g : ImageSegments(share, 0, R)) {
          latents.at(static_cast<size_t>(c[Axis::kDp] * P + i)).middleRows(g.global, g.rows) =
              Eigen::Map<const Mat>(rows + g.local * lat, g.rows, lat);
        }
      }
    }
    return latents;
  }

  // ---- the loop ----
  StatusOr<EngineResult> Generate() {
    DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(*m, wl));
    const int S = wl.steps;
    const int P = work.prompts, B = work.branches;
    const int64_t T = tokens.text_tokens;
    const bool first_stage = work.first_block == 0;
    const bool last_stage = work.first_block + work.blocks == m->num_blocks();
    // This rank's image rows per step (every patch's rows).
    const int64_t R = work.warmup.img_tokens;
    const int64_t bmax = static_cast<int64_t>(P) * B;
    // Data parallelism: this rank's prompts. CFG parallelism: its one branch (1 = the
    // unconditional one).
    const int first_prompt = coords[Axis::kDp] * P;
    const int cfg_branch = work.config.cfg == 2 ? coords[Axis::kCfg] : 0;
    // Prompt embeddings of every sequence (prompt i, branch j at i B + j) (model_inputs.h).
    DITUNE_ASSIGN_OR_RETURN(void* emb, Scratch("emb", bmax * T * m->text_hidden * eb));
    for (int i = 0; i < P; ++i) {
      for (int j = 0; j < B; ++j) {
        const Mat e = PromptEmbedding(*m, opt.seed, first_prompt + i, (B == 2 ? j : cfg_branch) == 1);
        DITUNE_RETURN_IF_ERROR(k->Upload(e.data(), At(emb, (i * B + j) * T * m->text_hidden), e.size()));
      }
    }
    // Initial noise: the rows of the whole latent this rank holds (exact runs: all of it).
    DITUNE_ASSIGN_OR_RETURN(auto xf_buf, d->Alloc(P * R * lat * 4));
    auto* xf = static_cast<float*>(xf_buf->data());
    DITUNE_ASSIGN_OR_RETURN(void* xb, Scratch("latent_act", P * R * lat * eb));
    row_patches = pipeline ? work.steady.patches : 1;
    shares = sp * work.config.distrifusion;
    share_rows = R / row_patches;
    for (int i = 0; i < P; ++i) {
      const Mat full = RandomMat(tokens.image_tokens(), lat, 1.0f, opt.seed, 1000 + static_cast<uint64_t>(first_prompt + i));
      for (const Segment& g : ImageSegments(seq_index, 0, R)) {
        const float* rows = full.data() + g.global * lat;
        DITUNE_RETURN_IF_ERROR(k->UploadF32(rows, xf + (i * R + g.local) * lat, g.rows * lat));
        DITUNE_RETURN_IF_ERROR(k->Upload(rows, At(xb, (i * R + g.local) * lat), g.rows * lat));
      }
    }
    // Conditioning of every step, computed before the loop (the host never stalls the device).
    DITUNE_ASSIGN_OR_RETURN(void* cond, Scratch("cond", S * H * eb));
    for (int s = 0; s < S; ++s) {
      const float sigma = 1.0f - static_cast<float>(s) / S;
      const Vec c = inputs->Conditioning(sigma * 1000.0f);
      DITUNE_RETURN_IF_ERROR(k->Upload(c.data(), At(cond, s * H), H));
    }
    DITUNE_ASSIGN_OR_RETURN(void* pred, Scratch("pred", bmax * R * lat * eb));
    kv_pending.clear();
    fwd_pending.clear();
    back_pending.clear();
    fwd_pending.resize(static_cast<size_t>(std::max(1, work.steady.patches)));
    back_pending.resize(fwd_pending.size());
    kv_pending.resize(static_cast<size_t>(work.blocks));
    if (pipeline || distri_real || distri_in_turn) {
      // The K/V buffers start empty every generation (warm-up steps fill them).
      for (int i = 0; i < work.blocks; ++i) {
        const int64_t n_kv = bmax * KvRows(i, T, tokens.image_tokens()) * KvWidth();
        DITUNE_ASSIGN_OR_RETURN(void* kv, Scratch(fmt::format("stale_kv{}", i), n_kv * eb));
        DITUNE_RETURN_IF_ERROR(k->Zero(kv, n_kv));
      }
    }
    const bool cfg_gather = parallel && work.config.cfg == 2;
    void* pred_all = nullptr;
    if (cfg_gather) {
      DITUNE_ASSIGN_OR_RETURN(pred_all, Scratch("pred_all", 2 * bmax * R * lat * eb));
    }
    DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());

    EngineResult out;
    const double comm_before = CommSeconds();
    std::vector<std::unique_ptr<Event>> marks;
    DITUNE_ASSIGN_OR_RETURN(auto start, d->stream()->Record());
    for (int s = 0; s < S; ++s) {
      const bool warm = s < work.warmup_steps;
      const RankWork& rw = warm ? work.warmup : work.steady;
      const int patches = warm ? 1 : rw.patches;
      const int64_t b = rw.batch, ni = rw.img_tokens;
      kv_sync = warm;
      kv_gather_after = s + 1 < S;
      const void* c = At(cond, s * H);
      // Modulation of every block and the final layer for this step (shared by all sequences).
      const int64_t per_block = 6 * H + 6 * Ht;
      DITUNE_ASSIGN_OR_RETURN(void* mods_v, Scratch("mods", (work.blocks * per_block + 2 * H) * 4));
      auto* mods = static_cast<float*>(mods_v);
      for (int i = 0; i < work.blocks; ++i) {
        auto& bw = blocks[i];
        float* mb = mods + i * per_block;
        const int64_t n = bw.family == BlockFamily::kSingle ? 3 * H : 6 * H;
        DITUNE_RETURN_IF_ERROR(Modulation(c, bw.p("mod"), n, mb));
        if (bw.family == BlockFamily::kJoint) DITUNE_RETURN_IF_ERROR(Modulation(c, bw.p("tmod"), 6 * Ht, mb + 6 * H));
      }
      float* fmod = mods + work.blocks * per_block;
      if (last_stage) DITUNE_RETURN_IF_ERROR(Modulation(c, io.at("fmod")->data(), 2 * H, fmod));
      // Text embedding of every sequence, and the cross blocks' text K/V, once per step.
      DITUNE_ASSIGN_OR_RETURN(void* ctx, Scratch("ctx", b * T * Ht * eb));
      DITUNE_RETURN_IF_ERROR(Mm(emb, m->text_hidden, 0, io.at("text")->data(), Ht, ctx, Ht, 0, b * T, m->text_hidden, Ht, 1));
      std::vector<void*> xkv(work.blocks, nullptr);
      for (int i = 0; i < work.blocks; ++i) {
        if (blocks[i].family != BlockFamily::kCross) continue;
        const int64_t Hl = H / rw.tp;
        DITUNE_ASSIGN_OR_RETURN(xkv[i], Scratch(fmt::format("xkv{}", i), b * T * 2 * Hl * eb));
        DITUNE_RETURN_IF_ERROR(Mm(ctx, Ht, 0, blocks[i].p("xkv"), 2 * Hl, xkv[i], 2 * Hl, 0, b * T, Ht, 2 * Hl, 1));
      }
      for (int p = 0; p < patches; ++p) {
        // This forward's rows: its share of the text (all of it when the text is not split)
        // and of the image (sequence-parallel or DistriFusion index, then patch). PipeFusion's
        // patches carry no text but the first, which carries all of it; the later patches
        // attend over the text K/V the first left in the buffers (xDiT's scheme).
        RankWork fw = rw;
        if (pipeline && !warm) fw.txt_tokens = p == 0 ? work.warmup.txt_tokens : 0;
        const int64_t nt = HasText() ? fw.txt_tokens : 0;
        DITUNE_ASSIGN_OR_RETURN(Residual st, StreamFor(fw));
        text_row0 = nt < T ? (distri_in_turn ? p : seq_index) * nt : 0;
        fwd_row0 = p * ni;
        for (int64_t i = 0; i < b && nt > 0 && (first_stage || !pipeline); ++i) {
          DITUNE_RETURN_IF_ERROR(
              k->Copy(At(st.txt, i * st.txt_stride), unified ? H : Ht, At(ctx, (i * T + text_row0) * Ht), Ht, nt, Ht));
        }
        if (pipeline && first_stage && stages > 1 && s > 0) {
          // The latest latent rows from the last stage: the whole latent after a warm-up
          // step (received before the first patch), else this patch's rows.
          const bool prev_warm = s - 1 < work.warmup_steps;
          if (!prev_warm || p == 0) {
            const int64_t row0 = prev_warm ? 0 : p * ni, rows = prev_warm ? R : ni;
            for (int i = 0; i < P; ++i) {
              DITUNE_ASSIGN_OR_RETURN(auto r, pp_back->Irecv(At(xb, i * R * lat + row0 * lat), rows * lat, stages - 1,
                                                             kTagLatent));
              DITUNE_RETURN_IF_ERROR(r->Wait());
            }
          }
        }
        if (pipeline && !first_stage) {
          // This patch's activations from the previous stage.
          DITUNE_RETURN_IF_ERROR(Handoff(st, b, nt, ni, false, p));
        }
        if (first_stage) {
          // Patch embedding of this forward's rows, each branch of a prompt from the same latent.
          for (int j = 0; j < B; ++j) {
            DITUNE_RETURN_IF_ERROR(Mm(At(xb, p * ni * lat), lat, R * lat, io.at("patch")->data(), H,
                                      At(st.img, j * st.img_stride), H, B * st.img_stride, ni, lat, H, P));
          }
        }
        for (int i = 0; i < work.blocks; ++i) {
          auto& bw = blocks[i];
          const Dims x = DimsOf(fw, bw.family);
          float* mb = mods + i * per_block;
          cur_block = i;
          switch (bw.family) {
            case BlockFamily::kCross: DITUNE_RETURN_IF_ERROR(Cross(bw, mb, xkv[i], x, st)); break;
            case BlockFamily::kJoint: DITUNE_RETURN_IF_ERROR(Joint(bw, mb, mb + 6 * H, x, st)); break;
            case BlockFamily::kSingle: DITUNE_RETURN_IF_ERROR(Single(bw, mb, x, st)); break;
            case BlockFamily::kSpatial:
            case BlockFamily::kTemporal:
              return Status::NotSupported("the engine has no spatial or temporal blocks");
          }
        }
        if (last_stage) {
          DITUNE_ASSIGN_OR_RETURN(void* h, Scratch("h", b * ni * H * eb));
          for (int64_t i = 0; i < b; ++i) {
            DITUNE_RETURN_IF_ERROR(Norm(At(st.img, i * st.img_stride), H, At(h, i * ni * H), H, ni, H, fmod, fmod + H));
          }
          DITUNE_RETURN_IF_ERROR(Mm(h, H, ni * H, io.at("out")->data(), lat, At(pred, p * ni * lat), lat, R * lat, ni, H,
                                    lat, b));
        }
        if (pipeline && !last_stage) DITUNE_RETURN_IF_ERROR(Handoff(st, b, nt, ni, true, p));
        if (pipeline && last_stage) {
          // The Euler step of this patch's rows as soon as they are done, then (several
          // stages, more steps to come) the rows back to the first stage.
          const float sigma = 1.0f - static_cast<float>(s) / S, next = 1.0f - static_cast<float>(s + 1) / S;
          const int64_t row0 = p * ni;
          // The rows sent back last step must have left before they change (after a warm-up
          // step: the whole latent, sent from slot 0).
          const bool after_warm = s > 0 && s - 1 < work.warmup_steps;
          DITUNE_RETURN_IF_ERROR(Settle(&back_pending, warm || after_warm ? -1 : p));
          for (int i = 0; i < P; ++i) {
            float* xi = xf + i * R * lat + row0 * lat;
            void* xbi = At(xb, i * R * lat + row0 * lat);
            if (cfg_gather) {
              DITUNE_RETURN_IF_ERROR(cfg->AllGather(At(pred, i * R * lat + row0 * lat), pred_all, ni * lat));
              DITUNE_RETURN_IF_ERROR(
                  k->EulerStep(xi, xbi, pred_all, ni * lat, ni * lat, true, opt.guidance, next - sigma, 1, ni * lat));
            } else {
              const void* cond_pred = At(pred, (i * B) * R * lat + row0 * lat);  // the unconditional R lat after it
              DITUNE_RETURN_IF_ERROR(k->EulerStep(xi, xbi, cond_pred, B * R * lat, R * lat, B == 2, opt.guidance,
                                                  next - sigma, 1, ni * lat));
            }
          }
          if (stages > 1 && s + 1 < S) {
            auto group = std::make_unique<RequestGroup>();
            for (int i = 0; i < P; ++i) {
              DITUNE_ASSIGN_OR_RETURN(auto r, pp_back->Isend(At(xb, i * R * lat + row0 * lat), ni * lat, 0, kTagLatent));
              group->Add(std::move(r));
            }
            back_pending[static_cast<size_t>(p)] = std::move(group);
          }
        }
      }
      if (last_stage && !pipeline) {
        const float sigma = 1.0f - static_cast<float>(s) / S, next = 1.0f - static_cast<float>(s + 1) / S;
        if (cfg_gather) {
          // The branches of each prompt from the CFG group: [conditional of every prompt; unconditional].
          DITUNE_RETURN_IF_ERROR(cfg->AllGather(pred, pred_all, P * R * lat));
          DITUNE_RETURN_IF_ERROR(k->EulerStep(xf, xb, pred_all, R * lat, P * R * lat, true, opt.guidance, next - sigma,
                                              P, R * lat));
        } else {
          DITUNE_RETURN_IF_ERROR(k->EulerStep(xf, xb, pred, B * R * lat, R * lat, B == 2, opt.guidance, next - sigma,
                                              P, R * lat));
        }
      }
      if (distri_in_turn && !warm) {
        // Every share's fresh rows become the next step's stale ones.
        for (int i = 0; i < work.blocks; ++i) {
          std::swap(scratch[fmt::format("stale_kv{}", i)], scratch[fmt::format("fresh_kv{}", i)]);
        }
      }
      DITUNE_ASSIGN_OR_RETURN(auto mark, d->stream()->Record());
      marks.push_back(std::move(mark));
    }
    DITUNE_RETURN_IF_ERROR(Settle(&fwd_pending, -1));
    DITUNE_RETURN_IF_ERROR(Settle(&back_pending, -1));
    DITUNE_RETURN_IF_ERROR(d->stream()->Synchronize());
    const Event* prev = start.get();
    for (const auto& e : marks) {
      DITUNE_ASSIGN_OR_RETURN(double sec, e->SecondsSince(*prev));
      out.step_seconds.push_back(sec);
      prev = e.get();
    }
    DITUNE_ASSIGN_OR_RETURN(out.dit_seconds, marks.back()->SecondsSince(*start));
    if (exact && !parallel) {
      for (int i = 0; i < P; ++i) {
        Mat x(R, lat);
        DITUNE_RETURN_IF_ERROR(k->DownloadF32(xf + i * R * lat, x.data(), x.size()));
        out.latents.push_back(std::move(x));
      }
    } else if (parallel) {
      DITUNE_ASSIGN_OR_RETURN(out.latents, GatherLatents(xf, tokens.image_tokens(), R, P));
    }
    out.comm_seconds = CommSeconds() - comm_before;
    out.peak_bytes = d->peak_bytes();
    return out;
  }
};

StatusOr<std::unique_ptr<DitEngine>> DitEngine::Create(const ModelSpec& model, const Workload& workload,
                                                       const EngineWork& work, Kernels* kernels,
                                                       const EngineOptions& options, Comm* world) {
  if (kernels == nullptr) return Status::InvalidArgument("the engine needs kernels");
  DITUNE_RETURN_IF_ERROR(ExecutorRunsModel(model));
  if (work.blocks < 1) return Status::InvalidArgument("the engine needs at least one block");
  const ParallelConfig& c = work.config;
  const int n = c.world_size();
  const bool parallel = world != nullptr && n > 1;
  if (world != nullptr && world->size() != n) {
    return Status::InvalidArgument(
        fmt::format("'{}' needs {} ranks; {} were launched", Label(c), n, world->size()));
  }
  if (parallel && world->rank() != work.rank) {
    return Status::Internal(fmt::format("engine work of rank {} on world rank {}", work.rank, world->rank()));
  }
  // PipeFusion for real (every block family; with sequence and tensor parallelism inside the
  // stages, CFG and data parallelism beside them) on one device or across the plan's ranks;
  // a rank of a multi-rank plan without a communicator is emulated.
  const bool pipelined = c.pipefusion > 1 || c.patches > 1;
  const bool real_pipeline = pipelined && (parallel || n == 1);
  std::unique_ptr<DitEngine> e(new DitEngine());
  e->impl_ = std::make_unique<Impl>();
  Impl& i = *e->impl_;
  i.m = &model;
  i.wl = workload;
  i.work = work;
  if (options.distrifusion_in_turn) {
    if (world != nullptr || c.distrifusion < 2) {
      return Status::InvalidArgument("computing DistriFusion's shares in turn needs a DistriFusion plan and no communicator");
    }
    // The whole sequence on this device: synchronous steps run it at once; the others run
    // each rank's share (its RankWork) as a patch.
    DITUNE_ASSIGN_OR_RETURN(TokenGeometry tokens, ComputeTokenGeometry(model, workload));
    i.work.warmup = ComputeRankWork(model, tokens, workload, ParallelConfig{});
    i.work.steady.patches = c.distrifusion;
    i.distri_in_turn = true;
  }
  i.k = kernels;
  i.eb = kernels->element_bytes();
  i.d = kernels->device();
  i.opt = options;
  i.extras = options.architecture_extras;
  if (model.head_dim * model.heads != model.hidden) {
    return Status::NotSupported(fmt::format("{}: heads x head_dim != hidden", model.id));
  }
  DITUNE_ASSIGN_OR_RETURN(RankLayout layout, RankLayout::Create(c, n));
  i.coords = layout.CoordsOf(work.rank);
  i.sp = c.sp();
  i.pipeline = real_pipeline && c.distrifusion == 1;
  i.distri_real = parallel && c.distrifusion > 1;
  i.seq_index = i.coords[Axis::kSp] + i.sp * i.coords[Axis::kDistriFusion];
  i.stages = c.pipefusion;
  i.stage = i.coords[Axis::kPipeFusion];
  i.exact = work.exact || parallel || i.pipeline || i.distri_in_turn;
  if (parallel) {
    i.parallel = true;
    i.world = world;
    // Every rank splits every axis in the same order (collective).
    auto group = [&](Axis a) -> StatusOr<std::unique_ptr<DeviceComm>> {
      DITUNE_ASSIGN_OR_RETURN(auto g, world->Split(layout.GroupOf(work.rank, a)));
      auto dc = std::make_unique<DeviceComm>(g.get(), kernels);
      i.owned_groups.push_back(std::move(g));
      return dc;
    };
    DITUNE_ASSIGN_OR_RETURN(i.ulysses, group(Axis::kUlysses));
    DITUNE_ASSIGN_OR_RETURN(i.ring, group(Axis::kRing));
    DITUNE_ASSIGN_OR_RETURN(i.tp, group(Axis::kTp));
    DITUNE_ASSIGN_OR_RETURN(i.cfg, group(Axis::kCfg));
    DITUNE_ASSIGN_OR_RETURN(i.distri, group(Axis::kDistriFusion));
    // Two communicators over the stages, one per direction, so that hand-offs forward and
    // latents back never queue behind each other (NCCL runs a communicator's transfers in
    // order on its stream).
    DITUNE_ASSIGN_OR_RETURN(i.pp_fwd, group(Axis::kPipeFusion));
    DITUNE_ASSIGN_OR_RETURN(i.pp_back, group(Axis::kPipeFusion));
  }
  DITUNE_RETURN_IF_ERROR(i.Load());
  return e;
}

DitEngine::~DitEngine() = default;

StatusOr<EngineResult> DitEngine::Generate() { return impl_->Generate(); }

int64_t DitEngine::weight_bytes() const { return impl_->weight_bytes; }

int64_t EngineBytes(const ModelSpec& model, const Workload& workload, const EngineWork& work,
                    const EngineOptions& options, int64_t element_bytes) {
  const double H = model.hidden, Ht = model.text_stream_hidden, M = model.mlp_hidden;
  const double tp = work.steady.tp;
  const double up = options.architecture_extras && model.mlp_gated ? 2 : 1;
  double weights = 0;
  for (int b = work.first_block; b < work.first_block + work.blocks; ++b) {
    switch (model.family_of(b)) {
      case BlockFamily::kCross: weights += 6 * H * H + (3 * H * H + 2 * H * H + Ht * 2 * H + up * H * M + M * H) / tp; break;
      case BlockFamily::kJoint:
        weights += 6 * H * H + 6 * H * Ht +
                   (3 * H * H + 3 * Ht * H + H * H + H * Ht + up * H * M + M * H + (up + 1) * M * Ht) / tp;
        break;
      case BlockFamily::kSingle: weights += 3 * H * H + (H * (3 * H + up * M) + H * H + M * H) / tp; break;
      case BlockFamily::kSpatial:
      case BlockFamily::kTemporal:
        break;  // ExecutorRunsModel refuses these models
    }
  }
  const double lat = static_cast<double>(model.latent_channels) * model.patch_spatial * model.patch_spatial *
                     model.patch_temporal;
  weights += 2 * lat * H + 2 * H * H + static_cast<double>(model.text_hidden) * Ht;
  // Activations of the largest forward: the residual stream, the norm output, the fused
  // projections, attention output, MLP intermediate and block output; the prompt
  // embeddings and projected text; attention-shaped buffers where an exchange stands
  // between; the cross blocks' text K/V; latents and predictions.
  const RankWork& rw = work.warmup.img_tokens >= work.steady.img_tokens ? work.warmup : work.steady;
  const double b = rw.batch, T = static_cast<double>(rw.seq_txt_tokens);
  const double rows = b * static_cast<double>(rw.img_tokens + rw.txt_tokens);
  const double Hl = H / tp, Ml = M / tp;
  double act = rows * (3 * H + 3 * Hl + up * Ml + Hl + up * Ml) + b * T * (model.text_hidden + Ht);
  const double Ha = static_cast<double>(rw.heads) * model.head_dim;
  const double qa = static_cast<double>(rw.ulysses) * (rw.img_tokens + rw.txt_tokens);
  act += b * (2 * qa + 2 * static_cast<double>(rw.seq_img_tokens + rw.seq_txt_tokens)) * Ha;
  const bool distri = work.config.distrifusion > 1;
  const bool buffered = work.steady.patches > 1 || distri;
  if (rw.seq_img_tokens > rw.img_tokens * rw.patches && !distri) {
    // Real sequence-parallel exchanges: send, receive and output chunks; two K/V blocks for
    // Ring (PipeFusion's: the fresh rows only).
    const double kv_block = buffered ? qa * 2 : 2 * static_cast<double>(rw.seq_img_tokens + rw.seq_txt_tokens);
    act += b * qa * 8 * Ha + 2 * b * kv_block * Ha;
  }
  act += work.blocks * b * T * 2 * Hl;
  if (work.config.pipefusion > 1) {
    // Hand-offs in flight: a warm-up step's whole residual, then one slot per patch.
    act += 2 * rows * H;
  }
  if (buffered) {
    // PipeFusion's and DistriFusion's K/V buffers: the whole sequence's keys and values per
    // block (the text's too in joint and single blocks), for this rank's heads.
    for (int i = work.first_block; i < work.first_block + work.blocks; ++i) {
      const double kv_rows = static_cast<double>(rw.seq_img_tokens) + (model.family_of(i) == BlockFamily::kCross ? 0 : T);
      act += b * kv_rows * 2 * Ha;
    }
  }
  act += b * static_cast<double>(work.warmup.img_tokens) * lat * (2 + 1 + 1);
  // Loading a tensor-parallel rank's slices draws each whole matrix first, one at a time.
  double transient = 0;
  if (tp > 1) {
    for (int i = work.first_block; i < work.first_block + work.blocks; ++i) {
      const double in = model.family_of(i) == BlockFamily::kSingle ? H * (3 * H + up * M) : std::max(H, Ht) * 3 * H;
      transient = std::max({transient, in, std::max(H, Ht) * up * M, M * H});
    }
  }
  // fp32: every block's modulation vectors of a step, and Ring's log-sum-exps (two sets).
  const double f32 = work.blocks * (6 * H + 6 * Ht) + 2 * H + 2 * b * qa * rw.heads;
  // Each step's conditioning vector.
  const double cond = static_cast<double>(workload.steps) * H;
  return static_cast<int64_t>(static_cast<double>(element_bytes) * (weights + transient + act + cond) + 4 * f32);
}

}  // namespace ditune::exec
