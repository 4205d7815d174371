#include "core/workload.h"

#include <fmt/format.h>

#include "core/enum_names.h"

namespace ditune {

constexpr EnumName<OutputType> kOutputTypeNames[] = {
    {OutputType::kLatent, "latent"},
    {OutputType::kDecoded, "decoded"},
};

std::string_view OutputTypeName(OutputType t) { return NameIn(kOutputTypeNames, t); }

StatusOr<TokenGeometry> ComputeTokenGeometry(const ModelSpec& model, const Workload& w) {
  // The bounds keep every product of sizes (tokens x batch x widths) far inside 64 bits.
  if (w.steps < 1 || w.steps > kMaxSteps) {
    return Status::InvalidArgument(fmt::format("--steps must be 1 to {}, got {}", kMaxSteps, w.steps));
  }
  if (w.batch < 1 || w.batch > kMaxBatch) {
    return Status::InvalidArgument(fmt::format("--batch must be 1 to {}, got {}", kMaxBatch, w.batch));
  }
  const int unit = model.vae_spatial * model.patch_spatial;
  auto check_side = [&](const char* flag, int px) -> Status {
    if (px > kMaxSide) {
      return Status::InvalidArgument(fmt::format("--{} {}: at most {} pixels", flag, px, kMaxSide));
    }
    if (px < unit || px % unit != 0) {
      int lo = std::max(unit, px / unit * unit);
      return Status::InvalidArgument(fmt::format(
          "--{} {} must be a positive multiple of {} for {} (VAE factor {} x patch {}); "
          "nearest valid: {}, {}",
          flag, px, unit, model.id, model.vae_spatial, model.patch_spatial, lo, lo + unit));
    }
    return Status::Ok();
  };
  DITUNE_RETURN_IF_ERROR(check_side("height", w.height));
  DITUNE_RETURN_IF_ERROR(check_side("width", w.width));

  TokenGeometry g;
  g.latent_height = w.height / model.vae_spatial;
  g.latent_width = w.width / model.vae_spatial;
  g.patch_rows = g.latent_height / model.patch_spatial;
  g.patch_cols = g.latent_width / model.patch_spatial;
  g.text_tokens = model.text_tokens;
  if (model.modality == Modality::kImage) {
    if (w.frames != 1) {
      return Status::InvalidArgument(
          fmt::format("--frames {}: {} is an image model, frames must be 1", w.frames, model.id));
    }
    return g;
  }
  const int t = model.vae_temporal;
  if (w.frames > kMaxFrames) {
    return Status::InvalidArgument(fmt::format("--frames {}: at most {}", w.frames, kMaxFrames));
  }
  if (model.frame_group > 0) {
    // The pipeline floors the frame count to whole groups and makes a fixed number of
    // latent frames per group.
    if (w.frames < model.frame_group) {
      return Status::InvalidArgument(fmt::format("--frames {}: {} needs at least {} frames (it generates whole "
                                                 "groups of {})",
                                                 w.frames, model.id, model.frame_group, model.frame_group));
    }
    g.latent_frames = w.frames / model.frame_group * model.latent_frames_per_group;
    g.patch_frames = (g.latent_frames + model.patch_temporal - 1) / model.patch_temporal;
    return g;
  }
  if (w.frames < 1 || (w.frames - 1) % t != 0) {
    int lo = std::max(0, (w.frames - 1) / t) * t + 1;
    return Status::InvalidArgument(fmt::format(
        "--frames {}: {}'s VAE needs 1 + {}k frames; nearest valid: {}, {}", w.frames, model.id,
        t, lo, lo + t));
  }
  g.latent_frames = 1 + (w.frames - 1) / t;
  g.patch_frames = (g.latent_frames + model.patch_temporal - 1) / model.patch_temporal;
  return g;
}

}  // namespace ditune
