// What is generated: model, resolution, frames, steps, batch, and whether the VAE decodes.
#ifndef DITUNE_CORE_WORKLOAD_H_
#define DITUNE_CORE_WORKLOAD_H_

#include <cstdint>
#include <string>

#include "core/model_spec.h"
#include "core/status.h"

namespace ditune {

enum class OutputType { kLatent, kDecoded };

struct Workload {
  std::string model_id;
  int height = 0;  // pixels
  int width = 0;   // pixels
  int frames = 1;  // video frames; 1 for images
  int steps = 0;   // denoising steps
  int batch = 1;   // prompts per generation
  OutputType output = OutputType::kDecoded;
};

// The token geometry of a workload on a model. The DiT's image sequence is
// patch_frames x patch_rows x patch_cols tokens, row-major with frames outermost.
struct TokenGeometry {
  int latent_height = 0;  // height / vae_spatial
  int latent_width = 0;
  int latent_frames = 1;  // 1 + (frames - 1) / vae_temporal for video
  int patch_rows = 0;     // latent_height / patch_spatial
  int patch_cols = 0;
  int patch_frames = 1;   // latent_frames / patch_temporal, rounded up (the model pads)
  int text_tokens = 0;

  int64_t image_tokens() const {
    return static_cast<int64_t>(patch_frames) * patch_rows * patch_cols;
  }
};

// The largest workload ditune takes: 32768 px a side (a 2048 x 2048 token grid at 16 px per
// token), 1024 frames, 10000 steps, 4096 prompts a generation.
inline constexpr int kMaxSide = 32768;
inline constexpr int kMaxFrames = 1024;
inline constexpr int kMaxSteps = 10000;
inline constexpr int kMaxBatch = 4096;

// Checks the workload against the model (pixels divisible by vae x patch, frame count
// the VAE accepts, steps and batch within 1 and the bounds above) and computes its geometry.
StatusOr<TokenGeometry> ComputeTokenGeometry(const ModelSpec& model, const Workload& workload);

std::string_view OutputTypeName(OutputType t);

}  // namespace ditune

#endif  // DITUNE_CORE_WORKLOAD_H_
