#!/usr/bin/env python3
"""Silicon tables for the planner: the ops an eager PyTorch DiT runtime (xDiT, diffusers)
launches for one transformer block of every catalog model at its default size, timed on this
GPU eagerly and under torch.compile, written as a measurement CSV that
`ditune calibrate ingest FILE` reads (docs/CALIBRATION.md, "measurement CSV").

Shapes come from `ditune models --json` (hidden size, heads, head dim, MLP width, block
families, and the token counts at the default size that ditune itself computes), so the ops
are the catalog's, not a second copy of it:
  GEMMs   qkv (rows x hidden x 3 hidden), out (rows x hidden x hidden), MLP up (x2 where the
          MLP is gated) and down, with rows the image tokens plus the text tokens where the
          block runs text through the same weights (joint, single); cross-attention blocks
          add their q and out projections over the image and k/v over the text;
  SDPA    scaled_dot_product_attention over the sequence the block attends (image, plus text
          for joint and single blocks; cross blocks also over the text), flash backend;
  elementwise  layer norm, adaptive modulation x * (1 + scale) + shift, the MLP's activation
          (tanh GELU, or SiLU x gate), rotary embedding of q and k.
Inputs are random (never zeros), timed with CUDA events after warm-up, median of the
repetitions with the 10th and 90th percentiles (nearest rank).

  python3 bench/torch_ops_profile.py --models-json M.json --gpu h100-sxm5-80gb --out ops.csv
  python3 bench/torch_ops_profile.py --models-json M.json --gpu h100-sxm5-80gb --out ops.csv --dry-run

--dry-run imports no torch: every op is listed and "timed" with a pure-Python stand-in (so
the CSV, its columns and `calibrate ingest` are exercised where there is no GPU, as in CI);
its rows say backend "dryrun" and must never calibrate anything.
"""
import argparse
import csv
import json
import math
import statistics
import sys
import time

ELEMENT_BYTES = 2  # bf16


def block_ops(model):
    """The ops of one block of each family the model has, at its default size."""
    tokens = model.get("default_tokens")
    if not tokens:
        return []
    img, txt = int(tokens["image"]), int(tokens["text"])
    hidden, heads, head_dim = model["hidden"], model["heads"], model["head_dim"]
    inner = heads * head_dim
    mlp = model["mlp_hidden"]
    gated = bool(model.get("mlp_gated"))
    ops = []
    for family in sorted({b["family"] for b in model["blocks"]}):
        joint = family in ("joint", "single")
        rows = img + (txt if joint else 0)
        seq = rows if joint else img
        p = f"{family}."

        def gemm(name, m, k, n):
            ops.append({"op": "gemm", "name": p + name, "m": m, "k": k, "n": n})

        gemm("qkv", rows, hidden, 3 * inner)
        gemm("out", rows, inner, hidden)
        gemm("mlp_up", rows, hidden, (2 if gated else 1) * mlp)
        gemm("mlp_down", rows, mlp, hidden)
        ops.append({"op": "attention", "name": p + "attn", "q": seq, "kv": seq, "heads": heads, "head_dim": head_dim})
        if family == "cross" and txt > 0:
            gemm("cross_q", img, hidden, inner)
            gemm("cross_kv", txt, hidden, 2 * inner)
            gemm("cross_out", img, inner, hidden)
            ops.append({"op": "attention", "name": p + "cross_attn", "q": img, "kv": txt, "heads": heads,
                        "head_dim": head_dim})
        ops.append({"op": "elementwise", "name": p + "layer_norm", "shape": [rows, hidden], "passes": 2})
        ops.append({"op": "elementwise", "name": p + "modulate", "shape": [rows, hidden], "passes": 2})
        ops.append({"op": "elementwise", "name": p + ("swiglu" if gated else "gelu"),
                    "shape": [rows, (2 if gated else 1) * mlp], "passes": 1.5 if gated else 2})
        ops.append({"op": "elementwise", "name": p + "rope", "shape": [2, rows, heads, head_dim], "passes": 2})
    return ops


def flops_bytes(op):
    if op["op"] == "gemm":
        m, k, n = op["m"], op["k"], op["n"]
        return 2.0 * m * k * n, ELEMENT_BYTES * (m * k + k * n + m * n)
    if op["op"] == "attention":
        q, kv, h, d = op["q"], op["kv"], op["heads"], op["head_dim"]
        return 4.0 * q * kv * h * d, ELEMENT_BYTES * h * d * (2 * q + 2 * kv)
    elements = math.prod(op["shape"])
    return 0.0, ELEMENT_BYTES * elements * op["passes"]


def params_of(model_id, op, compiled):
    p = {"model": model_id, "name": op["name"], "compiled": compiled}
    for key in ("m", "k", "n", "q", "kv", "heads", "head_dim", "shape"):
        if key in op:
            p[key] = op[key]
    return p


def nearest_rank(sorted_values, q):
    i = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


class TorchTimer:
    """Builds each op's inputs and times it on the GPU."""

    def __init__(self, reps, budget_per_op_s):
        import torch  # only here: --dry-run needs none
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        self.torch, self.F, self.reps, self.budget = torch, F, reps, budget_per_op_s
        self.sdpa_kernel, self.flash = sdpa_kernel, SDPBackend.FLASH_ATTENTION
        self.dev = torch.device("cuda")
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(0)

    def rand(self, *shape):
        return self.torch.randn(*shape, device=self.dev, dtype=self.torch.bfloat16, generator=self.gen)

    def function(self, op):
        t, F = self.torch, self.F
        if op["op"] == "gemm":
            a, b = self.rand(op["m"], op["k"]), self.rand(op["k"], op["n"])
            return lambda: t.matmul(a, b)
        if op["op"] == "attention":
            q = self.rand(1, op["heads"], op["q"], op["head_dim"])
            k, v = self.rand(1, op["heads"], op["kv"], op["head_dim"]), self.rand(1, op["heads"], op["kv"], op["head_dim"])

            def attn():
                with self.sdpa_kernel(self.flash):
                    return F.scaled_dot_product_attention(q, k, v)
            return attn
        x = self.rand(*op["shape"])
        kind = op["name"].split(".", 1)[1]
        if kind == "layer_norm":
            return lambda: F.layer_norm(x, x.shape[-1:])
        if kind == "modulate":
            scale, shift = self.rand(1, x.shape[-1]), self.rand(1, x.shape[-1])
            return lambda: x * (1 + scale) + shift
        if kind == "gelu":
            return lambda: F.gelu(x, approximate="tanh")
        if kind == "swiglu":
            return lambda: F.silu(x[..., : x.shape[-1] // 2]) * x[..., x.shape[-1] // 2:]
        if kind == "rope":
            cos, sin = self.rand(x.shape[1], 1, x.shape[-1] // 2), self.rand(x.shape[1], 1, x.shape[-1] // 2)

            def rope():
                x1, x2 = x[..., 0::2], x[..., 1::2]
                return t.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
            return rope
        raise ValueError(f"no function for {op['name']}")

    def time(self, fn):
        t = self.torch
        for _ in range(3):
            fn()
        t.cuda.synchronize()
        start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        one = start.elapsed_time(end) / 1e3
        reps = max(3, min(self.reps, int(self.budget / max(one, 1e-6))))
        times = []
        for _ in range(reps):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return sorted(times)

    def compiled(self, fn):
        return self.torch.compile(fn, dynamic=False)


class DryTimer:
    """No GPU, no torch: a pure-Python stand-in, timed for real, so every path but the
    kernels runs."""

    def __init__(self, reps):
        self.reps = reps

    def function(self, op):
        n = 200 + len(op["name"])
        return lambda: sum(i * i for i in range(n))

    def time(self, fn):
        times = []
        for _ in range(self.reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return sorted(times)

    def compiled(self, fn):
        return fn


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models-json", required=True, help="the output of `ditune models --json`")
    ap.add_argument("--gpu", help="the catalog GPU id these timings are for (required unless --list)")
    ap.add_argument("--out", help="the measurement CSV to write (required unless --list)")
    ap.add_argument("--models", default="", help="comma-separated model ids (default: every model with a default size)")
    ap.add_argument("--compile-models", default="flux.1-dev,pixart-alpha,sd3-medium,hunyuandit-v1.2",
                    help="models also timed under torch.compile (each op compiles once per shape)")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per op at most")
    ap.add_argument("--budget-s", type=float, default=240.0, help="stop starting new models after this many seconds")
    ap.add_argument("--run-id", default="torch-ops", help="the run_id column")
    ap.add_argument("--dry-run", action="store_true", help="no torch, no GPU: a stand-in timer (backend dryrun)")
    ap.add_argument("--list", action="store_true", help="print each model's ops and their FLOPs and bytes; time none")
    args = ap.parse_args()

    with open(args.models_json) as f:
        catalog = {m["id"]: m for m in json.load(f)}
    wanted = [m for m in args.models.split(",") if m] or sorted(catalog)
    unknown = [m for m in wanted if m not in catalog]
    if unknown:
        print(f"torch_ops_profile: unknown model(s) {', '.join(unknown)}; known: {', '.join(sorted(catalog))}",
              file=sys.stderr)
        return 2
    if args.list:
        for model_id in wanted:
            ops = block_ops(catalog[model_id])
            total = sum(flops_bytes(op)[0] for op in ops)
            print(f"{model_id}: {len(ops)} ops, {total / 1e12:.2f} TFLOP per block of each family"
                  + ("" if ops else " (no default size)"))
        return 0
    if not args.gpu or not args.out:
        print("torch_ops_profile: --gpu and --out are required (unless --list)", file=sys.stderr)
        return 2
    compile_list = [m for m in args.compile_models.split(",") if m]
    compile_set = set(compile_list)
    # The models of the training suite (the compiled ones) first, so a budget that runs out
    # leaves out the least needed.
    wanted = [m for m in compile_list if m in wanted] + [m for m in wanted if m not in compile_set]
    timer = DryTimer(min(args.reps, 5)) if args.dry_run else TorchTimer(args.reps, budget_per_op_s=0.25)
    started = time.monotonic()
    rows, skipped = 0, []
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "kind", "op", "backend", "device", "ranks", "link", "bytes", "flops", "median_s", "p10_s",
                    "p90_s", "samples", "params", "run_id"])
        for model_id in wanted:
            if time.monotonic() - started > args.budget_s:
                skipped.append(model_id)
                continue
            model = catalog[model_id]
            modes = [False] + ([True] if model_id in compile_set else [])
            for op in block_ops(model):
                flops, nbytes = flops_bytes(op)
                for compiled in modes:
                    try:
                        fn = timer.function(op)
                        times = timer.time(timer.compiled(fn) if compiled else fn)
                    except Exception as e:  # one op's failure (out of memory, a backend refusing a shape) is reported
                        print(f"torch_ops_profile: {model_id} {op['name']}{' compiled' if compiled else ''}: {e}",
                              file=sys.stderr)
                        continue
                    backend = "dryrun" if args.dry_run else ("torch-compile" if compiled else "torch-eager")
                    w.writerow(["microbench", "op", op["op"], backend, args.gpu, 1, "", f"{nbytes:.0f}",
                                f"{flops:.0f}", f"{statistics.median(times):.6e}", f"{nearest_rank(times, 0.1):.6e}",
                                f"{nearest_rank(times, 0.9):.6e}", len(times),
                                json.dumps(params_of(model_id, op, compiled), separators=(",", ":")), args.run_id])
                    rows += 1
            f.flush()
    print(f"torch_ops_profile: {rows} rows in {args.out} ({time.monotonic() - started:.1f} s)"
          + (f"; over the budget, not timed: {', '.join(skipped)}" if skipped else ""))
    return 0 if rows > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
