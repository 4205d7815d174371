#!/usr/bin/env python3
"""The GPU memory and time of one VAE decode, on diffusers' own VAE classes.

Checks ditune's VAE decode memory model (costmodels/memory_model.cc VaeDecodeBytes, fed by the
catalog's `vae.decode_memory`: full_res_channels, live_maps, frames_at_once, tile_pixels,
tile_overlap, tile_frames; core/model_spec.h VaeDecodeMemory). For each catalog model it knows,
this script builds the diffusers VAE class its pipeline loads, with the published checkpoint's
VAE config (written out below, each value with the diffusers file it comes from at
huggingface/diffusers@58eb52c0803ea9af3abec60841c2a093bdf1f951) and random weights, and decodes
one random latent of the catalog's default resolution (`default_resolution` of `ditune models
--json`; --sizes overrides it), batch 1, in bf16 on one GPU, under torch.inference_mode():
  weights_bytes  torch.cuda.memory_allocated() after building the VAE, minus before: the whole
                 VAE (encoder included, as a pipeline holds it), initialised on the GPU in fp32
                 and cast with .to(torch.bfloat16); stdout also gives the decoder's parameters
  peak_bytes     torch.cuda.max_memory_allocated() over the decode, after
                 torch.cuda.reset_peak_memory_stats() (weights included)
  working_bytes  peak_bytes - memory_allocated() just before the latent is made: the decode's
                 own working set, the latent and the decoded output included
  decode_ms      CUDA-event time of vae.decode(latent). The first decode is timed; when it took
                 at most --warm-max-s seconds and the budget allows, it is repeated and the
                 second one is reported (the first was then the warm-up; status "ok"); otherwise
                 the single cold decode is reported (status "ok (cold)"). Both decodes run under
                 the same peak counter.
  tiled          0: the class's default decode; 1: after vae.enable_tiling() with the class's
                 default tile sizes. Where the size does not exceed the class's tiling threshold
                 the class decodes untiled anyway (stdout says "tiling not triggered"): the
                 Flux/SD3 VAEs (sample_size 1024) tile only above 1024 px. HunyuanVideo's class
                 decodes in temporal tiles of 5 latent frames (17 output frames, stride 12) even
                 untiled: 'self.use_framewise_decoding = True', 'tile_sample_min_num_frames = 16'
                 by default; Tencent's reference code decodes every frame at once.
Latent: C x [T x] H x W with H, W = height, width / the catalog's `vae.spatial`, T = (frames - 1)
/ `vae.temporal` + 1 for video (the causal VAEs' layout), C the VAE's own latent channels (its
config below, checked against the catalog's `latent_channels`), laid out as each class's
decode() takes it: (B, C, H, W) for AutoencoderKL and AutoencoderKLFlux2, (B, C, T, H, W) for
the others (Qwen-Image's image VAE too, with T = 1). Latents are standard normal in bf16 (their
values do not change the memory). Status: "ok", "ok (cold)", "oom" (torch.cuda.OutOfMemoryError
or another "out of memory" error; peak_bytes then holds the peak reached before the failed
allocation, a lower bound), "error: <Type>: <message>", "out of time" (past --budget-s, or
stopped by SIGTERM/SIGINT: the CSV is written either way), "dry-run". Rows run untiled for every
model first, then tiled, so that a short budget still covers every model once.

Models and their VAE classes (catalog id -> class): flux.1-dev and sd3-medium -> AutoencoderKL
(16 channels), pixart-alpha -> AutoencoderKL (4 channels, the SD VAE), flux.2-dev ->
AutoencoderKLFlux2, qwen-image -> AutoencoderKLQwenImage, ltx-2 -> AutoencoderKLLTX2Video,
cogvideox-5b -> AutoencoderKLCogVideoX, wan2.1-14b -> AutoencoderKLWan, hunyuanvideo ->
AutoencoderKLHunyuanVideo, mochi-1 -> AutoencoderKLMochi. All ten are grounded and included;
none is skipped. Where the grounding is indirect: SD3's convert script takes SDXL's VAE config
from the Hub (not in the source), so its layout is the SD VAE's as two other convert scripts
write it out (FLUX.1's convert script loads FLUX's VAE weights strict into SD3's config, and
SDXL's VAE is an SD VAE retrained), and its sample_size (1024) is single_file_utils' SDXL
default; the SD VAE's sample_size for pixart-alpha is not in the source at all (512 assumed;
it only sets the tile of the tiled row). See the comments above each config.

  python3 bench/diffusers_vae_memory.py --diffusers SRC --models-json M.json --out vae_memory.csv
  python3 bench/diffusers_vae_memory.py --models-json M.json --out vae_memory.csv --dry-run
  ... --models wan2.1-14b,mochi-1 --sizes 480x832x81,720x1280x81

SRC holds the `diffusers` package (a copy of diffusers' src/ folder). --dry-run imports no
torch and no diffusers: it lists the rows it would measure (latent shapes included), so the CSV
and the arguments are exercised where there is no GPU; its rows carry no measurement.
--reps and --rounds (arguments every diffusers bench takes) are not used here.
"""
import csv
import gc
import importlib
import re
import signal
import sys
import time

import diffusers_bench

COLUMNS = ["model", "vae_class", "height", "width", "frames", "latent_shape", "tiled",
           "weights_bytes", "peak_bytes", "working_bytes", "decode_ms", "status", "source"]
BATCH = 1

# The SD-family 2D VAE (SD 1.x/2.x, SDXL, SD3, FLUX.1): four DownEncoderBlock2D/UpDecoderBlock2D,
# block_out_channels 128/256/512/512, two ResNet layers per block, GroupNorm(32), SiLU, one
# mid-block attention (AutoencoderKL's default mid_block_add_attention=True).
#   scripts/convert_unidiffuser_to_diffusers.py create_vae_diffusers_config_big (the SD VAE UniDiffuser
#     uses): '"block_out_channels": [128, 256, 512, 512]', '"latent_channels": 4', '"layers_per_block": 2',
#     four "DownEncoderBlock2D" / "UpDecoderBlock2D"
#   scripts/convert_versatile_diffusion_to_diffusers.py AUTOENCODER_CONFIG: '"ch": 128',
#     '"ch_mult": [1, 2, 4, 4]', '"num_res_blocks": 2', '"z_channels": 4'
#   src/diffusers/models/autoencoders/autoencoder_kl.py defaults: 'act_fn: str = "silu"',
#     'norm_num_groups: int = 32', 'mid_block_add_attention: bool = True'
SD_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ("DownEncoderBlock2D",) * 4,
    "up_block_types": ("UpDecoderBlock2D",) * 4,
    "block_out_channels": (128, 256, 512, 512),
    "layers_per_block": 2,
    "act_fn": "silu",
    "norm_num_groups": 32,
    "mid_block_add_attention": True,
}
# SD3's VAE: SDXL's VAE config with 16 latent channels and no quant convs.
#   scripts/convert_sd3_to_diffusers.py: 'AutoencoderKL.from_config("stabilityai/stable-diffusion-xl-base-1.0",
#     subfolder="vae", latent_channels=16, use_post_quant_conv=False, use_quant_conv=False,
#     scaling_factor=1.5305, shift_factor=0.0609)'
#   sample_size 1024 (the tile size of tiled decoding: AutoencoderKL 'self.tile_sample_min_size =
#     self.config.sample_size'): src/diffusers/loaders/single_file_utils.py builds an SDXL VAE's
#     config with '"sample_size": image_size' from DIFFUSERS_TO_LDM_DEFAULT_IMAGE_SIZE_MAP '"xl_base": 1024'
SD3_VAE = dict(SD_VAE, latent_channels=16, use_quant_conv=False, use_post_quant_conv=False,
               sample_size=1024, scaling_factor=1.5305, shift_factor=0.0609)
# FLUX.1's VAE: SD3's VAE config with FLUX's latent scale and shift.
#   scripts/convert_flux_to_diffusers.py: 'config = AutoencoderKL.load_config("stabilityai/stable-diffusion-3-medium-diffusers",
#     subfolder="vae")', 'vae = AutoencoderKL.from_config(config, scaling_factor=0.3611, shift_factor=0.1159)'
FLUX1_VAE = dict(SD3_VAE, scaling_factor=0.3611, shift_factor=0.1159)
# PixArt-alpha's VAE: the SD VAE (sd-vae-ft-ema), 4 latent channels, with quant convs.
#   scripts/convert_pixart_alpha_to_diffusers.py: 'vae = AutoencoderKL.from_pretrained(ckpt_id, subfolder="sd-vae-ft-ema")'
#   latent_channels 4 and the quant convs: the SD VAE configs above ('"latent_channels": 4',
#     '"z_channels": 4') and autoencoder_kl.py 'use_quant_conv: bool = True', 'use_post_quant_conv: bool = True'
#   scaling_factor: single_file_utils.py 'LDM_VAE_DEFAULT_SCALING_FACTOR = 0.18215' (unused by decode)
#   sample_size 512: NOT in the diffusers source for sd-vae-ft-ema; 512 is what
#     single_file_utils.py gives an SD v1 VAE (DIFFUSERS_TO_LDM_DEFAULT_IMAGE_SIZE_MAP '"v1": 512').
#     It only sets the tiled row's tile (512 px); the published vae/config.json may say otherwise.
PIXART_VAE = dict(SD_VAE, latent_channels=4, use_quant_conv=True, use_post_quant_conv=True,
                  sample_size=512, scaling_factor=0.18215)
# FLUX.2's VAE: AutoencoderKLFlux2 with its class defaults.
#   scripts/convert_flux2_to_diffusers.py: 'vae = AutoencoderKLFlux2()'
#   src/diffusers/models/autoencoders/autoencoder_kl_flux2.py defaults: 'block_out_channels: tuple[int, ...] = (128,
#     256, 512, 512)', 'decoder_block_out_channels: tuple[int, ...] | None = None', 'layers_per_block: int = 2',
#     'latent_channels: int = 32', 'sample_size: int = 1024', 'use_quant_conv: bool = True',
#     'use_post_quant_conv: bool = True', 'mid_block_add_attention: bool = True', 'patch_size: tuple[int, int] = (2, 2)'
# The pipeline's latents are 128-channel 2x2-packed tokens; Flux2Pipeline unpacks them to 32
# channels at 1/8 resolution before 'self.vae.decode(latents, return_dict=False)'
# (pipelines/flux2/pipeline_flux2.py _unpatchify_latents: 'num_channels_latents // (2 * 2)'), so
# the decode latent has the VAE's 32 channels, not the transformer's 128.
FLUX2_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ("DownEncoderBlock2D",) * 4,
    "up_block_types": ("UpDecoderBlock2D",) * 4,
    "block_out_channels": (128, 256, 512, 512),
    "decoder_block_out_channels": None,
    "layers_per_block": 2,
    "act_fn": "silu",
    "latent_channels": 32,
    "norm_num_groups": 32,
    "sample_size": 1024,
    "use_quant_conv": True,
    "use_post_quant_conv": True,
    "mid_block_add_attention": True,
    "patch_size": (2, 2),
}
# Qwen-Image's VAE: AutoencoderKLQwenImage's class defaults (the class is Qwen-Image's; its default
# latents_mean/latents_std are the checkpoint's statistics). No convert script for Qwen-Image.
#   src/diffusers/models/autoencoders/autoencoder_kl_qwenimage.py: 'base_dim: int = 96', 'z_dim: int = 16',
#     'dim_mult: list[int] = [1, 2, 4, 4]', 'num_res_blocks: int = 2', 'attn_scales: list[float] = []',
#     'temperal_downsample: list[bool] = [False, True, True]', 'input_channels: int = 3'
#   pipelines/qwenimage/pipeline_qwenimage.py _unpack_latents: 'latents.reshape(batch_size, channels // (2 * 2),
#     1, height, width)': one frame, (B, 16, 1, H/8, W/8)
QWEN_VAE = {
    "base_dim": 96,
    "z_dim": 16,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
    "dropout": 0.0,
    "input_channels": 3,
}
# LTX-2's video VAE: the "2.0" config of the convert script, without timestep conditioning.
#   scripts/convert_ltx2_to_diffusers.py get_ltx2_video_vae_config, 'elif version == "2.0"' ('"model_id":
#     "Lightricks/LTX-2"'), every value below; '--version' 'default="2.0"'; '--timestep_conditioning'
#     'action="store_true"' (off unless asked)
#   pipelines/ltx2/pipeline_ltx2.py: 'if not self.vae.config.timestep_conditioning: timestep = None',
#     'video = self.vae.decode(latents, timestep, return_dict=False)[0]': decode(z, temb=None)
LTX2_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 128,
    "block_out_channels": (256, 512, 1024, 2048),
    "down_block_types": ("LTX2VideoDownBlock3D",) * 4,
    "decoder_block_out_channels": (256, 512, 1024),
    "layers_per_block": (4, 6, 6, 2, 2),
    "decoder_layers_per_block": (5, 5, 5, 5),
    "spatio_temporal_scaling": (True, True, True, True),
    "decoder_spatio_temporal_scaling": (True, True, True),
    "decoder_inject_noise": (False, False, False, False),
    "downsample_type": ("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    "upsample_type": ("spatiotemporal", "spatiotemporal", "spatiotemporal"),
    "upsample_residual": (True, True, True),
    "upsample_factor": (2, 2, 2),
    "timestep_conditioning": False,
    "patch_size": 4,
    "patch_size_t": 1,
    "resnet_norm_eps": 1e-6,
    "encoder_causal": True,
    "decoder_causal": False,
    "encoder_spatial_padding_mode": "zeros",
    "decoder_spatial_padding_mode": "reflect",
    "spatial_compression_ratio": 32,
    "temporal_compression_ratio": 8,
}
# CogVideoX-5b's VAE: the class defaults with the 5B scaling factor (version 1.0: no inverted scale).
#   scripts/convert_cogvideox_to_diffusers.py: 'init_kwargs = {"scaling_factor": scaling_factor}',
#     'if version == "1.5": init_kwargs.update({"invert_scale_latents": True})',
#     'vae = AutoencoderKLCogVideoX(**init_kwargs)', '# For CogVideoX-2B, scaling_factor is 1.15258426. For 5B, it is 0.7'
#   src/diffusers/models/autoencoders/autoencoder_kl_cogvideox.py defaults: 'block_out_channels: tuple[int] =
#     (128, 256, 256, 512)', 'latent_channels: int = 16', 'layers_per_block: int = 3', 'norm_eps: float = 1e-6',
#     'norm_num_groups: int = 32', 'temporal_compression_ratio: float = 4', 'sample_height: int = 480',
#     'sample_width: int = 720', 'use_quant_conv: bool = False', 'use_post_quant_conv: bool = False'
#   pipelines/cogvideo/pipeline_cogvideox.py decode_latents: 'latents.permute(0, 2, 1, 3, 4)  # [batch_size,
#     num_channels, num_frames, height, width]'
COGVIDEOX_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ("CogVideoXDownBlock3D",) * 4,
    "up_block_types": ("CogVideoXUpBlock3D",) * 4,
    "block_out_channels": (128, 256, 256, 512),
    "latent_channels": 16,
    "layers_per_block": 3,
    "act_fn": "silu",
    "norm_eps": 1e-6,
    "norm_num_groups": 32,
    "temporal_compression_ratio": 4,
    "sample_height": 480,
    "sample_width": 720,
    "scaling_factor": 0.7,
    "use_quant_conv": False,
    "use_post_quant_conv": False,
    "invert_scale_latents": False,
}
# Wan2.1's VAE: AutoencoderKLWan's class defaults.
#   scripts/convert_wan_to_diffusers.py convert_vae() (the Wan2.1 VAE, 'hf_hub_download("Wan-AI/Wan2.1-T2V-14B",
#     "Wan2.1_VAE.pth")'): 'vae = AutoencoderKLWan()'
#   src/diffusers/models/autoencoders/autoencoder_kl_wan.py defaults: 'base_dim: int = 96',
#     'decoder_base_dim: int | None = None', 'z_dim: int = 16', 'dim_mult: list[int] = [1, 2, 4, 4]',
#     'num_res_blocks: int = 2', 'attn_scales: list[float] = []', 'temperal_downsample: list[bool] =
#     [False, True, True]', 'is_residual: bool = False', 'patch_size: int | None = None',
#     'scale_factor_temporal: int | None = 4', 'scale_factor_spatial: int | None = 8'
WAN_VAE = {
    "base_dim": 96,
    "decoder_base_dim": None,
    "z_dim": 16,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
    "dropout": 0.0,
    "is_residual": False,
    "in_channels": 3,
    "out_channels": 3,
    "patch_size": None,
    "scale_factor_temporal": 4,
    "scale_factor_spatial": 8,
}
# HunyuanVideo's VAE: AutoencoderKLHunyuanVideo's class defaults.
#   scripts/convert_hunyuan_video_to_diffusers.py convert_vae(): 'vae = AutoencoderKLHunyuanVideo()'
#   src/diffusers/models/autoencoders/autoencoder_kl_hunyuan_video.py defaults: 'latent_channels: int = 16',
#     'block_out_channels: tuple[int] = (128, 256, 512, 512)', 'layers_per_block: int = 2',
#     'norm_num_groups: int = 32', 'scaling_factor: float = 0.476986', 'spatial_compression_ratio: int = 8',
#     'temporal_compression_ratio: int = 4', 'mid_block_add_attention: bool = True'
HUNYUANVIDEO_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 16,
    "down_block_types": ("HunyuanVideoDownBlock3D",) * 4,
    "up_block_types": ("HunyuanVideoUpBlock3D",) * 4,
    "block_out_channels": (128, 256, 512, 512),
    "layers_per_block": 2,
    "act_fn": "silu",
    "norm_num_groups": 32,
    "scaling_factor": 0.476986,
    "spatial_compression_ratio": 8,
    "temporal_compression_ratio": 4,
    "mid_block_add_attention": True,
}
# Mochi 1's VAE: the class defaults with the convert script's two arguments.
#   scripts/convert_mochi_to_diffusers.py: 'vae = AutoencoderKLMochi(latent_channels=12, out_channels=3)'
#   src/diffusers/models/autoencoders/autoencoder_kl_mochi.py defaults: 'in_channels: int = 15',
#     'encoder_block_out_channels: tuple[int] = (64, 128, 256, 384)', 'decoder_block_out_channels: tuple[int] =
#     (128, 256, 512, 768)', 'layers_per_block: tuple[int, ...] = (3, 3, 4, 6, 3)', 'temporal_expansions:
#     tuple[int, ...] = (1, 2, 3)', 'spatial_expansions: tuple[int, ...] = (2, 2, 2)', 'add_attention_block:
#     tuple[bool, ...] = (False, True, True, True, True)' (the encoder's; the decoder has 'add_attention=False')
MOCHI_VAE = {
    "in_channels": 15,
    "out_channels": 3,
    "encoder_block_out_channels": (64, 128, 256, 384),
    "decoder_block_out_channels": (128, 256, 512, 768),
    "latent_channels": 12,
    "layers_per_block": (3, 3, 4, 6, 3),
    "act_fn": "silu",
    "temporal_expansions": (1, 2, 3),
    "spatial_expansions": (2, 2, 2),
    "add_attention_block": (False, True, True, True, True),
    "scaling_factor": 1.0,
}

# Catalog model -> its VAE: the class (module under diffusers.models.autoencoders), the config
# above, the latent layout decode() takes ("BCHW" or "BCTHW"), the class's own spatial and
# temporal factors (checked against the catalog's), the sample size above which its tiled
# decode actually tiles (height, width in pixels: the class's default tile), and the extra
# positional arguments its pipeline passes to decode(). Image models first, then video models
# from the cheapest decode to the dearest, so that a short budget loses the dearest.
MODELS = {
    # autoencoder_kl.py _decode: 'if self.use_tiling and (z.shape[-1] > self.tile_latent_min_size or
    # z.shape[-2] > self.tile_latent_min_size)', tile_latent_min_size = sample_size / 8.
    "flux.1-dev": dict(cls="AutoencoderKL", module="autoencoder_kl", config=FLUX1_VAE, layout="BCHW",
                       spatial=8, temporal=1, tile_px=(1024, 1024), decode_args=()),
    "sd3-medium": dict(cls="AutoencoderKL", module="autoencoder_kl", config=SD3_VAE, layout="BCHW",
                       spatial=8, temporal=1, tile_px=(1024, 1024), decode_args=()),
    "pixart-alpha": dict(cls="AutoencoderKL", module="autoencoder_kl", config=PIXART_VAE, layout="BCHW",
                         spatial=8, temporal=1, tile_px=(512, 512), decode_args=()),
    "flux.2-dev": dict(cls="AutoencoderKLFlux2", module="autoencoder_kl_flux2", config=FLUX2_VAE,
                       layout="BCHW", spatial=8, temporal=1, tile_px=(1024, 1024), decode_args=()),
    # autoencoder_kl_qwenimage.py: 'self.tile_sample_min_height = 256', 'self.tile_sample_min_width = 256'.
    "qwen-image": dict(cls="AutoencoderKLQwenImage", module="autoencoder_kl_qwenimage", config=QWEN_VAE,
                       layout="BCTHW", spatial=8, temporal=4, tile_px=(256, 256), decode_args=()),
    # autoencoder_kl_ltx2.py: 'self.tile_sample_min_height = 512', 'self.tile_sample_min_width = 512';
    # decode(self, z, temb=None, causal=None, return_dict=True): temb None as the pipeline passes it.
    "ltx-2": dict(cls="AutoencoderKLLTX2Video", module="autoencoder_kl_ltx2", config=LTX2_VAE, layout="BCTHW",
                  spatial=32, temporal=8, tile_px=(512, 512), decode_args=(None,)),
    # autoencoder_kl_cogvideox.py: 'self.tile_sample_min_height = sample_height // 2',
    # 'self.tile_sample_min_width = sample_width // 2' (240 x 360).
    "cogvideox-5b": dict(cls="AutoencoderKLCogVideoX", module="autoencoder_kl_cogvideox", config=COGVIDEOX_VAE,
                         layout="BCTHW", spatial=8, temporal=4, tile_px=(240, 360), decode_args=()),
    # autoencoder_kl_wan.py: 'self.tile_sample_min_height = 256', 'self.tile_sample_min_width = 256'.
    "wan2.1-14b": dict(cls="AutoencoderKLWan", module="autoencoder_kl_wan", config=WAN_VAE, layout="BCTHW",
                       spatial=8, temporal=4, tile_px=(256, 256), decode_args=()),
    # autoencoder_kl_hunyuan_video.py: 'self.tile_sample_min_height = 256', 'self.tile_sample_min_width = 256'.
    "hunyuanvideo": dict(cls="AutoencoderKLHunyuanVideo", module="autoencoder_kl_hunyuan_video",
                         config=HUNYUANVIDEO_VAE, layout="BCTHW", spatial=8, temporal=4, tile_px=(256, 256),
                         decode_args=()),
    # autoencoder_kl_mochi.py: 'self.tile_sample_min_height = 256', 'self.tile_sample_min_width = 256'.
    "mochi-1": dict(cls="AutoencoderKLMochi", module="autoencoder_kl_mochi", config=MOCHI_VAE, layout="BCTHW",
                    spatial=8, temporal=6, tile_px=(256, 256), decode_args=()),
}


def vae_latent_channels(spec):
    c = spec["config"]
    return c.get("latent_channels", c.get("z_dim"))


class Stopped(BaseException):
    """SIGTERM or SIGINT during a decode: that row and the rest are out of time."""


STOP = {"measuring": False, "by": None}


def on_signal(signum, _frame):
    """`timeout` stops a run past its budget: note it (and stop the decode under way) so that the
    rows so far are kept and the rest written as out of time."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop is enough
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    STOP["by"] = signal.Signals(signum).name
    if STOP["measuring"]:
        raise Stopped(STOP["by"])


def parse_sizes(text):
    """[(height, width, frames or None)] from 'HxW[xF],...'; exits 2 on a malformed size."""
    sizes = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)x(\d+)(?:x(\d+))?\s*", part)
        if not m or int(m.group(1)) <= 0 or int(m.group(2)) <= 0 or (m.group(3) and int(m.group(3)) <= 0):
            print(f"diffusers_vae_memory: --sizes {text!r}: {part!r} is not HEIGHTxWIDTH or "
                  f"HEIGHTxWIDTHxFRAMES (positive integers)", file=sys.stderr)
            sys.exit(2)
        sizes.append((int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None))
    return sizes


def geometry(model_id, m, size):
    """(height, width, frames, latent shape, notes) of one case, or ValueError where the size
    does not fit the catalog model's VAE factors."""
    spec = MODELS[model_id]
    vae = m["vae"]
    spatial, temporal = int(vae["spatial"]), int(vae["temporal"])
    video = m.get("modality") == "video"
    res = m["default_resolution"]
    height, width, frames = size if size else (res["height"], res["width"], res["frames"])
    if frames is None:
        frames = res["frames"]
    if not video:
        frames = 1  # an image model decodes one image whatever --sizes says
    notes = []
    if spatial != spec["spatial"] or (video and temporal != spec["temporal"]):
        notes.append(f"WARNING catalog vae factors {spatial}/{temporal} != the class's "
                     f"{spec['spatial']}/{spec['temporal']}")
    if height % spatial or width % spatial:
        raise ValueError(f"{height}x{width} is not a multiple of the VAE's spatial factor {spatial}")
    if video and (frames - 1) % temporal:
        raise ValueError(f"{frames} frames: (frames - 1) is not a multiple of the VAE's temporal factor {temporal}")
    channels = vae_latent_channels(spec)
    if m.get("latent_channels") != channels:
        notes.append(f"catalog latent_channels {m.get('latent_channels')}, the VAE's {channels} used")
    h, w = height // spatial, width // spatial
    if spec["layout"] == "BCHW":
        shape = (BATCH, channels, h, w)
    else:
        shape = (BATCH, channels, (frames - 1) // temporal + 1 if video else 1, h, w)
    return height, width, frames, shape, notes


def expected_output(spec, height, width, frames):
    return (BATCH, 3, height, width) if spec["layout"] == "BCHW" else (BATCH, 3, frames, height, width)


def measure(model_id, shape, tiled, torch, deadline, warm_max_s, partial):
    """(weights_bytes, peak_bytes, working_bytes, decode_ms, warm, output shape, decoder params).
    Exceptions propagate to the caller, which names them; `partial` gets weights_bytes and the
    allocation before the decode as soon as they are known, so that an OOM row still gives the
    peak it reached."""
    spec = MODELS[model_id]
    dev = torch.device("cuda")
    module = importlib.import_module(f"diffusers.models.autoencoders.{spec['module']}")
    cls = getattr(module, spec["cls"])
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    with torch.device(dev):  # random init on the GPU in fp32 (fast), then the bf16 cast
        vae = cls(**spec["config"])
    vae = vae.to(dtype=torch.bfloat16).eval()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the fp32 copies' blocks go back: the decode starts from a clean pool
    weights = torch.cuda.memory_allocated() - base
    partial["weights"] = weights
    decoder_params = sum(p.numel() for p in vae.decoder.parameters())
    if tiled:
        if not hasattr(vae, "use_tiling"):
            raise NotImplementedError(f"{spec['cls']} has no tiled decode")
        vae.enable_tiling()  # the class's default tile sizes
    args = spec["decode_args"]

    def decode(z):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        out = vae.decode(z, *args, return_dict=False)[0]
        end.record()
        end.synchronize()
        return out, start.elapsed_time(end), time.perf_counter() - t0

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    partial["before"] = before
    with torch.inference_mode():
        z = torch.randn(shape, device=dev, dtype=torch.bfloat16)  # made after `before`: counted
        out, ms, wall = decode(z)
        out_shape = tuple(out.shape)
        warm = wall <= warm_max_s and time.time() + wall < deadline
        if warm:  # the first decode was the warm-up; time the second
            del out
            out, ms, wall = decode(z)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        del out, z
    del vae
    return weights, peak, peak - before, ms, warm, out_shape, decoder_params


def describe(model, size, tiled, catalog, source):
    """(row without measurement, latent shape or None, notes) of one case; no torch."""
    spec = MODELS[model]
    row = {"model": model, "vae_class": spec["cls"], "height": "", "width": "", "frames": "",
           "latent_shape": "", "tiled": tiled, "weights_bytes": "", "peak_bytes": "", "working_bytes": "",
           "decode_ms": "", "status": "", "source": source}
    if size:
        row.update(height=size[0], width=size[1], frames=size[2] or "")
    try:
        height, width, frames, shape, notes = geometry(model, catalog[model], size)
    except (KeyError, TypeError, ValueError) as e:
        row["status"] = f"error: {type(e).__name__}: {str(e)[:200]}".replace("\n", " ")
        return row, None, []
    row.update(height=height, width=width, frames=frames, latent_shape="x".join(map(str, shape)))
    if tiled and height <= spec["tile_px"][0] and width <= spec["tile_px"][1]:
        notes.append(f"tiling not triggered: {height}x{width} within the class's "
                     f"{spec['tile_px'][0]}x{spec['tile_px'][1]} tile")
    return row, shape, notes


def run_case(row, shape, notes, torch, deadline, warm_max_s):
    """Measures one case into row; Stopped propagates."""
    model, tiled = row["model"], row["tiled"]
    spec = MODELS[model]
    partial = {}
    try:
        STOP["measuring"] = True
        try:
            weights, peak, working, ms, warm, out_shape, dec_params = measure(
                model, shape, tiled, torch, deadline, warm_max_s, partial)
        finally:
            STOP["measuring"] = False
        row.update(weights_bytes=weights, peak_bytes=peak, working_bytes=working, decode_ms=f"{ms:.1f}",
                   status="ok" if warm else "ok (cold)")
        notes.append(f"decoder_params={dec_params}")
        want = expected_output(spec, row["height"], row["width"], row["frames"])
        if out_shape != want:
            notes.append(f"WARNING output {'x'.join(map(str, out_shape))} != expected {'x'.join(map(str, want))}")
    except Exception as e:  # one case's failure must not lose the others
        oom = isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e)
        row["status"] = "oom" if oom else f"error: {type(e).__name__}: {str(e)[:200]}".replace("\n", " ")
        if "weights" in partial:
            row["weights_bytes"] = partial["weights"]
        if oom and "before" in partial:  # the peak reached before the failed allocation
            peak = torch.cuda.max_memory_allocated()
            row.update(peak_bytes=peak, working_bytes=peak - partial["before"])
    # The exception (and the frames it holds: the VAE, the latent) is gone here: free it all.
    gc.collect()
    torch.cuda.empty_cache()


def main():
    ap = diffusers_bench.parser(__doc__.split("\n")[0], budget_s=240)
    ap.add_argument("--sizes", help="HEIGHTxWIDTH[xFRAMES],...: decode these sizes instead of each model's "
                                    "catalog default (an image model takes one frame; a video model given "
                                    "no FRAMES takes its default frames)")
    ap.add_argument("--warm-max-s", type=float, default=5.0,
                    help="repeat a decode (the first then counts as the warm-up) only when it took at most "
                         "this many seconds and the budget allows")
    ap.add_argument("--no-tiled", action="store_true", help="the untiled rows only")
    a = ap.parse_args()
    sizes = parse_sizes(a.sizes) if a.sizes else [None]
    catalog, wanted = diffusers_bench.catalog_and_models(a, MODELS, "diffusers_vae_memory", "VAE")
    deadline = time.time() + a.budget_s
    try:
        out_file = open(a.out, "w", newline="")
    except OSError as e:
        print(f"diffusers_vae_memory: --out {a.out}: {e.strerror}", file=sys.stderr)
        return 2
    writer = csv.DictWriter(out_file, fieldnames=COLUMNS)
    writer.writeheader()
    out_file.flush()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    # Untiled for every model first, then tiled: a short budget still covers every model once.
    cases = [(model, size, tiled) for tiled in ((0,) if a.no_tiled else (0, 1))
             for model in wanted for size in sizes]
    torch = diffusers_bench.import_torch(a)
    ok = 0
    for model, size, tiled in cases:
        row, shape, notes = describe(model, size, tiled, catalog, a.source)
        try:
            if shape is None:
                pass  # the size does not fit this model: its error is the row's status
            elif a.dry_run:
                row["status"] = "dry-run"
            elif STOP["by"] or time.time() > deadline:
                row["status"] = "out of time"
            else:
                run_case(row, shape, notes, torch, deadline, a.warm_max_s)
        except Stopped:
            row.update(weights_bytes="", peak_bytes="", working_bytes="", decode_ms="", status="out of time")
        writer.writerow(row)
        out_file.flush()
        ok += row["status"].startswith("ok") or row["status"] == "dry-run"
        print(" ".join(f"{k}={row[k]}" for k in COLUMNS if k != "source")
              + "".join(f" [{n}]" for n in notes), flush=True)
    out_file.close()
    verb = "listed (dry run)" if a.dry_run else "measured"
    tail = f"; stopped by {STOP['by']}" if STOP["by"] else ""
    print(f"vae memory: {ok} of {len(cases)} decodes {verb}{tail}", flush=True)
    return 1 if STOP["by"] else 0


if __name__ == "__main__":
    sys.exit(main())
