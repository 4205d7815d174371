// DiT inference on the CPU backend: random weights of a catalog model's shapes, the three
// block families, and the model forward for one rank's share of a parallel configuration.
#ifndef DITUNE_EXECUTOR_DIT_H_
#define DITUNE_EXECUTOR_DIT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"
#include "executor/tensor.h"

namespace ditune::exec {

// Time spent per operation class on this rank, seconds (accumulated).
struct OpTimers {
  double gemm = 0, attention = 0, elementwise = 0, comm = 0;
};

// What a block needs from the parallel strategy. Each may be left empty for a serial run.
struct ParallelHooks {
  // Self/joint attention of this rank's rows: the first `text_rows` rows of q, k, v are text
  // (on every sequence-parallel rank), the rest this rank's image rows. Columns are this
  // rank's heads (heads / tp). Returns the output rows in the same layout.
  std::function<StatusOr<Mat>(const Mat& q, const Mat& k, const Mat& v, int64_t text_rows)> attention;
  // Sums partial results over the tensor-parallel group (in place).
  std::function<Status(Mat* partial)> tp_reduce;
};

// Weights of one block, sliced for tensor-parallel rank tp_rank of tp.
struct BlockWeights {
  BlockFamily family = BlockFamily::kCross;
  std::map<std::string, Mat> w;
};

class DitModel {
 public:
  // Weights for blocks [first_block, first_block + blocks) from `seed`, sliced for tensor
  // parallelism; every rank generates identical full weights and keeps its slice.
  DitModel(const ModelSpec& spec, uint64_t seed, int first_block, int blocks, int tp, int tp_rank);

  const ModelSpec& spec() const { return spec_; }
  int heads_local() const { return spec_.heads / tp_; }

  // The conditioning vector of denoising time `t` (0..1000).
  Vec Conditioning(float t, OpTimers* timers) const;
  // Text context projected to the text-stream width: text (T x text_hidden).
  Mat ProjectText(const Mat& text, OpTimers* timers) const;
  // Latent rows (n x C p^2) to hidden rows.
  Mat Embed(const Mat& latent_rows, OpTimers* timers) const;
  // Hidden rows to the prediction (n x C p^2).
  Mat Final(const Mat& x, const Vec& c, OpTimers* timers) const;

  // One block (index relative to this model's first block). `ctx` is the projected text;
  // joint and single blocks update it too.
  Status Block(int index, const Vec& c, Mat* x, Mat* ctx, const ParallelHooks& hooks, OpTimers* timers) const;

  int first_block() const { return first_block_; }
  // The weights, for backends that run the same model elsewhere (the CUDA backend uploads them).
  const BlockWeights& weights(int index) const { return blocks_[index]; }
  const std::map<std::string, Mat>& io_weights() const { return io_; }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  // Bytes of this rank's weights.
  int64_t WeightBytes() const;

  int latent_width() const { return spec_.latent_channels * spec_.patch_spatial * spec_.patch_spatial * spec_.patch_temporal; }

 private:
  // A cross block's modulated norm and Q, K, V projections (this rank's heads).
  void SelfQkv(const BlockWeights& bw, const Vec& m, const Mat& x, Mat* q, Mat* k, Mat* v, OpTimers* timers) const;
  // Cross-attention to the text and the MLP of a cross block, after its self-attention.
  Status CrossTail(const BlockWeights& bw, const Vec& m, Mat* x, const Mat& ctx,
                   const std::function<Status(Mat*)>& reduce, OpTimers* timers) const;

  const ModelSpec& spec_;
  int first_block_;
  int tp_, tp_rank_;
  std::vector<BlockWeights> blocks_;
  std::map<std::string, Mat> io_;  // embeddings and final layer
};

// Text embeddings of prompt `prompt` (T x text_hidden); `negative` gives the unconditional
// prompt used by classifier-free guidance.
Mat PromptEmbedding(const ModelSpec& spec, uint64_t seed, int prompt, bool negative);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_DIT_H_
