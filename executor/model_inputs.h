// What a generation starts from, made on the host from the seed: the prompts' text
// embeddings, the conditioning vector of each denoising time, and the weights of the model's
// input and output layers (latent patch embedding, text projection, final modulation and
// projection). The same on every rank and every backend, so that a plan's ranks and a
// one-device run start from identical inputs.
#ifndef DITUNE_EXECUTOR_MODEL_INPUTS_H_
#define DITUNE_EXECUTOR_MODEL_INPUTS_H_

#include <cstdint>
#include <map>
#include <string>

#include "core/model_spec.h"
#include "executor/tensor.h"

namespace ditune::exec {

class ModelInputs {
 public:
  ModelInputs(const ModelSpec& spec, uint64_t seed);

  // C p^2 (x the temporal patch): the width of a latent token.
  int64_t latent_width() const { return latent_width_; }
  // The conditioning vector of denoising time `t` (0..1000): a sinusoidal embedding of t
  // through two SiLU layers, hidden wide.
  Vec Conditioning(float t) const;
  // The input and output layers: "patch" (latent width x hidden), "text" (text_hidden x
  // text-stream width), "fmod" (hidden x 2 hidden: the final layer's shift and scale), "out"
  // (hidden x latent width).
  const Mat& io_weight(const std::string& name) const { return io_.at(name); }

 private:
  int64_t latent_width_ = 0;
  std::map<std::string, Mat> io_;
};

// Text embeddings of prompt `prompt` (text_tokens x text_hidden); `negative` gives the
// unconditional prompt classifier-free guidance uses.
Mat PromptEmbedding(const ModelSpec& spec, uint64_t seed, int prompt, bool negative);

}  // namespace ditune::exec

#endif  // DITUNE_EXECUTOR_MODEL_INPUTS_H_
