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

  python3 tools/eager_host_ops.py data/measured/h200-20261128/host_ops*.csv            # write
  python3 tools/eager_host_ops.py data/measured/h200-20261128/host_ops*.csv --check    # verify
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "data", "models"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(a.models):
        fail(f"--models {a.models}: not a folder (data/models)")
    want = wanted(a.csv, a.models)
    bad = 0
    for mid, fams in want.items():
        p = os.path.join(a.models, mid + ".json")
        try:
            with open(p) as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            fail(f"{p}: cannot read a model file: {e}")
        have = doc.get("eager_host_ops")
        if have == fams:
            continue
        if a.check:
            print(f"eager_host_ops: {p} has {have}, the measurement gives {fams}", file=sys.stderr)
            bad += 1
            continue
        if fams is None:
            doc.pop("eager_host_ops", None)
        else:
            doc["eager_host_ops"] = fams
        with open(p, "w") as f:
            f.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {p}: {fams}")
    if a.check:
        n = sum(1 for v in want.values() if v)
        print(f"eager_host_ops: {n} models agree with {', '.join(a.csv)}" if not bad else f"eager_host_ops: {bad} disagree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
