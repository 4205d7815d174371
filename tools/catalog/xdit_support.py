#!/usr/bin/env python3
"""Writes the "xdit" section of every catalog model file: what xDiT runs for the model.

The facts and their sources are kept here, in one table, so that a change in xDiT is one edit;
the model files carry the result. Re-run after editing: python3 tools/catalog/xdit_support.py
"""
import json
import pathlib

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "models"

README = "xDiT README.md, table 'Supported DiTs' (xdit-project/xDiT@005ce80b)"
LEGACY = ("xDiT README.md: DistriFusion is in the legacy branch, whose APIs 'do not support hybrid parallelism'; "
          "main runs none")
EX_FLAGS_SRC = ("xDiT xfuser/config/args.py add_cli_args (xdit-project/xDiT@045d2f9): the flags every example script "
                "parses (no --fully_shard_degree)")
RT_FLAGS_SRC = ("xDiT docs/runner/runner.md (@005e6e6) and xfuser/config/args.py add_runner_args (@045d2f9): the "
                "runner's flags; it has no --num_pipeline_patch, --warmup_steps or --output_type")
RT_CAPS = "xDiT xfuser/model_executor/models/runner_models/base_model.py ModelCapabilities (@01ffbea)"
DP_EX = ("xDiT README.md: 'Data, USP, PipeFusion, and CFG parallel operate in a hybrid fashion'; args.py "
         "--data_parallel_degree")
DP_RT = RT_CAPS + ": data_parallel_degree = True for every runner model"
COMPILE_EX = "xDiT args.py add_cli_args: --use_torch_compile (every example script)"
COMPILE_RT = RT_CAPS + ": torch.compile is no capability, every runner model takes --use_torch_compile"
OFFLOAD_RT = RT_CAPS + ": CPU offload is no capability, _enable_options calls enable_model_cpu_offload"
ROWS = ("xDiT xfuser/core/distributed/runtime_state.py _calc_patches_metadata (@0058bb0): 'The height of the input "
        "is not divisible by the number of sequence parallel devices'; each rank holds whole patch rows")

EX_FLAGS = {
    "model": "--model", "height": "--height", "width": "--width", "frames": "--num_frames",
    "steps": "--num_inference_steps", "output_type": "--output_type",
    "ulysses": "--ulysses_degree", "ring": "--ring_degree", "pipefusion": "--pipefusion_parallel_degree",
    "patches": "--num_pipeline_patch", "warmup": "--warmup_steps", "cfg": "--use_cfg_parallel",
    "dp": "--data_parallel_degree", "tp": "--tensor_parallel_degree", "parallel_vae": "--use_parallel_vae",
    "torch_compile": "--use_torch_compile", "fp8_gemms": "--use_fp8_gemms",
    "cpu_offload": "--enable_model_cpu_offload",
}
RT_FLAGS = {
    "model": "--model", "height": "--height", "width": "--width", "frames": "--num_frames",
    "steps": "--num_inference_steps",
    "ulysses": "--ulysses_degree", "ring": "--ring_degree", "pipefusion": "--pipefusion_parallel_degree",
    "cfg": "--use_cfg_parallel", "dp": "--data_parallel_degree", "tp": "--tensor_parallel_degree",
    "parallel_vae": "--use_parallel_vae", "fully_shard": "--fully_shard_degree",
    "torch_compile": "--use_torch_compile", "fp8_gemms": "--use_fp8_gemms",
    "cpu_offload": "--enable_model_cpu_offload",
}
RUNNER = "torchrun --nproc_per_node={gpus_per_node} $(which xdit)"
RUNNER_SRC = ("xDiT docs/runner/runner.md (@005e6e6): 'xdit --model FLUX.1-dev ... --ulysses_degree 8'; pyproject.toml "
              "(@058fd33): xdit = xfuser.cli:main, started once per GPU by torchrun")


def example(script, model_arg, readme_row, methods, split=("rows", ROWS), notes=None, extra=""):
    return {
        "command": f"torchrun --nproc_per_node={{gpus_per_node}} {script}{extra}",
        "command_source": f"xDiT {script} (xdit-project/xDiT), started by torchrun as in README.md's examples",
        "model_arg": model_arg,
        "flags": EX_FLAGS,
        "flags_source": EX_FLAGS_SRC,
        "methods": methods,
        "sequence_split": {"unit": split[0], "source": split[1]},
        "stage_partition": "ceil",
        **({"limits": notes} if notes else {}),
    }


def runner(name, methods, split=("rows", ROWS)):
    return {
        "command": RUNNER,
        "command_source": RUNNER_SRC + f"; model name '{name}' as registered by the runner",
        "model_arg": name,
        "flags": RT_FLAGS,
        "flags_source": RT_FLAGS_SRC,
        "methods": methods,
        "sequence_split": {"unit": split[0], "source": split[1]},
        "stage_partition": "ceil",
    }


def m(runs, source):
    return {"runs": runs, "source": source}


def image_example_methods(row, cfg=True, pipefusion=True, parallel_vae=True, fp8=False, fp8_src="",
                          offload=False, offload_src=""):
    return {
        "ulysses": m(True, f"{README}: {row} SP ✔️"),
        "ring": m(True, f"{README}: {row} SP ✔️ (USP: Ulysses and Ring)"),
        "pipefusion": m(pipefusion, f"{README}: {row} PipeFusion {'✔️' if pipefusion else '❎'}"),
        "cfg": m(cfg, f"{README}: {row} CFG {'✔️' if cfg else 'NA'}"),
        "tp": m(False, f"{README}: {row} TP ❎"),
        "dp": m(True, DP_EX),
        "distrifusion": m(False, LEGACY),
        "parallel_vae": m(parallel_vae, "xDiT args.py --use_parallel_vae (DistVAE), wrapped by the base pipeline's "
                                        "_convert_vae" if parallel_vae else "not wired for this model"),
        "fully_shard": m(False, EX_FLAGS_SRC),
        "torch_compile": m(True, COMPILE_EX),
        "fp8_gemms": m(fp8, fp8_src or "the example script applies no FP8 GEMMs"),
        "cpu_offload": m(offload, offload_src or "the example script never calls a CPU offload"),
    }


def runner_methods(row, caps, pipefusion=False, cfg=False, parallel_vae=False, fully_shard=False, fp8=False,
                   cfg_word="❎"):
    return {
        "ulysses": m(True, f"{README}: {row} SP ✔️; {caps}: ulysses_degree"),
        "ring": m(True, f"{README}: {row} SP ✔️; {caps}: ring_degree"),
        "pipefusion": m(pipefusion, f"{caps}: pipefusion_parallel_degree {'= True' if pipefusion else 'not declared'}"),
        "cfg": m(cfg, f"{README}: {row} CFG {cfg_word}; {caps}: use_cfg_parallel "
                      f"{'= True' if cfg else 'not declared'}"),
        "tp": m(False, f"{README}: {row} TP ❎; {caps}: tensor_parallel_degree not declared"),
        "dp": m(True, DP_RT),
        "distrifusion": m(False, LEGACY),
        "parallel_vae": m(parallel_vae, f"{caps}: use_parallel_vae {'= True' if parallel_vae else 'not declared'}"),
        "fully_shard": m(fully_shard, f"{caps}: fully_shard_degree {'= True' if fully_shard else 'not declared'}"),
        "torch_compile": m(True, COMPILE_RT),
        "fp8_gemms": m(fp8, f"{caps}: use_fp8_gemms {'= True' if fp8 else 'not declared'}"),
        "cpu_offload": m(True, OFFLOAD_RT),
    }


FLUX_CAPS = "xDiT runner_models/flux.py (@02efa40)"
SD35_CAPS = "xDiT runner_models/stable_diffusion.py (@058fd33)"
HV_CAPS = "xDiT runner_models/hunyuan.py (@0150fea)"
WAN_CAPS = "xDiT runner_models/wan.py (@02efa40)"
QWEN_CAPS = "xDiT runner_models/qwen.py (@025cfdc)"
LTX_CAPS = "xDiT runner_models/ltx.py (@02a4980)"
ZI_CAPS = "xDiT runner_models/z_image.py (@097fb47), no capabilities override: the base defaults"

HV_TOKENS = ("tokens", "xDiT examples/hunyuan_video_usp_example.py (@0058bb0): hidden_states.flatten(1, 3) of frames x "
                       "rows x cols, then torch.chunk over the sequence-parallel ranks, no padding")
WAN_PAD = ("padded", "xDiT examples/wan_example.py (@01de751): the sequence is zero-padded to ceil(seq / sp) * sp "
                     "before torch.chunk and the padding removed after the all-gather")
FLAT_CHUNK = ("tokens", "xDiT examples (flux2_example.py @530a818, zimage_example.py): torch.chunk of the packed token "
                        "sequence over the sequence-parallel ranks (dim=-2)")

COGVIDEO_METHODS = lambda row: {
    "ulysses": m(True, f"{README}: {row} SP ✔️"),
    "ring": m(True, f"{README}: {row} SP ✔️"),
    "pipefusion": m(False, "xDiT examples/cogvideox_example.py (@0058bb0): assert pipefusion_parallel_degree == 1, "
                           "'This script does not support PipeFusion.'"),
    "cfg": m(True, f"{README}: {row} CFG ✔️"),
    "tp": m(False, f"{README}: {row} TP ❎"),
    "dp": m(True, DP_EX),
    "distrifusion": m(False, LEGACY),
    "parallel_vae": m(False, "xDiT examples/cogvideox_example.py: assert use_parallel_vae is False, 'parallel VAE not "
                             "implemented for CogVideo'"),
    "fully_shard": m(False, EX_FLAGS_SRC),
    "torch_compile": m(True, COMPILE_EX),
    "fp8_gemms": m(False, "the example script applies no FP8 GEMMs"),
    "cpu_offload": m(True, "xDiT examples/cogvideox_example.py: --enable_model_cpu_offload"),
}

SUPPORT = {
    "pixart-alpha": example("examples/pixartalpha_example.py", "PixArt-alpha/PixArt-XL-2-1024-MS", "PixArt-alpha",
                            image_example_methods("PixArt-alpha")),
    "pixart-sigma": example("examples/pixartsigma_example.py", "PixArt-alpha/PixArt-Sigma-XL-2-1024-MS",
                            "PixArt-Sigma", image_example_methods("PixArt-Sigma")),
    "sd3-medium": example("examples/sd3_example.py", "stabilityai/stable-diffusion-3-medium-diffusers",
                          "Stable Diffusion 3", image_example_methods("Stable Diffusion 3")),
    "sd3.5-large": runner("SD3.5", runner_methods("Stable Diffusion 3", SD35_CAPS, pipefusion=True, cfg=True,
                                                  parallel_vae=True, fully_shard=True, fp8=True, cfg_word="✔️")),
    "flux.1-dev": runner("FLUX.1-dev", runner_methods("Flux", FLUX_CAPS, pipefusion=True, parallel_vae=True,
                                                      fully_shard=True, fp8=True, cfg_word="NA")),
    "flux.1-schnell": example("examples/flux_example.py", "black-forest-labs/FLUX.1-schnell", "Flux",
                              image_example_methods(
                                  "Flux", cfg=False, fp8=True,
                                  fp8_src="xDiT examples/flux_example.py (@d8bb20b): --use_fp8_gemms (torchao)",
                                  offload=False,
                                  offload_src="xDiT examples/flux_example.py: sequential offload only, no "
                                              "--enable_model_cpu_offload branch")),
    "hunyuandit-v1.2": example("examples/hunyuandit_example.py", "Tencent-Hunyuan/HunyuanDiT-v1.2-Diffusers",
                               "HunyuanDiT-v1.2-Diffusers", image_example_methods("HunyuanDiT-v1.2-Diffusers")),
    "cogvideox-2b": example("examples/cogvideox_example.py", "THUDM/CogVideoX-2b", "CogVideoX",
                            COGVIDEO_METHODS("CogVideoX")),
    "cogvideox-5b": example("examples/cogvideox_example.py", "THUDM/CogVideoX-5b", "CogVideoX",
                            COGVIDEO_METHODS("CogVideoX")),
    "cogvideox1.5-5b": example("examples/cogvideox_example.py", "THUDM/CogVideoX1.5-5B", "CogVideoX1.5",
                               COGVIDEO_METHODS("CogVideoX1.5")),
    "consisid": example("examples/consisid_example.py", "BestWishYsh/ConsisID-preview", "ConsisID-Preview",
                        {**COGVIDEO_METHODS("ConsisID-Preview"),
                         "pipefusion": m(False, "xDiT examples/consisid_example.py (@1519a63): assert "
                                                "pipefusion_parallel_degree == 1"),
                         "parallel_vae": m(False, "xDiT examples/consisid_example.py: 'parallel VAE not implemented "
                                                  "for ConsisID'")},
                        extra=" --img_file_path $FACE_IMAGE"),
    "latte-1": example("examples/latte_example.py", "maxin-cn/Latte-1", "Latte", {
        "ulysses": m(True, f"{README}: Latte SP ✔️"),
        "ring": m(True, f"{README}: Latte SP ✔️; docs/performance/latte.md: best at ulysses 2 x ring 4"),
        "pipefusion": m(False, f"{README}: Latte PipeFusion ❎; docs/performance/latte.md: 'PipeFusion is under "
                               "development'"),
        "cfg": m(False, f"{README}: Latte CFG ❎"),
        "tp": m(False, f"{README}: Latte TP ❎"),
        "dp": m(True, DP_EX),
        "distrifusion": m(False, LEGACY),
        "parallel_vae": m(False, "docs/performance/latte.md: xDiT runs Latte with USP only"),
        "fully_shard": m(False, EX_FLAGS_SRC),
        "torch_compile": m(True, COMPILE_EX),
        "fp8_gemms": m(False, "the example script applies no FP8 GEMMs"),
        "cpu_offload": m(False, "the example script never calls a CPU offload"),
    }),
    "hunyuanvideo": runner("HunyuanVideo", runner_methods("HunyuanVideo", HV_CAPS, cfg_word="NA"), split=HV_TOKENS),
    "wan2.1-1.3b": {
        **example("examples/wan_example.py", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "Wan2.1-T2V-1.3B", {
            "ulysses": m(True, f"{README}: Wan2.1-T2V-1.3B SP ✔️"),
            "ring": m(True, f"{README}: Wan2.1-T2V-1.3B SP ✔️"),
            "pipefusion": m(False, "xDiT examples/wan_example.py (@01de751): assert pipefusion_parallel_degree == 1"),
            "cfg": m(False, f"{README}: Wan2.1-T2V-1.3B CFG ❎"),
            "tp": m(False, f"{README}: Wan2.1-T2V-1.3B TP ❎"),
            "dp": m(True, DP_EX),
            "distrifusion": m(False, LEGACY),
            "parallel_vae": m(False, "xDiT examples/wan_example.py: no parallel VAE for Wan in the example"),
            "fully_shard": m(False, EX_FLAGS_SRC),
            "torch_compile": m(True, COMPILE_EX),
            "fp8_gemms": m(True, "xDiT examples/wan_example.py: --use_fp8_gemms"),
            "cpu_offload": m(False, "the example script never calls a CPU offload"),
        }, split=WAN_PAD, extra=" --task t2v"),
    },
    "wan2.1-14b": runner("Wan2.1-T2V", runner_methods("Wan2.1", WAN_CAPS, parallel_vae=True, fully_shard=True,
                                                      fp8=True), split=WAN_PAD),
    "mochi-1": {
        "command": "CUDA_VISIBLE_DEVICES={devices} python3 demos/cli.py --use_xdit --model_dir $MOCHI_WEIGHTS",
        "command_source": ("xdit-project/mochi-xdit demos/cli.py (@c59cad8): click options --use_xdit, --model_dir; the "
                           "GPU count is torch.cuda.device_count(), started with python (Ray), not torchrun"),
        "flags": {"height": "--height", "width": "--width", "frames": "--num_frames", "steps": "--num_steps",
                  "ulysses": "--ulysses_degree", "ring": "--ring_degree", "cpu_offload": "--cpu_offload"},
        "flags_source": "xdit-project/mochi-xdit demos/cli.py (@c59cad8) click options",
        "methods": {
            "ulysses": m(True, "mochi-xdit demos/cli.py: --ulysses_degree"),
            "ring": m(True, "mochi-xdit demos/cli.py: --ring_degree"),
            "pipefusion": m(False, f"{README}: Mochi-1 PipeFusion ❎"),
            "cfg": m(False, "mochi-xdit demos/cli.py (@52d70a5, @c59cad8) defines no --cfg_parallel (its README shows "
                            "one; the launcher's code wins)"),
            "tp": m(False, f"{README}: Mochi-1 TP ❎"),
            "dp": m(False, "mochi-xdit demos/cli.py: no data-parallel option"),
            "distrifusion": m(False, LEGACY),
            "parallel_vae": m(False, "mochi-xdit demos/cli.py: no parallel VAE option"),
            "fully_shard": m(False, "mochi-xdit pipelines.py setup_fsdp_sync: FSDP is always on with several GPUs, "
                                    "not a choice"),
            "torch_compile": m(False, "mochi-xdit: compile is an environment switch (COMPILE_DIT=1), no flag"),
            "fp8_gemms": m(False, "mochi-xdit: 'FP8 is not supported for multi-GPU inference'"),
            "cpu_offload": m(True, "mochi-xdit demos/cli.py: --cpu_offload ('CPU offload not supported in multi-GPU "
                                   "mode')"),
        },
        "sequence_split": {"unit": "tokens", "source": (
            "mochi-xdit asymm_models_joint.py: Ulysses over the joint token sequence (frames x rows x cols); no "
            "per-row split")},
        "stage_partition": "ceil",
    },
    "sana-1600m": example("examples/sana_example.py", "Efficient-Large-Model/Sana_1600M_1024px_diffusers", "SANA",
                          image_example_methods("SANA")),
    "stepvideo-t2v": {
        "command": ("torchrun --nproc_per_node={gpus_per_node} run_parallel.py --model_dir $STEPVIDEO_MODEL_DIR "
                    "--vae_url $VAE_URL --caption_url $CAPTION_URL"),
        "command_source": ("stepfun-ai/Step-Video-T2V README.md (@675e08c) and run_parallel.py (@972b766); the text "
                           "encoders and VAE are served by a separate API process on a dedicated GPU"),
        "flags": {"height": "--height", "width": "--width", "frames": "--num_frames", "steps": "--infer_steps",
                  "ulysses": "--ulysses_degree", "tp": "--tensor_parallel_degree"},
        "flags_source": "stepfun-ai/Step-Video-T2V stepvideo/config.py (@08d27b2): the launcher's argparse flags",
        "methods": {
            "ulysses": m(True, f"{README}: StepVideo SP ✔️; stepvideo/parallel.py: sequence_parallel_degree = "
                               "ulysses_degree"),
            "ring": m(False, "stepfun-ai/Step-Video-T2V stepvideo/parallel.py (@08d27b2): "
                             "sequence_parallel_degree=ulysses_degree, the ring degree is not part of it"),
            "pipefusion": m(False, f"{README}: StepVideo PipeFusion ❎"),
            "cfg": m(False, f"{README}: StepVideo CFG NA"),
            "tp": m(True, f"{README}: StepVideo TP ✔️; run_parallel.py: TensorParallelApplicator"),
            "dp": m(False, "Step-Video-T2V run_parallel.py: no data-parallel option"),
            "distrifusion": m(False, LEGACY),
            "parallel_vae": m(False, "Step-Video-T2V README.md: the VAE runs behind a separate API service"),
            "fully_shard": m(False, "Step-Video-T2V stepvideo/config.py: no sharding option"),
            "torch_compile": m(False, "Step-Video-T2V stepvideo/config.py: no compile option"),
            "fp8_gemms": m(False, "Step-Video-T2V stepvideo/config.py: no FP8 option"),
            "cpu_offload": m(False, "Step-Video-T2V run_parallel.py: --use-cpu-offload is defined but unused"),
        },
        "sequence_split": {"unit": "tokens", "source": (
            "stepfun-ai/Step-Video-T2V stepvideo/parallel.py (@08d27b2): torch.chunk(hidden_states, sp, dim=-2) of the "
            "flattened sequence")},
        "stage_partition": "ceil",
        "constraints": [{"rule": "tp-only-with-ulysses", "source": (
            "stepfun-ai/Step-Video-T2V README.md (@675e08c): 'make sure tp_degree x ulysses_degree = parallel'")}],
    },
}

def runner_extra(name, methods, split, extra, conflict=None):
    r = runner(name, methods, split)
    r["command"] = RUNNER + extra
    if conflict:
        r["command_source"] += "; " + conflict
    return r


FLUX2_METHODS = lambda row: {
    **runner_methods(row, FLUX_CAPS, pipefusion=True, parallel_vae=True, fully_shard=True, fp8=True),
    "pipefusion": m(True, f"{FLUX_CAPS}: pipefusion_parallel_degree = True ('PipeFusion additionally needs "
                          f"diffusers 0.37'); the README row says ❎ and flux2_example.py asserts PP == 1: the runner's "
                          "code is what runs"),
}
INPUT_IMAGE = " --input_images $INPUT_IMAGE"
QWEN_SPLIT = ("tokens", "xDiT runner (qwen.py, ltx.py): the packed token sequence is chunked over the sequence-parallel "
                        "ranks as in the FLUX.2 and Z-Image examples (torch.chunk, dim=-2); inferred, no per-row split")

SUPPORT.update({
    "flux.2-dev": runner("FLUX.2-dev", FLUX2_METHODS("Flux 2"), split=FLAT_CHUNK),
    "flux.2-klein": runner("FLUX.2-klein-4B", FLUX2_METHODS("Flux 2 klein"), split=FLAT_CHUNK),
    "flux.1-kontext-dev": runner_extra("FLUX.1-Kontext-dev",
                                       runner_methods("Flux Kontext", FLUX_CAPS, parallel_vae=True, fully_shard=True,
                                                      fp8=True),
                                       ("rows", ROWS), INPUT_IMAGE,
                                       "'Exactly one input image is required for Flux.1-Kontext-dev model.'"),
    "qwen-image": runner("Qwen-Image", runner_methods("Qwen Image", QWEN_CAPS, fully_shard=True), split=QWEN_SPLIT),
    "qwen-image-edit": runner_extra("Qwen-Image-Edit",
                                    runner_methods("Qwen Image-Edit", QWEN_CAPS, fully_shard=True, fp8=True),
                                    QWEN_SPLIT, INPUT_IMAGE,
                                    "'Exactly one input image is required for Qwen Image Edit model.'"),
    "wan2.2-t2v-a14b": runner("Wan2.2-T2V", runner_methods("Wan2.2", WAN_CAPS, parallel_vae=True, fully_shard=True,
                                                           fp8=True), split=WAN_PAD),
    "wan2.2-i2v-a14b": runner_extra(
        "Wan2.2-I2V",
        {**runner_methods("Wan2.2", WAN_CAPS, parallel_vae=True, fully_shard=True, fp8=True),
         "cfg": m(True, f"{WAN_CAPS}: use_cfg_parallel = True for the I2V models (the README row says ❎: the "
                        "runner's code is what runs)")},
        WAN_PAD, INPUT_IMAGE, "'Exactly one input image is required for Wan I2V model.'"),
    "hunyuanvideo-1.5": runner_extra("Hunyuanvideo-1.5", runner_methods("HunyuanVideo-1.5", HV_CAPS), HV_TOKENS,
                                     " --task t2v",
                                     "the code registers 'Hunyuanvideo-1.5' (runner.md writes 'HunyuanVideo-1.5'; "
                                     "the lookup is an exact dict key); valid_tasks t2v, i2v"),
    "ltx-2": runner("LTX-2", runner_methods("LTX-2", LTX_CAPS, fully_shard=True), split=QWEN_SPLIT),
    "z-image-turbo": {**runner("Z-Image-Turbo", runner_methods("Z-Image Turbo", ZI_CAPS), split=FLAT_CHUNK),
                      "constraints": [{"rule": "heads-padded-for-ulysses", "source": (
                          "xDiT runner_models/z_image.py (@097fb47) _set_effective_heads_for_ulysses: effective_heads "
                          "= ceil(real_heads / ulysses) * ulysses")}]},
    "sana-sprint-1.6b": example("examples/sana_sprint_example.py", "Efficient-Large-Model/Sana_Sprint_1.6B_1024px_diffusers",
                                "SANA Sprint",
                                {**image_example_methods("SANA Sprint", cfg=False),
                                 "pipefusion": m(False, f"{README}: SANA Sprint PipeFusion ❎; pipeline_sana_sprint.py "
                                                        "(@449079d) raises NotImplementedError beyond the warm-up")}),
})

# Per-model limits of the entry point on the workload (frames it fixes, square only).
LIMITS = {
    "latte-1": {"frames": 16, "frames_source": "xDiT examples/latte_example.py (@0058bb0): video_length=16 is "
                                               "hard-coded"},
}


def main():
    for model_id, support in SUPPORT.items():
        support = dict(support)
        support.pop("limits", None)
        if model_id in LIMITS:
            support["fixed_frames"] = LIMITS[model_id]["frames"]
            support["fixed_frames_source"] = LIMITS[model_id]["frames_source"]
        path = DATA / f"{model_id}.json"
        doc = json.loads(path.read_text())
        doc["xdit"] = support
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
