#!/usr/bin/env python3
"""What one DiT block costs the host in eager PyTorch, counted and timed on diffusers' own
block classes: the framework ops it dispatches, the kernels it launches, and the host time
of one forward where the device is not the bottleneck.

An eager runtime (xDiT, diffusers, cache-dit, SGLang and vLLM-Omni all run diffusers'
blocks or copies of them) issues every op of a block from Python. At small shares of the
sequence — many GPUs, small images — the GPU finishes each kernel before the host has
launched the next, and a step costs the host's time, not the device's. ditune prices that
as framework ops x host time per op (costmodels/dit_ops.cc counts the ops per block
family). This script measures both factors on the real code:
  aten_ops      ops dispatched to ATen in one forward (TorchDispatchMode), views included
  view_ops      of those, views and reshapes (no device work)
  kernels       device activities in one forward (torch.profiler: kernels, memcpy, memset)
  host_us       wall time of one forward at a token count where the host bounds it (the
                median of repeated timings of `reps` back-to-back forwards, then a sync)
  device_us     the device's busy time in one forward (sum of its profiled activities)
Blocks are built at each catalog model's widths (`ditune models --json`: hidden size, heads,
head dim, MLP width) with random bf16 weights on the GPU; the block classes and their
arguments are those the model's diffusers transformer builds (the source commit is printed
in every row). Tokens are few (64 image, 32 text) so the host bounds the forward.

  python3 bench/diffusers_host_ops.py --diffusers SRC --models-json M.json --out host_ops.csv
  python3 bench/diffusers_host_ops.py --models-json M.json --out host_ops.csv --dry-run

SRC holds the `diffusers` package (a copy of diffusers' src/ folder). --dry-run imports no
torch and no diffusers: it lists the blocks it would build, so the CSV and the arguments are
exercised where there is no GPU; its rows carry no measurement.
"""
import statistics
import sys
import time

import diffusers_bench

IMG_TOKENS = 64
TXT_TOKENS = 32
COLUMNS = ["model", "family", "block_class", "img_tokens", "txt_tokens", "aten_ops", "view_ops",
           "kernels", "host_us", "device_us", "status", "source"]

# Catalog model -> the diffusers transformer whose blocks it runs, and each block family's
# builder (below). Models whose transformer diffusers does not ship are left out.
MODELS = {
    "flux.1-dev": ["flux_double", "flux_single"],
    "sd3-medium": ["sd3_joint"],
    "pixart-alpha": ["pixart_cross"],
    "hunyuandit-v1.2": ["hunyuandit_cross"],
    "cogvideox-5b": ["cogvideox_joint"],
    "wan2.1-14b": ["wan_cross"],
    "hunyuanvideo": ["hunyuanvideo_double", "hunyuanvideo_single"],
    "qwen-image": ["qwenimage_joint"],
    "latte-1": ["latte_spatial", "latte_temporal"],
    "sd3.5-large": ["sd35_joint"],
    "cogvideox-2b": ["cogvideox2b_joint"],
    "consisid": ["consisid_joint"],
    "mochi-1": ["mochi_joint"],
    "sana-1600m": ["sana_cross"],
    "flux.2-dev": ["flux2_double", "flux2_single"],
    "z-image-turbo": ["zimage_single"],
    "hunyuanvideo-1.5": ["hunyuanvideo15_joint"],
    "wan2.1-i2v-14b": ["wan_i2v_cross"],
    # ltx-2 is left out: LTX2VideoTransformerBlock is one audio-video block whose forward always
    # runs the audio self-attention, audio text cross-attention and audio FFN.
}
FAMILY = {
    "flux_double": "joint", "flux_single": "single", "sd3_joint": "joint", "pixart_cross": "cross",
    "hunyuandit_cross": "cross", "cogvideox_joint": "joint", "wan_cross": "cross",
    "hunyuanvideo_double": "joint", "hunyuanvideo_single": "single", "qwenimage_joint": "joint",
    "latte_spatial": "spatial", "latte_temporal": "temporal",
    "sd35_joint": "joint", "cogvideox2b_joint": "joint", "consisid_joint": "joint",
    "mochi_joint": "joint", "sana_cross": "cross", "flux2_double": "joint", "flux2_single": "single",
    "zimage_single": "single", "hunyuanvideo15_joint": "joint", "wan_i2v_cross": "cross",
}


def build(kind, m, torch, dev, n=IMG_TOKENS, t=TXT_TOKENS):
    """(module, args, kwargs) for one block of `kind` at model m's widths, with n image and t
    text tokens."""
    hidden, heads, head_dim, mlp = m["hidden"], m["heads"], m["head_dim"], m["mlp_hidden"]
    b = 1

    def rnd(*shape):  # activations in the weights' precision
        return torch.randn(*shape, device=dev, dtype=torch.bfloat16)

    x = rnd(b, n, hidden)
    ctx = rnd(b, t, hidden)

    def cos_sin(s, shape=None):  # rotary tables in fp32, as the transformers compute them
        c = torch.randn(s, head_dim, device=dev).cos()
        sn = torch.randn(s, head_dim, device=dev).sin()
        return (c, sn) if shape is None else (c.reshape(shape), sn.reshape(shape))

    if kind in ("flux_double", "flux_single"):
        from diffusers.models.transformers import transformer_flux as tf
        temb = rnd(b, hidden)
        rope = cos_sin(n + t)
        if kind == "flux_double":
            blk = tf.FluxTransformerBlock(hidden, heads, head_dim)
        else:
            blk = tf.FluxSingleTransformerBlock(hidden, heads, head_dim, mlp_ratio=mlp / hidden)
        return blk, (x, ctx, temb), {"image_rotary_emb": rope}
    if kind == "sd3_joint":
        from diffusers.models.attention import JointTransformerBlock
        temb = rnd(b, hidden)
        blk = JointTransformerBlock(hidden, heads, head_dim, context_pre_only=False)
        return blk, (), {"hidden_states": x, "encoder_hidden_states": ctx, "temb": temb}
    if kind in ("pixart_cross", "latte_spatial", "latte_temporal"):
        # PixArtTransformer2DModel and LatteTransformer3DModel: BasicTransformerBlock with
        # ada_norm_single, the timestep embedding [B, 6 x hidden]; Latte's temporal blocks
        # have no cross-attention.
        from diffusers.models.attention import BasicTransformerBlock
        cross = None if kind == "latte_temporal" else hidden
        blk = BasicTransformerBlock(hidden, heads, head_dim, cross_attention_dim=cross,
                                    activation_fn="gelu-approximate", attention_bias=True,
                                    norm_type="ada_norm_single", norm_elementwise_affine=False,
                                    norm_eps=1e-6)
        kw = {"hidden_states": x, "timestep": rnd(b, 6 * hidden)}
        if cross is not None:
            kw["encoder_hidden_states"] = ctx
        return blk, (), kw
    if kind == "hunyuandit_cross":
        # HunyuanDiT2DModel: cross_attention_dim 1024 (HunyuanDiT-v1.2's config), a long skip
        # in the later half of the blocks (the measured block has one).
        from diffusers.models.transformers.hunyuan_transformer_2d import HunyuanDiTBlock
        blk = HunyuanDiTBlock(hidden, heads, cross_attention_dim=1024, activation_fn="gelu-approximate",
                              ff_inner_dim=mlp, qk_norm=True, skip=True)
        kw = {"hidden_states": x, "encoder_hidden_states": rnd(b, t, 1024),
              "temb": rnd(b, hidden), "image_rotary_emb": cos_sin(n),
              "skip": rnd(b, n, hidden)}
        return blk, (), kw
    if kind == "cogvideox_joint":
        # CogVideoXTransformer3DModel: time_embed_dim 512, gelu-approximate, biases, eps 1e-5.
        from diffusers.models.transformers.cogvideox_transformer_3d import CogVideoXBlock
        blk = CogVideoXBlock(hidden, heads, head_dim, time_embed_dim=512, activation_fn="gelu-approximate",
                             attention_bias=True, norm_elementwise_affine=True, norm_eps=1e-5)
        kw = {"hidden_states": x, "encoder_hidden_states": ctx, "temb": rnd(b, 512),
              "image_rotary_emb": cos_sin(n)}
        return blk, (), kw
    if kind == "wan_cross":
        from diffusers.models.transformers.transformer_wan import WanTransformerBlock
        blk = WanTransformerBlock(hidden, mlp, heads, qk_norm="rms_norm_across_heads", cross_attn_norm=True)
        kw = {"hidden_states": x, "encoder_hidden_states": ctx, "temb": rnd(b, 6, hidden),
              "rotary_emb": cos_sin(n, (1, n, 1, head_dim))}
        return blk, (), kw
    if kind in ("hunyuanvideo_double", "hunyuanvideo_single"):
        from diffusers.models.transformers import transformer_hunyuan_video as hv
        temb = rnd(b, hidden)
        if kind == "hunyuanvideo_double":
            blk = hv.HunyuanVideoTransformerBlock(heads, head_dim, mlp_ratio=mlp / hidden)
            kw = {"freqs_cis": cos_sin(n)}
        else:
            blk = hv.HunyuanVideoSingleTransformerBlock(heads, head_dim, mlp_ratio=mlp / hidden)
            kw = {"image_rotary_emb": cos_sin(n)}
        return blk, (x, ctx, temb), kw
    if kind == "qwenimage_joint":
        from diffusers.models.transformers.transformer_qwenimage import QwenImageTransformerBlock
        blk = QwenImageTransformerBlock(hidden, heads, head_dim)
        freqs = lambda s: torch.polar(torch.ones(s, head_dim // 2, device=dev),  # noqa: E731
                                      torch.randn(s, head_dim // 2, device=dev))
        kw = {"hidden_states": x, "encoder_hidden_states": ctx, "encoder_hidden_states_mask": None,
              "temb": rnd(b, hidden), "image_rotary_emb": (freqs(n), freqs(t))}
        return blk, (), kw
    if kind == "sd35_joint":
        # SD3Transformer2DModel with SD3.5-Large's config: qk_norm "rms_norm", dual_attention_layers
        # [] (only SD3.5-Medium has MMDiT-X blocks); a middle block has context_pre_only False.
        from diffusers.models.attention import JointTransformerBlock
        blk = JointTransformerBlock(hidden, heads, head_dim, context_pre_only=False, qk_norm="rms_norm",
                                    use_dual_attention=False)
        return blk, (), {"hidden_states": x, "encoder_hidden_states": ctx, "temb": rnd(b, hidden)}
    if kind in ("cogvideox2b_joint", "consisid_joint"):
        # CogVideoX-2B: the 5B's block arguments (time_embed_dim 512, biases, eps 1e-5) and
        # use_rotary_positional_embeddings False, so the model passes image_rotary_emb None.
        # ConsisID (CogVideoX-5B-I2V based) builds ConsisIDBlock with the same arguments and uses
        # rotary embeddings; its face perceiver cross-attention (every 2nd block) runs outside
        # the block class and is not counted here.
        if kind == "cogvideox2b_joint":
            from diffusers.models.transformers.cogvideox_transformer_3d import CogVideoXBlock as Blk
            rope = None
        else:
            from diffusers.models.transformers.consisid_transformer_3d import ConsisIDBlock as Blk
            rope = cos_sin(n)
        blk = Blk(hidden, heads, head_dim, time_embed_dim=512, activation_fn="gelu-approximate",
                  attention_bias=True, norm_elementwise_affine=True, norm_eps=1e-5)
        kw = {"hidden_states": x, "encoder_hidden_states": ctx, "temb": rnd(b, 512),
              "image_rotary_emb": rope}
        return blk, (), kw
    if kind == "mochi_joint":
        # MochiTransformer3DModel defaults = mochi-1-preview's config: pooled_projection_dim 1536 (the
        # text stream's width), qk_norm rms_norm, swiglu; a middle block has context_pre_only False.
        # RoPE (cos, sin) are [n, heads, head_dim/2] in fp32 (MochiRoPE); the text mask is [B, t] bool.
        from diffusers.models.transformers.transformer_mochi import MochiTransformerBlock
        txt = m.get("text_stream_hidden") or 1536
        blk = MochiTransformerBlock(hidden, heads, head_dim, pooled_projection_dim=txt, qk_norm="rms_norm",
                                    activation_fn="swiglu", context_pre_only=False)
        ang = torch.randn(n, heads, head_dim // 2, device=dev)
        kw = {"hidden_states": x, "encoder_hidden_states": rnd(b, t, txt), "temb": rnd(b, hidden),
              "encoder_attention_mask": torch.ones(b, t, dtype=torch.bool, device=dev),
              "image_rotary_emb": (ang.cos(), ang.sin())}
        return blk, (), kw
    if kind == "sana_cross":
        # SanaTransformer2DModel, Sana_1600M_1024px config: cross-attention 20 heads x 112,
        # cross_attention_dim 2240, attention_bias False, qk_norm None (only SANA 1.5 / Sprint set
        # it), mlp_ratio 2.5, norm_eps 1e-6. The timestep is AdaLayerNormSingle's [B, 6 x hidden];
        # the prompt mask arrives as the additive bias [B, 1, t] the model makes of it. The
        # GLUMBConv needs the token grid: 8 rows of n/8 tokens.
        from diffusers.models.transformers.sana_transformer import SanaTransformerBlock
        blk = SanaTransformerBlock(hidden, heads, head_dim, num_cross_attention_heads=20,
                                   cross_attention_head_dim=112, cross_attention_dim=hidden,
                                   attention_bias=False, norm_elementwise_affine=False, norm_eps=1e-6,
                                   mlp_ratio=mlp / hidden, qk_norm=None)
        kw = {"hidden_states": x, "attention_mask": None, "encoder_hidden_states": ctx,
              "encoder_attention_mask": torch.zeros(b, 1, t, device=dev, dtype=torch.bfloat16),
              "timestep": rnd(b, 6 * hidden), "height": 8, "width": n // 8}
        return blk, (), kw
    if kind in ("flux2_double", "flux2_single"):
        # Flux2Transformer2DModel defaults = FLUX.2-dev: mlp_ratio 3.0, eps 1e-6, bias False. The
        # modulations are computed once per step outside the blocks (double: [B, 6 x hidden] per
        # stream, single: [B, 3 x hidden]); RoPE is [t + n, head_dim] for text then image tokens.
        # Single blocks get the [text; image] sequence with encoder_hidden_states None, as the model.
        from diffusers.models.transformers import transformer_flux2 as tf2
        rope = cos_sin(t + n)
        if kind == "flux2_double":
            blk = tf2.Flux2TransformerBlock(hidden, heads, head_dim, mlp_ratio=mlp / hidden, eps=1e-6, bias=False)
            kw = {"hidden_states": x, "encoder_hidden_states": ctx, "temb_mod_img": rnd(b, 6 * hidden),
                  "temb_mod_txt": rnd(b, 6 * hidden), "image_rotary_emb": rope}
        else:
            blk = tf2.Flux2SingleTransformerBlock(hidden, heads, head_dim, mlp_ratio=mlp / hidden, eps=1e-6,
                                                  bias=False)
            kw = {"hidden_states": torch.cat([ctx, x], dim=1), "encoder_hidden_states": None,
                  "temb_mod": rnd(b, 3 * hidden), "image_rotary_emb": rope}
        return blk, (), kw
    if kind == "zimage_single":
        # ZImageTransformer2DModel main layer, Z-Image-Turbo config: n_heads = n_kv_heads 30,
        # norm_eps 1e-5, qk_norm True, modulation on. The unified sequence is [image; caption]; with
        # one unpadded sample attn_mask is None. freqs_cis is complex64 [B, n + t, head_dim/2];
        # adaln_input the 256-wide timestep embedding.
        from diffusers.models.transformers.transformer_z_image import ZImageTransformerBlock
        blk = ZImageTransformerBlock(0, hidden, heads, heads, 1e-5, True, modulation=True)
        freqs = torch.polar(torch.ones(b, n + t, head_dim // 2, device=dev),
                            torch.randn(b, n + t, head_dim // 2, device=dev))
        kw = {"x": torch.cat([x, ctx], dim=1), "attn_mask": None, "freqs_cis": freqs,
              "adaln_input": rnd(b, min(hidden, 256))}
        return blk, (), kw
    if kind == "hunyuanvideo15_joint":
        # HunyuanVideo15Transformer3DModel: mlp_ratio 4.0, qk_norm rms_norm (720p T2V config). The
        # joint-text mask [B, t] bool is required (the processor pads it over the image tokens);
        # RoPE (cos, sin) are [n, head_dim] (axes 16 + 56 + 56).
        from diffusers.models.transformers.transformer_hunyuan_video15 import HunyuanVideo15TransformerBlock
        blk = HunyuanVideo15TransformerBlock(heads, head_dim, mlp_ratio=mlp / hidden, qk_norm="rms_norm")
        mask = torch.ones(b, t, dtype=torch.bool, device=dev)
        return blk, (x, ctx, rnd(b, hidden), mask, cos_sin(n)), {}
    if kind == "wan_i2v_cross":
        # WanTransformer3DModel, Wan2.1-I2V-14B-720P config: added_kv_proj_dim 5120 (image_dim 1280
        # is projected to 5120 before the blocks), qk_norm rms_norm_across_heads, cross_attn_norm
        # True, eps 1e-6. The context is [257 CLIP image tokens; 512 text tokens]: WanAttnProcessor
        # takes everything before the last 512 tokens as image context (512 is hard-coded), so the
        # text here is 512 tokens, not t.
        from diffusers.models.transformers.transformer_wan import WanTransformerBlock
        blk = WanTransformerBlock(hidden, mlp, heads, qk_norm="rms_norm_across_heads", cross_attn_norm=True,
                                  eps=1e-6, added_kv_proj_dim=hidden)
        kw = {"hidden_states": x, "encoder_hidden_states": rnd(b, 257 + 512, hidden),
              "temb": rnd(b, 6, hidden), "rotary_emb": cos_sin(n, (1, n, 1, head_dim))}
        return blk, (), kw
    raise ValueError(f"unknown block kind {kind}")


def measure(kind, m, torch, reps, rounds, n):
    from torch.utils._python_dispatch import TorchDispatchMode
    dev = torch.device("cuda")
    with torch.device(dev):  # weights initialised on the GPU, then cast to bf16
        blk, args, kw = build(kind, m, torch, dev, n=n)
    blk = blk.to(dev, torch.bfloat16).eval()

    def fwd():
        return blk(*args, **kw)

    with torch.inference_mode():
        for _ in range(5):
            fwd()
        torch.cuda.synchronize()

        class Count(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.ops = 0
                self.views = 0

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.ops += 1
                if getattr(func, "is_view", False):
                    self.views += 1
                return func(*args, **(kwargs or {}))

        counter = Count()
        with counter:
            fwd()
        torch.cuda.synchronize()

        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fwd()
            torch.cuda.synchronize()
        device_events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        kernels = len(device_events)
        device_us = sum(e.time_range.elapsed_us() for e in device_events)

        times = []
        for _ in range(rounds):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                fwd()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / reps * 1e6)
    del blk, args, kw
    torch.cuda.empty_cache()
    return counter.ops, counter.views, kernels, statistics.median(times), device_us


def op_floor(torch, n=20000):
    """Host time of one tiny eager op (an in-place add on 16 elements): dispatch and launch."""
    x = torch.zeros(16, device="cuda")
    for _ in range(1000):
        x.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    ap = diffusers_bench.parser(__doc__.split("\n")[0], budget_s=90)
    ap.add_argument("--img-tokens", default=str(IMG_TOKENS),
                    help="comma-separated image token counts, each measured (host time should not move)")
    a = ap.parse_args()
    catalog, wanted = diffusers_bench.catalog_and_models(a, MODELS, "diffusers_host_ops", "block")
    rows = []
    t_start = time.time()
    torch = diffusers_bench.import_torch(a)
    if torch is not None:
        floor = op_floor(torch)
        rows.append({"model": "-", "family": "tiny_op", "block_class": "Tensor.add_", "img_tokens": 0,
                     "txt_tokens": 0, "aten_ops": 1, "view_ops": 0, "kernels": 1, "host_us": f"{floor:.2f}",
                     "device_us": "", "status": "ok", "source": f"torch {torch.__version__}"})
        print(f"tiny op: {floor:.2f} us host per eager op")
    sizes = [int(v) for v in a.img_tokens.split(",")]
    for model, kind, n in ((mo, k, n) for mo in wanted for k in MODELS[mo] for n in sizes):
        row = {"model": model, "family": FAMILY[kind], "block_class": kind, "img_tokens": n,
               "txt_tokens": TXT_TOKENS, "source": a.source}
        if a.dry_run:
            row.update(aten_ops="", view_ops="", kernels="", host_us="", device_us="", status="dry-run")
        elif time.time() - t_start > a.budget_s:
            row.update(aten_ops="", view_ops="", kernels="", host_us="", device_us="", status="out of time")
        else:
            try:
                ops, views, kernels, host_us, device_us = measure(kind, catalog[model], torch, a.reps,
                                                                  a.rounds, n)
                row.update(aten_ops=ops, view_ops=views, kernels=kernels, host_us=f"{host_us:.1f}",
                           device_us=f"{device_us:.1f}", status="ok")
            except Exception as e:  # one block's failure must not lose the others
                row.update(aten_ops="", view_ops="", kernels="", host_us="", device_us="",
                           status=f"error: {type(e).__name__}: {str(e)[:160]}".replace("\n", " "))
        rows.append(row)
        print(" ".join(f"{k}={row[k]}" for k in COLUMNS if k != "source"), flush=True)
    diffusers_bench.write_rows(a, COLUMNS, rows, "host ops", "blocks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
