// The DiT engine's one implementation (engine.h), as a folder: this header holds the state of
// one rank's engine and the declarations its files define —
//   weights.cc          the rank's weights and scratch buffers (drawn on the device)
//   kernel_calls.cc     the Kernels calls the blocks are made of (GEMMs, attention, norm, MLP)
//   blocks.cc           the three block families (cross, joint, single) over a forward's shapes
//   ulysses.cc          Ulysses: the all-to-alls between sequence and head sharding
//   ring.cc             Ring (and USP): K/V passed around the ring, merged by log-sum-exp
//   stale_kv.cc         PipeFusion's and DistriFusion's one-step-stale K/V buffers
//   tensor_parallel.cc  tensor parallelism's all-reduce of the partial products
//   pipefusion.cc       PipeFusion's stage hand-offs
//   generate.cc         the denoising loop (CFG and data parallelism: its branches and
//                       prompts), and the engine's creation
//   work.cc             a rank's work under a plan, and the device bytes it needs
// Internal to the engine: nothing outside executor/engine/ includes it.
#ifndef DITUNE_EXECUTOR_ENGINE_ENGINE_IMPL_H_
#define DITUNE_EXECUTOR_ENGINE_ENGINE_IMPL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/rank_layout.h"
#include "executor/device_comm.h"
#include "executor/engine.h"
#include "executor/model_inputs.h"

namespace ditune::exec {

struct DitEngine::Impl {
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
    // Attention runs on the projections themselves (no exchange stands between).
    bool direct = false;
  };

  // The engine's scratch buffers, each allocated on first use and grown as needed (Scratch).
  // Indexed ones (per block, per hand-off slot) take an index beside the name.
  // clang-format off
  enum class Buf {
    // The residual stream of a forward: one buffer of [text; image] rows per sequence where
    // the text stream has the hidden width, else one per stream.
    kResidual, kTextResidual, kImageResidual,
    // A sublayer's modulated LayerNorm output (image, text).
    kNormOut, kTextNormOut,
    // Fused projections: Q, K, V (and a single block's MLP-in); attention output, this
    // rank's heads; a sublayer's output before its gated residual (image, text).
    kQkv, kQkvMlp, kAttnOut, kBlockOut, kTextBlockOut,
    // The MLP's hidden activations (gated: the gate half).
    kMlpIn, kMlpGate,
    // An emulated rank's attention shapes (what an exchange would deliver).
    kAttnQ, kAttnKv, kAttnO,
    // Sequence parallelism: Ulysses' all-to-all send and receive chunks; attention outputs
    // and their log-sum-exps (Ring's partials and merge); Ring's K/V block attended now and
    // the one arriving; the same inside PipeFusion stages (a patch's fresh K/V).
    kSpSend, kSpRecv, kSpOut, kSpOut2, kSpLse, kSpLse2, kSpKv, kSpKv2, kPatchRing, kPatchRing2,
    // Per block: PipeFusion's and DistriFusion's K/V buffers (stale, fresh), a share's view of
    // them with its own rows fresh (in turn), a cross block's K/V of the text.
    kStaleKv, kFreshKv, kKvView, kCrossKv,
    // Per slot and part: PipeFusion's activations in flight.
    kHandoff,
    // The loop's own: prompt embeddings and their projection to the text stream, each step's
    // conditioning, every block's modulation, the latent in act, the prediction, both CFG
    // branches' predictions gathered.
    kPromptEmb, kText, kConditioning, kModulation, kLatentAct, kPred, kPredAll,
  };
  // clang-format on

  // Parts of one hand-off (the text and image residual streams).
  static constexpr int kHandoffParts = 4;

  // Message tags of PipeFusion's hand-offs: activations forward, latent rows back.
  static constexpr int kTagActivation = 21, kTagLatent = 22;

  const ModelSpec* m = nullptr;
  Workload wl;
  EngineWork work;
  Kernels* k = nullptr;
  Device* d = nullptr;
  int64_t eb = 2;  // bytes of an act element (Kernels::element_bytes)
  EngineOptions opt;
  std::unique_ptr<ModelInputs> inputs;  // prompts, conditioning, input and output layers (host)
  bool gated = false;                   // MLPs gated (SwiGLU)
  bool extras = false;
  bool unified = false;  // text and image rows share one residual buffer per sequence
  int64_t H = 0, Ht = 0, M = 0, D = 0, lat = 0;
  RankCoords coords;  // this rank's place in the plan (all zero on one device)
  int sp = 1;         // sequence-parallel degree (Ulysses x Ring)

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
  bool distri_in_turn = false;   // every rank's share in turn on one device (EngineOptions)
  bool kv_sync = false;          // this step gathers before attending
  bool kv_gather_after = false;  // this step refreshes the others' buffers for the next
  std::vector<std::unique_ptr<Request>> kv_pending;  // per block: the gather in flight
  int cur_block = 0;   // the block being computed (index in this rank's blocks)
  bool exact = false;  // this rank ends with the model's output
  int seq_index = 0;   // this rank's share of the sequence (sequence parallel, DistriFusion)
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
  std::map<std::pair<Buf, int>, std::unique_ptr<Buffer>> scratch;
  int64_t weight_bytes = 0;

  // ---- memory ----
  // Buffer `which` (number `index` of its kind) of at least `bytes`, zeroed when allocated.
  StatusOr<void*> Scratch(Buf which, int index, int64_t bytes);
  StatusOr<void*> Scratch(Buf which, int64_t bytes) { return Scratch(which, 0, bytes); }
  StatusOr<std::unique_ptr<Buffer>> Weight(int block, const std::string& name, int64_t rows,
                                           int64_t cols, float stddev);
  // This tensor-parallel rank's slice of a weight the generator draws whole: the full matrix
  // is rows x sum(parts) (row_split: rows tp x parts[0]); the slice takes columns
  // [t part / tp, (t + 1) part / tp) of every column part (row_split: rows [t rows, ..)), so
  // that the ranks of a tensor-parallel group hold exactly the pieces of the one-device model.
  StatusOr<std::unique_ptr<Buffer>> TpWeight(int block, const std::string& name, int64_t rows,
                                             const std::vector<int64_t>& parts, bool row_split,
                                             float stddev);
  StatusOr<std::unique_ptr<Buffer>> Upload(const Mat& host_m);
  // The act element `elems` past p.
  void* At(void* p, int64_t elems) const { return static_cast<char*>(p) + elems * eb; }
  const void* At(const void* p, int64_t elems) const {
    return static_cast<const char*>(p) + elems * eb;
  }

  // ---- set-up ----
  Status Load();

  Dims DimsOf(const RankWork& rw, BlockFamily family) const;

  // ---- kernel helpers ----
  // C = A W (+ C) for `batch` sequences; folded into one GEMM when the sequences are contiguous.
  Status Mm(const void* a, int64_t lda, int64_t stride_a, const void* wt, int64_t ldw, void* c,
            int64_t ldc, int64_t stride_c, int64_t rows, int64_t kdim, int64_t n, int64_t batch,
            bool accumulate = false, Epilogue ep = Epilogue::kNone);
  // The modulation vector(s) c W into an f32 buffer.
  Status Modulation(const void* cvec, const void* wt, int64_t n, float* out);
  Status Norm(const void* x, int64_t ldx, void* y, int64_t ldy, int64_t rows, int64_t cols,
              const float* shift, const float* scale);
  // Attention of `batch` sequences: q rows (ldq) `q_stride` apart, k and v rows (ldkv, v at
  // k + v_offset) `kv_stride` apart, o rows (ldo) `o_stride` apart; `lse`, when given, receives
  // the rows' log-sum-exps.
  Status Attend(const void* q, int64_t ldq, int64_t q_stride, const void* kv, int64_t v_offset,
                int64_t ldkv, int64_t kv_stride, void* o, int64_t ldo, int64_t o_stride,
                int64_t q_rows, int64_t kv_rows, int64_t batch, int64_t heads,
                float* lse = nullptr);
  // Self/joint attention of a forward: on the projections when nothing stands between, else
  // over this rank's attention-shaped buffers (what the exchange would have delivered).
  Status SelfAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride, void* o,
                       int64_t ldo, int64_t o_stride);
  // Rows of block i's K/V buffer per sequence: [the whole text (joint, single); the whole image].
  int64_t KvRows(int i, int64_t T, int64_t N) const {
    return N + (blocks[i].family == BlockFamily::kCross ? 0 : T);
  }
  // Columns of a K/V buffer row, [k | v]: this rank's heads (tensor parallel, then Ulysses).
  int64_t KvWidth() const { return 2 * H / (work.steady.tp * work.config.ulysses); }

  // The image row of the whole sequence that local row j of the rank with share s holds.
  int64_t GlobalImageRow(int s, int64_t j) const;
  // Local rows [j0, j0 + n) of share s as runs contiguous in the whole image: one per patch
  // they cross (a patch forward: one; a whole step of a PipeFusion rank: one per patch).
  struct Segment {
    int64_t local = 0, global = 0, rows = 0;
  };
  std::vector<Segment> ImageSegments(int s, int64_t j0, int64_t n) const;
  // Writes the K/V of `b` sequences of share s to their rows of a K/V buffer `dst` (`rows`
  // per sequence, the first Tk of them text; rows of KvWidth() columns, [k | v]). Sequence i
  // of the source starts at src + i src_stride: nt text rows (the prompt's from text_row),
  // then this forward's image rows, [k | v] at the first KvWidth() columns (leading ld_src).
  Status PutKv(void* dst, int64_t rows, int64_t Tk, const void* src, int64_t ld_src,
               int64_t src_stride, int64_t b, int64_t nt, int64_t ni, int s, int64_t text_row);

  // PipeFusion's and DistriFusion's attention: the forward's fresh K/V rows (this patch's, or
  // this rank's) go into the block's buffer of the whole sequence, and its queries attend over
  // all of it — the rows not computed here are as fresh as the method makes them: PipeFusion's
  // from this step's earlier patches or one step stale, DistriFusion's from the all-gather.
  // Row order in the buffer is [text; image] per sequence (keys need no order, but the
  // gathers need each rank's rows in place). K is stored after its rotary embedding.
  Status BufferedAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride, void* o,
                           int64_t ldo, int64_t o_stride);

  // Sequence-parallel self/joint attention with real transfers. Per sequence, qkv holds this
  // rank's L = nt + ni rows (its text rows, then its image rows) with q, k, v at columns 0,
  // Hl, 2 Hl. Ulysses trades the sequence sharding for head sharding with an all-to-all;
  // Ring then passes this rank's K/V block around its group, overlapping each shift with the
  // attention over the block at hand, and merges the blocks' results by their log-sum-exp;
  // a second all-to-all returns the outputs to the rows' owners.
  Status SpAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride, void* o,
                     int64_t ldo, int64_t o_stride);

  // The Ulysses exchange into attention: chunk j (j < u) is Ulysses rank j's L rows of every
  // sequence (sequences `stride` apart inside a chunk, L ld apart), q, k and v of this rank's
  // head group at columns 0, koff, 2 koff. Without Ulysses the one chunk is qkv itself.
  struct Chunks {
    const void* data = nullptr;
    int64_t ld = 0, koff = 0, stride = 0;
  };
  StatusOr<Chunks> UlyssesIn(const void* qkv, int64_t ld, int64_t b, int64_t L, int64_t Hl);
  // Where attention writes its outputs, in chunk layout: with Ulysses the buffer for the way
  // back (u chunks of b L rows of Hl / u, `stride` apart); without it o itself.
  struct OutChunks {
    void* data = nullptr;
    int64_t ld = 0, stride = 0;
  };
  StatusOr<OutChunks> AttentionOut(void* o, int64_t ldo, int64_t b, int64_t L, int64_t Hl);
  // The exchange back: each owner's rows of `out` (chunk layout), head group j from rank j,
  // into o (L rows per sequence, leading ldo).
  Status UlyssesOut(const void* out, void* o, int64_t ldo, int64_t b, int64_t L, int64_t Hl);

  // PipeFusion's attention with sequence parallelism inside the stage. The patch's rows are
  // split over the sequence-parallel ranks; each rank keeps K/V buffers of the whole
  // sequence for its head group. Ulysses brings its group's rows of the patch for those
  // heads; Ring passes that block of fresh K/V around (each shift overlapping the placement
  // of the block before it), so that every rank of the group holds every fresh row of the
  // patch before its queries attend over the buffer — the same keys at the same places as on
  // one device — and Ulysses takes the outputs back.
  Status BufferedSpAttention(const Dims& x, const void* qkv, int64_t ld, int64_t seq_stride,
                             void* o, int64_t ldo, int64_t o_stride);
  // Sums a tensor-parallel partial result (rows x cols, packed) over the group.
  Status TpReduce(void* y, int64_t rows, int64_t cols);
  // Query-key norm and rotary embedding of each sequence's rows: text rows at their positions
  // in the prompt, image rows after the whole text at theirs in the image.
  Status Rope(void* qk, int64_t ld, int64_t b, int64_t nt, int64_t ni, int64_t T, int64_t heads);

  // MLP of `rows` contiguous rows of width `width`: out = act(h W1) W2.
  Status Mlp(const void* h, int64_t rows, int64_t width, int64_t inner, const void* w1,
             const void* w2, void* out);

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
  StatusOr<Residual> StreamFor(const RankWork& rw);
  bool HasText() const;

  // ---- blocks ----
  Status Cross(BlockW& bw, const float* mod, const void* xkv, const Dims& x, Residual& s);

  Status Joint(BlockW& bw, const float* mod, const float* tmod, const Dims& x, Residual& s);

  Status Single(BlockW& bw, const float* mod, const Dims& x, Residual& s);

  // A patch's activations to the next stage (send) or from the previous one: the text rows
  // (where the patch has them) and the image rows of every sequence. A receive completes
  // before it returns. A send must not wait for its receiver, which may itself be waiting for
  // this rank's next receive (the latent rows back from the last stage): it copies the rows
  // to the send buffers of `slot` (the patch) and stays in flight.
  Status Handoff(const Residual& st, int64_t b, int64_t nt, int64_t ni, bool send, int slot);
  // Completes the send in flight from `slot` (all slots: -1) before its buffer is rewritten.
  // Deadlock-free: a slot is reused a step later, after this rank has received what its
  // receiver could only produce once it had taken the slot's data.
  static Status Settle(std::vector<std::unique_ptr<Request>>* pending, int slot);

  // Host seconds in this engine's transfers so far.
  double CommSeconds() const;

  // Every prompt's whole latent on every rank, from each rank's rows of its prompts.
  StatusOr<std::vector<Mat>> GatherLatents(const float* xf, int64_t N, int64_t R, int P);

  // ---- the loop ----
  StatusOr<EngineResult> Generate();
};

// A stable stream id per (block, weight name) for the device-side generator.
inline uint64_t WeightStream(int block, const std::string& name) {
  uint64_t h = 0x51ED270B27A1C3F5ULL ^ static_cast<uint64_t>(block + 7);
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_ENGINE_ENGINE_IMPL_H_
