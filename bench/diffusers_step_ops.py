#!/usr/bin/env python3
"""The eager host cost of a denoising step outside the transformer blocks, on diffusers' models.

Counted and timed on diffusers' own transformer models and schedulers. A step is one forward
of the whole transformer plus one scheduler step. The blocks are priced apart
(bench/diffusers_host_ops.py counts one block's ops); everything else in the forward runs once
per step whatever the depth: the patch and text embedders, the timestep, guidance
and pooled-text embedders, the rotary or positional embeddings, the final norm and projection
and the unpatchify. This script builds each catalog model's diffusers transformer with one
layer per block list (Flux and HunyuanVideo: one double- and one single-stream block) and
measures, for one forward fed as the model's diffusers pipeline feeds it:
  total_ops      ATen ops one whole forward dispatches (TorchDispatchMode), views included
  block_ops      of those, the ops dispatched inside the transformer blocks (forward pre-hooks
                 and hooks on every module of the block lists set a flag the counter reads)
  outside_ops    total_ops - block_ops: the per-step ops outside the blocks
  scheduler_ops  ATen ops of one scheduler.step of the scheduler the pipeline uses, at a
                 steady-state step (step COUNTED_STEP, after the earlier steps have run)
  host_us        wall time of one whole forward (the median of repeated timings of `reps`
                 back-to-back forwards, then a sync), hooks removed
Widths (hidden size, heads, head dim, MLP width) come from the catalog (`ditune models --json`);
the other config values are the published checkpoints' transformer configs, written out in
each builder below. Weights are random, initialised on the GPU and cast as from_pretrained
(torch_dtype=torch.bfloat16) casts them: every persistent float tensor to bf16 except those
of the class's _keep_in_fp32_modules (Wan), which stay fp32; non-persistent buffers keep the
dtype they were made in (--plain-cast casts the whole model with .to(torch.bfloat16)).
Inputs are small so the host bounds the forward: 64 image tokens after patching (a 16x16
latent with patch 2 for images, 4 latent frames of 8x8 for video) and 32 text tokens (HunyuanDiT:
77 CLIP + 256 mT5, lengths its model fixes), batch 1 (one CFG branch; the batch does not change
the op count). Schedulers run their default config (Wan's flow-matching UniPC: see SCHED).

  python3 bench/diffusers_step_ops.py --diffusers SRC --models-json M.json --out step_ops.csv
  python3 bench/diffusers_step_ops.py --models-json M.json --out step_ops.csv --dry-run

SRC holds the `diffusers` package (a copy of diffusers' src/ folder). --dry-run imports no
torch and no diffusers: it lists the models it would build, so the CSV and the arguments are
exercised where there is no GPU; its rows carry no measurement.
"""
import gc
import statistics
import sys
import time

import diffusers_bench

IMG_LATENT = 16        # image latent side: 16x16, patch 2 -> 8x8 = 64 tokens (128x128 px at VAE 8x)
VID_FRAMES = 4         # video latent frames (13 frames at VAE 4x temporal)
VID_LATENT = 8         # video latent side: 8x8, patch 2 -> 4x4 per frame, 64 tokens in all
TXT_TOKENS = 32
BATCH = 1
COUNTED_STEP = 3       # the scheduler step counted (0-based); steps 0..2 run first
BLOCK_LISTS = ("transformer_blocks", "single_transformer_blocks", "blocks")
COLUMNS = ["model", "total_ops", "block_ops", "outside_ops", "scheduler_ops", "host_us", "status",
           "source"]

# Catalog model -> the diffusers transformer class and the scheduler its pipeline runs with
# (the scheduler class the published checkpoint ships; default config unless noted in SCHED).
MODELS = {
    "flux.1-dev": ("FluxTransformer2DModel", "FlowMatchEulerDiscreteScheduler"),
    "pixart-alpha": ("PixArtTransformer2DModel", "DPMSolverMultistepScheduler"),
    "sd3-medium": ("SD3Transformer2DModel", "FlowMatchEulerDiscreteScheduler"),
    "hunyuandit-v1.2": ("HunyuanDiT2DModel", "DDPMScheduler"),
    "cogvideox-5b": ("CogVideoXTransformer3DModel", "CogVideoXDPMScheduler"),
    "wan2.1-14b": ("WanTransformer3DModel", "UniPCMultistepScheduler"),
    "qwen-image": ("QwenImageTransformer2DModel", "FlowMatchEulerDiscreteScheduler"),
    "hunyuanvideo": ("HunyuanVideoTransformer3DModel", "FlowMatchEulerDiscreteScheduler"),
}
# Scheduler class -> (module under diffusers.schedulers, config arguments). Default configs,
# except Wan's: WanPipeline is typed FlowMatchEulerDiscreteScheduler, but Wan2.1-T2V-14B-Diffusers
# ships UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
# flow_shift=3.0) (scripts/convert_wan_to_diffusers.py; pipeline_wan.py's example loads it from
# pipe.scheduler.config), and a flow-matching UniPC needs those three values.
SCHED = {
    "FlowMatchEulerDiscreteScheduler": ("scheduling_flow_match_euler_discrete", {}),
    "DPMSolverMultistepScheduler": ("scheduling_dpmsolver_multistep", {}),
    "DDPMScheduler": ("scheduling_ddpm", {}),
    "CogVideoXDPMScheduler": ("scheduling_dpm_cogvideox", {}),
    "UniPCMultistepScheduler": ("scheduling_unipc_multistep",
                                {"prediction_type": "flow_prediction", "use_flow_sigmas": True,
                                 "flow_shift": 3.0}),
}


def widths(m):
    hidden, heads, head_dim = m["hidden"], m["heads"], m["head_dim"]
    if hidden != heads * head_dim:
        raise ValueError(f"catalog hidden {hidden} != heads {heads} x head_dim {head_dim}")
    return hidden, heads, head_dim


def build(model_id, m, torch, dev, t):
    """(model, forward kwargs, latents, noise_pred dtype) for catalog model m with one layer per
    block list, its forward inputs built as its diffusers pipeline builds them at scheduler
    timestep t. `latents` is the pipeline's latent tensor (what scheduler.step gets as sample);
    noise_pred has its shape. The model is built in fp32 on the current default device."""
    hidden, heads, head_dim = widths(m)
    bf16, b, n_txt = torch.bfloat16, BATCH, TXT_TOKENS

    def rnd(*shape, dtype=bf16):
        return torch.randn(*shape, device=dev, dtype=dtype)

    if model_id == "flux.1-dev":
        # FLUX.1-dev transformer config: patch_size 1, in_channels 64 (the 16-channel latent packed
        # 2x2), joint_attention_dim 4096 (T5-XXL), pooled_projection_dim 768 (CLIP-L),
        # guidance_embeds True (guidance-distilled), axes_dims_rope (16, 56, 56); 19 + 38 layers -> 1 + 1.
        from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel
        model = FluxTransformer2DModel(patch_size=1, in_channels=64, out_channels=None, num_layers=1,
                                       num_single_layers=1, attention_head_dim=head_dim,
                                       num_attention_heads=heads, joint_attention_dim=4096,
                                       pooled_projection_dim=768, guidance_embeds=True,
                                       axes_dims_rope=(16, 56, 56))
        # FluxPipeline: packed latents [B, (H/2)(W/2), 64] in the prompt dtype; img_ids [n, 3] =
        # (0, row, col), txt_ids zeros [t, 3], both bf16; timestep t.expand(B).to(bf16) / 1000;
        # guidance torch.full([1], 3.5, fp32).expand(B); joint_attention_kwargs None.
        g = IMG_LATENT // 2
        latents = rnd(b, g * g, 64)
        ids = torch.zeros(g, g, 3)
        ids[..., 1] = ids[..., 1] + torch.arange(g)[:, None]
        ids[..., 2] = ids[..., 2] + torch.arange(g)[None, :]
        kw = {"hidden_states": latents, "timestep": t.expand(b).to(bf16) / 1000,
              "guidance": torch.full([1], 3.5, device=dev, dtype=torch.float32).expand(b),
              "pooled_projections": rnd(b, 768), "encoder_hidden_states": rnd(b, n_txt, 4096),
              "txt_ids": torch.zeros(n_txt, 3, device=dev, dtype=bf16),
              "img_ids": ids.reshape(g * g, 3).to(device=dev, dtype=bf16),
              "joint_attention_kwargs": None, "return_dict": False}
        return model, kw, latents, bf16

    if model_id == "pixart-alpha":
        # PixArt-XL-2-1024-MS transformer config: in_channels 4, out_channels 8 (learned sigma),
        # cross_attention_dim 1152, caption_channels 4096 (T5-XXL), attention_bias True,
        # gelu-approximate, ada_norm_single, norm_elementwise_affine False, norm_eps 1e-6,
        # num_embeds_ada_norm 1000, patch 2; 28 layers -> 1. Its sample_size is 128, which makes
        # use_additional_conditions True and interpolation_scale max(128 // 64, 1) = 2; both are
        # passed explicitly because sample_size is set to the measured latent size here: PatchEmbed
        # keeps the sincos table of a sample_size latent and recomputes the table on every forward
        # for any other size, which the published default (1024 px = a 128 latent) never does.
        from diffusers.models.transformers.pixart_transformer_2d import PixArtTransformer2DModel
        model = PixArtTransformer2DModel(num_attention_heads=heads, attention_head_dim=head_dim,
                                         in_channels=4, out_channels=8, num_layers=1,
                                         cross_attention_dim=hidden, attention_bias=True,
                                         sample_size=IMG_LATENT, patch_size=2,
                                         activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                         norm_type="ada_norm_single", norm_elementwise_affine=False,
                                         norm_eps=1e-6, interpolation_scale=2,
                                         use_additional_conditions=True, caption_channels=4096)
        # PixArtAlphaPipeline: latents [B, 4, h, w]; the T5 mask [B, t] int64 (made a bias in the
        # forward); timestep t[None].expand(B) (int64); added_cond_kwargs resolution [[H, W]] and
        # aspect_ratio [[H / W]] in the prompt dtype (sample_size 128 configs).
        px = IMG_LATENT * 8
        latents = rnd(b, 4, IMG_LATENT, IMG_LATENT)
        cond = {"resolution": torch.tensor([[px, px]]).repeat(b, 1).to(dtype=bf16, device=dev),
                "aspect_ratio": torch.tensor([[1.0]]).repeat(b, 1).to(dtype=bf16, device=dev)}
        kw = {"hidden_states": latents, "encoder_hidden_states": rnd(b, n_txt, 4096),
              "encoder_attention_mask": torch.ones(b, n_txt, dtype=torch.int64, device=dev),
              "timestep": t[None].to(dev).expand(b), "added_cond_kwargs": cond, "return_dict": False}
        return model, kw, latents, bf16

    if model_id == "sd3-medium":
        # stable-diffusion-3-medium-diffusers transformer config: sample_size 128, patch 2,
        # in/out_channels 16, joint_attention_dim 4096, caption_projection_dim 1536 (= hidden),
        # pooled_projection_dim 2048 (CLIP-L + CLIP-G), pos_embed_max_size 192, qk_norm None,
        # dual_attention_layers (); 24 layers -> 1 (the one block is the last-block variant,
        # context_pre_only True: the model makes its last block so).
        from diffusers.models.transformers.transformer_sd3 import SD3Transformer2DModel
        model = SD3Transformer2DModel(sample_size=128, patch_size=2, in_channels=16, num_layers=1,
                                      attention_head_dim=head_dim, num_attention_heads=heads,
                                      joint_attention_dim=4096, caption_projection_dim=hidden,
                                      pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=192,
                                      dual_attention_layers=(), qk_norm=None)
        # StableDiffusion3Pipeline: latents [B, 16, h, w]; timestep t.expand(B) (fp32, 0..1000).
        latents = rnd(b, 16, IMG_LATENT, IMG_LATENT)
        kw = {"hidden_states": latents, "timestep": t.expand(b),
              "encoder_hidden_states": rnd(b, n_txt, 4096), "pooled_projections": rnd(b, 2048),
              "joint_attention_kwargs": None, "return_dict": False}
        return model, kw, latents, bf16

    if model_id == "hunyuandit-v1.2":
        # HunyuanDiT-v1.2-Diffusers transformer config: hidden_size 1408, 16 heads x 88, in_channels
        # 4, patch 2, learn_sigma True, mlp_ratio 4.3637 (-> 6144), cross_attention_dim 1024 (CLIP),
        # cross_attention_dim_t5 2048 (mT5), pooled_projection_dim 1024, text_len 77, text_len_t5
        # 256, sample_size 128, use_style_cond_and_image_meta_size False (v1.2; True up to v1.1,
        # scripts/convert_hunyuandit_to_diffusers.py); 40 layers -> 1 (the long skips of the later
        # half live in the blocks; outside them the model only keeps a Python list).
        # The text lengths are fixed by the model: text_embedding_padding is [77 + 256, 1024] and the
        # mT5 pooler's positional embedding [257, 2048], so the text is 77 CLIP + 256 mT5 tokens.
        from diffusers.models.embeddings import get_2d_rotary_pos_embed
        from diffusers.models.transformers.hunyuan_transformer_2d import HunyuanDiT2DModel
        model = HunyuanDiT2DModel(num_attention_heads=heads, attention_head_dim=head_dim, in_channels=4,
                                  patch_size=2, activation_fn="gelu-approximate", sample_size=128,
                                  hidden_size=hidden, num_layers=1, mlp_ratio=4.3637, learn_sigma=True,
                                  cross_attention_dim=1024, norm_type="layer_norm",
                                  cross_attention_dim_t5=2048, pooled_projection_dim=1024, text_len=77,
                                  text_len_t5=256, use_style_cond_and_image_meta_size=False)
        # HunyuanDiTPipeline: latents [B, 4, h, w]; timestep torch.tensor([t] * B).to(latents dtype);
        # the two int64 tokenizer masks; image_meta_size [[H, W, H, W, 0, 0]] and style [0] (passed,
        # unused by v1.2); image_rotary_emb = get_2d_rotary_pos_embed(head_dim, crop, (gh, gw)) with
        # the crop of the grid in a 512 // 8 // 2 = 32 base grid (a square grid fills it).
        px, grid, base = IMG_LATENT * 8, IMG_LATENT // 2, 512 // 8 // 2
        latents = rnd(b, 4, IMG_LATENT, IMG_LATENT)
        rope = get_2d_rotary_pos_embed(head_dim, ((0, 0), (base, base)), (grid, grid), device=dev,
                                       output_type="pt")
        kw = {"hidden_states": latents,
              "timestep": torch.tensor([int(t)] * b, device=dev).to(dtype=bf16),
              "encoder_hidden_states": rnd(b, 77, 1024),
              "text_embedding_mask": torch.ones(b, 77, dtype=torch.int64, device=dev),
              "encoder_hidden_states_t5": rnd(b, 256, 2048),
              "text_embedding_mask_t5": torch.ones(b, 256, dtype=torch.int64, device=dev),
              "image_meta_size": torch.tensor([[px, px, px, px, 0, 0]] * b, dtype=bf16, device=dev),
              "style": torch.zeros(b, dtype=torch.int64, device=dev), "image_rotary_emb": rope,
              "return_dict": False}
        return model, kw, latents, bf16

    if model_id == "cogvideox-5b":
        # CogVideoX-5b transformer config: 48 heads x 64, in/out_channels 16, time_embed_dim 512,
        # text_embed_dim 4096, attention_bias True, sample 60 x 90 x 49, patch 2 (no patch_size_t),
        # temporal_compression_ratio 4, max_text_seq_length 226, gelu-approximate, silu timestep
        # activation, norm_elementwise_affine True, norm_eps 1e-5, spatial_interpolation_scale
        # 1.875, use_rotary_positional_embeddings True (no sincos table), no learned positions;
        # 42 layers -> 1.
        from diffusers.models.embeddings import get_3d_rotary_pos_embed
        from diffusers.models.transformers.cogvideox_transformer_3d import CogVideoXTransformer3DModel
        model = CogVideoXTransformer3DModel(num_attention_heads=heads, attention_head_dim=head_dim,
                                            in_channels=16, out_channels=16, flip_sin_to_cos=True,
                                            freq_shift=0, time_embed_dim=512, ofs_embed_dim=None,
                                            text_embed_dim=4096, num_layers=1, dropout=0.0,
                                            attention_bias=True, sample_width=90, sample_height=60,
                                            sample_frames=49, patch_size=2, patch_size_t=None,
                                            temporal_compression_ratio=4, max_text_seq_length=226,
                                            activation_fn="gelu-approximate", timestep_activation_fn="silu",
                                            norm_elementwise_affine=True, norm_eps=1e-5,
                                            spatial_interpolation_scale=1.875,
                                            temporal_interpolation_scale=1.0,
                                            use_rotary_positional_embeddings=True,
                                            use_learned_positional_embeddings=False, patch_bias=True)
        # CogVideoXPipeline: latents [B, F, 16, h, w]; timestep t.expand(B) (int64); image_rotary_emb
        # from _prepare_rotary_positional_embeddings: get_3d_rotary_pos_embed(head_dim, crop,
        # (gh, gw), F) with the grid fitted into the 45 x 30 base grid (sample 90 x 60 // patch).
        # The pipeline casts noise_pred to fp32 before scheduler.step; the latents stay bf16.
        grid = VID_LATENT // 2
        latents = rnd(b, VID_FRAMES, 16, VID_LATENT, VID_LATENT)
        rope = get_3d_rotary_pos_embed(embed_dim=head_dim, crops_coords=fit_crop((grid, grid), 45, 30),
                                       grid_size=(grid, grid), temporal_size=VID_FRAMES, device=dev)
        kw = {"hidden_states": latents, "encoder_hidden_states": rnd(b, n_txt, 4096),
              "timestep": t.expand(b), "image_rotary_emb": rope, "attention_kwargs": None,
              "return_dict": False}
        return model, kw, latents, torch.float32

    if model_id == "wan2.1-14b":
        # Wan2.1-T2V-14B-Diffusers transformer config: patch (1, 2, 2), 40 heads x 128, in/out 16,
        # text_dim 4096 (umT5-XXL), freq_dim 256, ffn_dim 13824, cross_attn_norm True, qk_norm
        # rms_norm_across_heads, eps 1e-6, no image_dim / added_kv_proj_dim, rope_max_seq_len 1024;
        # 40 layers -> 1. _keep_in_fp32_modules (time_embedder, scale_shift_table, norm1-3) stay fp32.
        from diffusers.models.transformers.transformer_wan import WanTransformer3DModel
        model = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=heads,
                                      attention_head_dim=head_dim, in_channels=16, out_channels=16,
                                      text_dim=4096, freq_dim=256, ffn_dim=m["mlp_hidden"], num_layers=1,
                                      cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
                                      image_dim=None, added_kv_proj_dim=None, rope_max_seq_len=1024,
                                      pos_embed_seq_len=None)
        # WanPipeline: latents [B, 16, F, h, w] in fp32, fed as latents.to(bf16); timestep
        # t.expand(B) (UniPC's int64 timesteps); noise_pred bf16, scheduler.step on fp32 latents.
        latents = rnd(b, 16, VID_FRAMES, VID_LATENT, VID_LATENT, dtype=torch.float32)
        kw = {"hidden_states": latents.to(bf16), "timestep": t.expand(b),
              "encoder_hidden_states": rnd(b, n_txt, 4096), "attention_kwargs": None,
              "return_dict": False}
        return model, kw, latents, bf16

    if model_id == "qwen-image":
        # Qwen-Image transformer config: patch 2, in_channels 64 (packed), out_channels 16, 24 heads
        # x 128, joint_attention_dim 3584 (Qwen2.5-VL-7B), guidance_embeds False, axes_dims_rope
        # (16, 56, 56), zero_cond_t / use_additional_t_cond / use_layer3d_rope False; 60 layers -> 1.
        from diffusers.models.transformers.transformer_qwenimage import QwenImageTransformer2DModel
        model = QwenImageTransformer2DModel(patch_size=2, in_channels=64, out_channels=16, num_layers=1,
                                            attention_head_dim=head_dim, num_attention_heads=heads,
                                            joint_attention_dim=3584, guidance_embeds=False,
                                            axes_dims_rope=(16, 56, 56), zero_cond_t=False,
                                            use_additional_t_cond=False, use_layer3d_rope=False)
        # QwenImagePipeline: packed latents [B, (H/2)(W/2), 64] in the prompt dtype; timestep
        # t.expand(B).to(bf16) / 1000; guidance None; img_shapes [[(1, h/2, w/2)]] * B;
        # attention_kwargs {}. encode_prompt drops an all-ones mask (prompt_embeds_mask.all() ->
        # None), so one unpadded prompt passes encoder_hidden_states_mask None. This forward has no
        # txt_seq_lens argument: the text length comes from encoder_hidden_states.
        g = IMG_LATENT // 2
        latents = rnd(b, g * g, 64)
        kw = {"hidden_states": latents, "timestep": t.expand(b).to(bf16) / 1000, "guidance": None,
              "encoder_hidden_states_mask": None, "encoder_hidden_states": rnd(b, n_txt, 3584),
              "img_shapes": [[(1, g, g)]] * b, "attention_kwargs": {}, "return_dict": False}
        return model, kw, latents, bf16

    if model_id == "hunyuanvideo":
        # HunyuanVideo (hunyuanvideo-community) transformer config: in/out 16, 24 heads x 128,
        # num_refiner_layers 2, mlp_ratio 4.0, patch 2, patch_size_t 1, qk_norm rms_norm,
        # guidance_embeds True, text_embed_dim 4096 (LLaVA-LLaMA-3-8B), pooled_projection_dim 768
        # (CLIP-L), rope_theta 256, rope_axes_dim (16, 56, 56), no image_condition_type;
        # 20 + 40 layers -> 1 + 1. The two-block token refiner (context_embedder) is outside the
        # block lists, so its ops count as outside ops: it runs once per forward.
        from diffusers.models.transformers.transformer_hunyuan_video import HunyuanVideoTransformer3DModel
        model = HunyuanVideoTransformer3DModel(in_channels=16, out_channels=16, num_attention_heads=heads,
                                               attention_head_dim=head_dim, num_layers=1, num_single_layers=1,
                                               num_refiner_layers=2, mlp_ratio=m["mlp_hidden"] / hidden,
                                               patch_size=2, patch_size_t=1, qk_norm="rms_norm",
                                               guidance_embeds=True, text_embed_dim=4096,
                                               pooled_projection_dim=768, rope_theta=256.0,
                                               rope_axes_dim=(16, 56, 56), image_condition_type=None)
        # HunyuanVideoPipeline: latents [B, 16, F, h, w] in fp32, fed as latents.to(bf16); timestep
        # t.expand(B).to(fp32); prompt mask and pooled CLIP in bf16; guidance
        # torch.tensor([6.0] * B, bf16) * 1000.0 (default guidance_scale 6.0).
        latents = rnd(b, 16, VID_FRAMES, VID_LATENT, VID_LATENT, dtype=torch.float32)
        kw = {"hidden_states": latents.to(bf16), "timestep": t.expand(b).to(torch.float32),
              "encoder_hidden_states": rnd(b, n_txt, 4096),
              "encoder_attention_mask": torch.ones(b, n_txt, dtype=bf16, device=dev),
              "pooled_projections": rnd(b, 768),
              "guidance": torch.tensor([6.0] * b, dtype=bf16, device=dev) * 1000.0,
              "attention_kwargs": None, "return_dict": False}
        return model, kw, latents, bf16

    raise ValueError(f"unknown model {model_id}")


def fit_crop(grid, base_w, base_h):
    """The crop of a (rows, cols) token grid resized to fit a base_w x base_h grid, centred, as
    CogVideoXPipeline computes it: ((top, left), (bottom, right))."""
    rows, cols = grid
    if rows / cols > base_h / base_w:
        height, width = base_h, int(round(base_h / rows * cols))
    else:
        width, height = base_w, int(round(base_w / cols * rows))
    top, left = int(round((base_h - height) / 2.0)), int(round((base_w - width) / 2.0))
    return (top, left), (top + height, left + width)


def cast_like_from_pretrained(model, torch, dtype):
    """Cast as ModelMixin.from_pretrained(torch_dtype=dtype) leaves a model: every floating
    parameter and persistent buffer (what the checkpoint holds) to dtype, or to fp32 where a
    name part is one of the class's _keep_in_fp32_modules; non-persistent buffers untouched."""
    keep = list(getattr(model, "_keep_in_fp32_modules", None) or [])
    for mod_name, mod in model.named_modules():
        prefix = mod_name.split(".") if mod_name else []
        for name, p in list(mod._parameters.items()):
            if p is not None and torch.is_floating_point(p):
                want = torch.float32 if any(k in prefix + [name] for k in keep) else dtype
                p.data = p.data.to(want)
        for name, buf in list(mod._buffers.items()):
            if buf is None or name in mod._non_persistent_buffers_set or not torch.is_floating_point(buf):
                continue
            want = torch.float32 if any(k in prefix + [name] for k in keep) else dtype
            mod._buffers[name] = buf.to(want)
    return model


def make_scheduler(model_id, steps, dev):
    import importlib
    cls_name = MODELS[model_id][1]
    module, config = SCHED[cls_name]
    cls = getattr(importlib.import_module(f"diffusers.schedulers.{module}"), cls_name)
    sched = cls(**config)
    sched.set_timesteps(steps, device=dev)
    if hasattr(sched, "set_begin_index"):  # as the pipelines do (no first-step index search)
        sched.set_begin_index(0)
    return sched


def scheduler_step(model_id, sched, noise_pred, i, latents, state):
    """One pipeline scheduler step at index i; returns the new latents."""
    timesteps = sched.timesteps
    t = timesteps[i]
    if MODELS[model_id][1] == "CogVideoXDPMScheduler":
        # CogVideoXPipeline: step(noise_pred, old_pred_original_sample, t, t_back, latents, eta=0.0,
        # generator=None, return_dict=False), carrying the predicted x0 to the next step.
        latents, state["old"] = sched.step(noise_pred, state.get("old"), t,
                                           timesteps[i - 1] if i > 0 else None, latents,
                                           eta=0.0, generator=None, return_dict=False)
        return latents
    return sched.step(noise_pred, t, latents, return_dict=False)[0]


def measure(model_id, m, torch, reps, rounds, plain_cast):
    from torch.utils._python_dispatch import TorchDispatchMode
    dev = torch.device("cuda")
    torch.manual_seed(0)
    sched = make_scheduler(model_id, m.get("default_steps") or 28, dev)
    t = sched.timesteps[COUNTED_STEP]
    with torch.device(dev):  # weights initialised on the GPU in fp32, then cast
        model, kw, latents, noise_dtype = build(model_id, m, torch, dev, t)
    if plain_cast:
        model = model.to(torch.bfloat16)
    else:
        model = cast_like_from_pretrained(model, torch, torch.bfloat16)
    model = model.eval()
    block_mods = [blk for name in BLOCK_LISTS if isinstance(getattr(model, name, None), torch.nn.ModuleList)
                  for blk in getattr(model, name)]
    if not block_mods:
        raise RuntimeError(f"{type(model).__name__} has none of the block lists {BLOCK_LISTS}")

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = 0
            self.inside = 0
            self.depth = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops += 1
            if self.depth:
                self.inside += 1
            return func(*args, **(kwargs or {}))

    def fwd():
        return model(**kw)

    with torch.inference_mode():
        for _ in range(5):  # first calls fill caches (cuBLAS handles, Qwen's RoPE lru_cache)
            fwd()
        torch.cuda.synchronize()

        counter = Count()

        def enter(_mod, _args):
            counter.depth += 1

        def leave(_mod, _args, _out):
            counter.depth -= 1

        hooks = [h for blk in block_mods
                 for h in (blk.register_forward_pre_hook(enter), blk.register_forward_hook(leave))]
        try:
            with counter:
                fwd()
            torch.cuda.synchronize()
        finally:
            for h in hooks:
                h.remove()
        if counter.depth != 0:
            raise RuntimeError(f"block hooks unbalanced (depth {counter.depth})")

        times = []
        for _ in range(rounds):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                fwd()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / reps * 1e6)

        # scheduler.step on the pipeline's latents with a noise_pred of their shape: steps
        # 0..COUNTED_STEP-1 run first (multistep solvers fill their history), step COUNTED_STEP is counted.
        # CogVideoXPipeline casts the latents back to the prompt dtype after every step (its
        # scheduler returns fp32 from the fp32 noise_pred); the other pipelines keep what step returns.
        noise_pred = torch.randn(latents.shape, device=dev, dtype=noise_dtype)
        state = {}
        sample = latents.clone()
        for i in range(COUNTED_STEP):
            sample = scheduler_step(model_id, sched, noise_pred, i, sample, state)
            if model_id == "cogvideox-5b":
                sample = sample.to(latents.dtype)
        torch.cuda.synchronize()
        sched_counter = Count()
        with sched_counter:
            scheduler_step(model_id, sched, noise_pred, COUNTED_STEP, sample, state)
        torch.cuda.synchronize()
    del model, kw, latents, noise_pred, sample, state, sched
    torch.cuda.empty_cache()
    return counter.ops, counter.inside, sched_counter.ops, statistics.median(times)


def main():
    ap = diffusers_bench.parser(__doc__.split("\n")[0], budget_s=120)
    ap.add_argument("--plain-cast", action="store_true",
                    help="cast the whole model with .to(torch.bfloat16) instead of as from_pretrained does")
    a = ap.parse_args()
    catalog, wanted = diffusers_bench.catalog_and_models(a, MODELS, "diffusers_step_ops", "model")
    rows = []
    t_start = time.time()
    torch = diffusers_bench.import_torch(a)
    empty = {"total_ops": "", "block_ops": "", "outside_ops": "", "scheduler_ops": "", "host_us": ""}
    for model in wanted:
        row = {"model": model, "source": a.source}
        if a.dry_run:
            try:
                widths(catalog[model])
                row.update(empty, status="dry-run")
            except (KeyError, ValueError) as e:
                row.update(empty, status=f"error: {type(e).__name__}: {e}")
        elif time.time() - t_start > a.budget_s:
            row.update(empty, status="out of time")
        else:
            try:
                total, inside, sched_ops, host_us = measure(model, catalog[model], torch, a.reps, a.rounds,
                                                            a.plain_cast)
                row.update(total_ops=total, block_ops=inside, outside_ops=total - inside,
                           scheduler_ops=sched_ops, host_us=f"{host_us:.1f}", status="ok")
            except Exception as e:  # one model's failure must not lose the others
                row.update(empty, status=f"error: {type(e).__name__}: {str(e)[:160]}".replace("\n", " "))
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        rows.append(row)
        transformer, scheduler = MODELS[model]
        print(" ".join(f"{k}={row[k]}" for k in COLUMNS if k != "source")
              + f" transformer={transformer} scheduler={scheduler}", flush=True)
    diffusers_bench.write_rows(a, COLUMNS, rows, "step ops", "models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
