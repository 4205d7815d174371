// The parts of a generation outside the denoising loop: text encoding before it and the
// VAE decode after it. They do not shrink with DiT parallelism (xDiT runs them on every
// rank) unless the VAE is decoded in parallel patches.
#ifndef DITUNE_COSTMODELS_PIPELINE_TERMS_H_
#define DITUNE_COSTMODELS_PIPELINE_TERMS_H_

#include "core/model_spec.h"
#include "core/units.h"
#include "core/workload.h"
#include "costmodels/compute_model.h"

namespace ditune {

struct PipelineTermScales {
  double text_encode = 1.0;  // fitted: measured / modelled
  double vae_decode = 1.0;
  // Whether the scale was fitted on measurements of the term itself: measured / modelled at
  // compute scale 1, so the framework's compute scale (fitted on whole runs) does not apply
  // on top of it.
  bool text_measured = false;
  bool vae_measured = false;
};

// FLOPs and bytes of encoding the prompt (and the negative prompt with CFG) with every
// text encoder of the model: a forward over the text tokens, weights read once.
OpCost TextEncodeOp(const ModelSpec& model, const Workload& workload);
// The VAE decoder over every output pixel and frame, split over `parallel` ranks
// (1 = not parallel) with each rank also decoding a halo. An image decoder (no temporal
// compression) is priced by its FLOPs at the GEMM roofline; a causal 3-D decoder by its
// vol2col traffic at memory bandwidth (OpClass::kElementwise), its FLOPs carried but unused.
OpCost VaeDecodeOp(const ModelSpec& model, const Workload& workload, int parallel = 1);

Seconds TextEncodeTime(const ComputeModel& compute, const ModelSpec& model, const Workload& workload,
                       const PipelineTermScales& scales = {});
// Zero when the workload's output is latent. The modelled op, times the fitted scale of
// (GPU, model), times the global mechanism scale of image or video VAEs; a measured term
// (PipelineTermScales::vae_measured) is its fitted scale times the plain model instead.
Seconds VaeDecodeTime(const ComputeModel& compute, const ModelSpec& model, const Workload& workload,
                      int parallel = 1, const PipelineTermScales& scales = {});

// The work of a tiled decode (vae=tiled) over an untiled one: tiles of the decoder's tile
// edge overlapping by its overlap fraction cover the frame more than once. 1 where the frame
// fits one tile.
double TiledDecodeWork(const ModelSpec& model, const Workload& workload);

// The text encoders run on the host's CPU (te=cpu): their FLOPs at a host's matrix
// throughput.
Seconds HostTextEncodeTime(const ModelSpec& model, const Workload& workload);
// The VAE decodes on the host's CPU (vae=cpu): its FLOPs at the same rate; zero when the
// workload's output is latent.
Seconds HostVaeDecodeTime(const ModelSpec& model, const Workload& workload);

}  // namespace ditune

#endif  // DITUNE_COSTMODELS_PIPELINE_TERMS_H_
