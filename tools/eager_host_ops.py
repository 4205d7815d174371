#!/usr/bin/env python3
"""Writes each catalog model's eager host cost per block (`eager_host_ops` in
data/models/<id>.json) from bench/diffusers_host_ops.py measurements, or checks that the model
files agree with them.

The figure is the number of ATen ops one forward of the block dispatches, counted on the
block code itself (diffusers' class at the model's widths): deterministic, the same at every
token count and on every run, where the host µs the same rows record move by a quarter
between runs of one machine (a shared host). Mechanisms::eager_op_us, the host µs per
framework op, turns it into time; the rows' host µs per ATen op (15.0 and 17.3 µs over every
block of two runs on one H200 host) are what that constant is checked against. A catalog
model whose blocks are the same diffusers class built with the same flags as a measured one
takes that one's count (SAME_BLOCKS, each with the reason).

With --steps, it also writes each model's eager host cost of a step outside its blocks
(`step_host_ops`: the ATen ops of one forward outside the block lists and of one scheduler
step) from bench/diffusers_step_ops.py measurements; a model whose transformer class and
scheduler are a measured one's takes that one's counts (SAME_STEP, each with the reason).

  python3 tools/eager_host_ops.py data/measured/h200-20261128/host_ops*.csv \
      --steps data/measured/h200-20261128/step_ops.csv            # write
  python3 tools/eager_host_ops.py data/measured/h200-20261128/host_ops*.csv \
      --steps data/measured/h200-20261128/step_ops.csv --check    # verify
"""
import argparse
import csv
import json
import os
import sys

# model -> the measured model whose block classes and flags it shares (diffusers@58eb52c).
SAME_BLOCKS = {
    # FluxTransformer2DModel: the same double and single blocks for every FLUX.1 checkpoint.
    "flux.1-schnell": "flux.1-dev",
    "flux.1-kontext-dev": "flux.1-dev",
    # PixArtTransformer2DModel: BasicTransformerBlock with ada_norm_single for both.
    "pixart-sigma": "pixart-alpha",
    # CogVideoXTransformer3DModel with rotary embeddings (the 5B and 1.5-5B configs).
    "cogvideox1.5-5b": "cogvideox-5b",
    # WanTransformer3DModel, text-to-video blocks (no image key/value projections): Wan2.1's
    # 1.3B and Wan2.2's A14B experts use the same class and flags as Wan2.1-14B.
    "wan2.1-1.3b": "wan2.1-14b",
    "wan2.2-t2v-a14b": "wan2.1-14b",
    "wan2.2-i2v-a14b": "wan2.1-14b",
    # QwenImageTransformer2DModel for both.
    "qwen-image-edit": "qwen-image",
    # The DiT beside the ControlNet is Z-Image-Turbo's ZImageTransformer2DModel.
    "z-image-turbo-controlnet-union-2.1": "z-image-turbo",
}

# model -> the measured model whose transformer class and scheduler class it shares
# (diffusers@58eb52c). The ops outside the blocks belong to the transformer class; the
# scheduler's to the scheduler class the pipeline runs.
SAME_STEP = {
    # FluxTransformer2DModel; FluxPipeline and FluxKontextPipeline are typed
    # `scheduler: FlowMatchEulerDiscreteScheduler` (pipelines/flux/pipeline_flux.py,
    # pipeline_flux_kontext.py).
    "flux.1-schnell": "flux.1-dev",
    "flux.1-kontext-dev": "flux.1-dev",
    # PixArtTransformer2DModel; the Sigma checkpoints are converted with
    # `scheduler = DPMSolverMultistepScheduler()` (scripts/convert_pixart_sigma_to_diffusers.py).
    "pixart-sigma": "pixart-alpha",
    # SD3Transformer2DModel; StableDiffusion3Pipeline is typed FlowMatchEulerDiscreteScheduler.
    "sd3.5-large": "sd3-medium",
    # WanTransformer3DModel; every Wan checkpoint is converted with a flow-matching
    # UniPCMultistepScheduler (scripts/convert_wan_to_diffusers.py: `scheduler =
    # UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, ...)`).
    "wan2.1-1.3b": "wan2.1-14b",
    "wan2.2-t2v-a14b": "wan2.1-14b",
    "wan2.2-i2v-a14b": "wan2.1-14b",
    # QwenImageTransformer2DModel; QwenImageEditPipeline is typed FlowMatchEulerDiscreteScheduler.
    "qwen-image-edit": "qwen-image",
}
STEP_COLUMNS = ("model", "outside_ops", "scheduler_ops", "status", "source")


def fail(message):
    """Bad input: the message, and exit status 2."""
    print(f"eager_host_ops: {message}", file=sys.stderr)
    sys.exit(2)


def load(paths):
    """{(model, family): ATen ops}, the files' sources, and their host µs per ATen op."""
    ops, sources, per_op = {}, set(), []
    for path in paths:
        try:
            with open(path, newline="") as f:
                rows = [r for r in csv.DictReader(f) if r.get("status") == "ok" and r.get("model") not in ("", "-")]
            per_op.append(sum(float(r["host_us"]) for r in rows) / max(1, sum(int(r["aten_ops"]) for r in rows)))
            counted = [((r["model"], r["family"]), int(r["aten_ops"]), r["source"]) for r in rows]
        except OSError as e:
            fail(f"{path}: {e.strerror}")
        except (KeyError, ValueError, TypeError) as e:
            fail(f"{path}: not a bench/diffusers_host_ops.py CSV (columns model, family, aten_ops, host_us, status, "
                 f"source with numbers where numbers belong): {type(e).__name__} {e}")
        if not rows:
            fail(f"{path} has no measured block (status ok)")
        for key, n, source in counted:
            if ops.setdefault(key, n) != n:
                fail(f"{key[0]} {key[1]}: {n} ATen ops in {path}, {ops[key]} elsewhere")
            sources.add(source)
    return ops, sorted(sources), per_op


def wanted(paths, models_dir):
    ops, sources, per_op = load(paths)
    root = os.path.join(models_dir, "..", "..")
    files = ", ".join(os.path.relpath(p, root) for p in paths)
    host = " and ".join(f"{u:.1f}" for u in per_op)
    out = {}
    measured_models = {m for m, _ in ops}
    for name in sorted(os.listdir(models_dir)):
        if not name.endswith(".json"):
            continue
        mid = name[:-5]
        src = mid if mid in measured_models else SAME_BLOCKS.get(mid)
        if src is None:
            out[mid] = None
            continue
        fams = {f: n for (m, f), n in sorted(ops.items()) if m == src}
        via = "" if src == mid else f", the blocks of {src}"
        fams["source"] = (f"{files}: ATen ops one forward of the block dispatches, {' '.join(sources)}{via} "
                          f"(bench/diffusers_host_ops.py, tools/eager_host_ops.py); host µs per ATen op there "
                          f"{host}")
        out[mid] = fams
    return out


def load_steps(paths):
    """{model: (outside ATen ops a forward, scheduler ATen ops a step, source)}."""
    out = {}
    for path in paths:
        try:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                missing = [c for c in STEP_COLUMNS if c not in (reader.fieldnames or [])]
                if missing:
                    fail(f"{path}: not a bench/diffusers_step_ops.py CSV: no column {', '.join(missing)} "
                         f"(needs {', '.join(STEP_COLUMNS)})")
                rows = [r for r in reader if r["status"] == "ok"]
            counted = [(r["model"], int(r["outside_ops"]), int(r["scheduler_ops"]), r["source"]) for r in rows]
        except OSError as e:
            fail(f"{path}: {e.strerror}")
        except (ValueError, TypeError) as e:
            fail(f"{path}: outside_ops and scheduler_ops must be whole numbers on every row with status ok: "
                 f"{type(e).__name__} {e}")
        if not rows:
            fail(f"{path} has no measured step (status ok)")
        for model, outside, sched, source in counted:
            if outside <= 0 or sched <= 0:
                fail(f"{path}: {model}: outside_ops {outside} and scheduler_ops {sched} must be positive")
            if out.setdefault(model, (outside, sched, source))[:2] != (outside, sched):
                fail(f"{model}: {outside} and {sched} ATen ops in {path}, {out[model][:2]} elsewhere")
    return out


def wanted_steps(paths, models_dir):
    steps = load_steps(paths)
    root = os.path.join(models_dir, "..", "..")
    files = ", ".join(os.path.relpath(p, root) for p in paths)
    out = {}
    for name in sorted(os.listdir(models_dir)):
        if not name.endswith(".json"):
            continue
        mid = name[:-5]
        src = mid if mid in steps else SAME_STEP.get(mid)
        if src not in steps:
            out[mid] = None
            continue
        outside, sched, source = steps[src]
        via = "" if src == mid else f", the transformer and scheduler classes of {src}"
        out[mid] = {"outside": outside, "scheduler": sched,
                    "source": f"{files}: ATen ops of one forward outside the blocks and of one scheduler step, "
                              f"{source}{via} (bench/diffusers_step_ops.py, tools/eager_host_ops.py)"}
    return out


def reconcile(models_dir, key, want, check):
    """Writes (or with check, compares) each model file's `key`; returns how many disagree."""
    bad = 0
    for mid, value in want.items():
        p = os.path.join(models_dir, mid + ".json")
        try:
            with open(p) as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            fail(f"{p}: cannot read a model file: {e}")
        have = doc.get(key)
        if have == value:
            continue
        if check:
            print(f"eager_host_ops: {p} has {key} {have}, the measurement gives {value}", file=sys.stderr)
            bad += 1
            continue
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
        with open(p, "w") as f:
            f.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {p}: {key} {value}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "data", "models"))
    ap.add_argument("--steps", nargs="+", default=[], metavar="CSV",
                    help="bench/diffusers_step_ops.py measurements: also write step_host_ops")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(a.models):
        fail(f"--models {a.models}: not a folder (data/models)")
    want = wanted(a.csv, a.models)
    steps = wanted_steps(a.steps, a.models) if a.steps else {}
    bad = reconcile(a.models, "eager_host_ops", want, a.check)
    if a.steps:
        bad += reconcile(a.models, "step_host_ops", steps, a.check)
    if a.check:
        n = sum(1 for v in want.values() if v)
        k = sum(1 for v in steps.values() if v)
        files = ", ".join(a.csv + a.steps)
        print(f"eager_host_ops: {n} models' blocks and {k} models' steps agree with {files}" if not bad
              else f"eager_host_ops: {bad} disagree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
