#include "executor/model_inputs.h"

#include <cmath>

namespace ditune::exec {
namespace {

// A stable generator stream per weight name.
uint64_t StreamOf(const std::string& name) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

}  // namespace

ModelInputs::ModelInputs(const ModelSpec& spec, uint64_t seed) {
  const int64_t H = spec.hidden, Ht = spec.text_stream_hidden;
  latent_width_ = static_cast<int64_t>(spec.latent_channels) * spec.patch_spatial * spec.patch_spatial *
                  spec.patch_temporal;
  auto draw = [&](const std::string& name, int64_t rows, int64_t cols, float gain) {
    io_[name] = RandomMat(rows, cols, gain / std::sqrt(static_cast<float>(rows)), seed, StreamOf(name));
  };
  draw("t1", 256, H, 1.0f);
  draw("t2", H, H, 1.0f);
  draw("text", spec.text_hidden, Ht, 1.0f);
  draw("patch", latent_width_, H, 1.0f);
  draw("fmod", H, 2 * H, 0.1f);
  draw("out", H, latent_width_, 1.0f);
}

Vec ModelInputs::Conditioning(float t) const {
  Vec e(256);
  for (int i = 0; i < 128; ++i) {
    const float f = std::exp(-std::log(10000.0f) * static_cast<float>(i) / 128.0f);
    e[i] = std::cos(t * f);
    e[128 + i] = std::sin(t * f);
  }
  const Vec h = Silu(Vec(e * io_.at("t1")));
  return Silu(Vec(h * io_.at("t2")));
}

Mat PromptEmbedding(const ModelSpec& spec, uint64_t seed, int prompt, bool negative) {
  return RandomMat(spec.text_tokens, spec.text_hidden, 1.0f, seed + 7919ULL * static_cast<uint64_t>(prompt + 1),
                   negative ? 0xBADC0FFEULL : 0x5EEDULL);
}

}  // namespace ditune::exec
