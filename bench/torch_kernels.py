#!/usr/bin/env python3
"""ditune's GPU kernels beside PyTorch's on the same shapes, in the same run: torch.matmul
(bf16, cuBLAS) for each GEMM row and scaled_dot_product_attention with the flash backend for
each attention row of `bench_cuda --csv` (or of `bench_cuda --shapes`, to time PyTorch alone),
on random inputs, CUDA events, median of the repetitions after warm-up. Prints a table with
ditune's TFLOP/s over PyTorch's and writes it as CSV.

  build/bench/bench_cuda --csv ditune.csv
  python3 bench/torch_kernels.py ditune.csv --out ratios.csv
  python3 bench/torch_kernels.py ditune.csv --out ratios.csv --dry-run   # no torch: checks the file

Goal (issue #38): ditune's attention at least 0.7x PyTorch's flash SDPA, head dim 128, 4k-64k
tokens; the summary line says whether every such row meets it.
"""
import argparse
import csv
import statistics
import sys

GOAL = 0.7


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"kind", "label", "m", "k", "n", "tokens", "heads", "head_dim"}
    if not rows or not need <= set(rows[0]):
        raise ValueError(f"{path}: expected the columns of bench_cuda --csv or --shapes ({', '.join(sorted(need))})")
    for r in rows:
        if r["kind"] not in ("gemm", "attention", "flash"):
            raise ValueError(f"{path}: unknown kind '{r['kind']}' (valid: gemm, attention, flash)")
        for key in ("m", "k", "n", "tokens", "heads", "head_dim"):
            r[key] = int(r[key])
    return rows


def flops(r):
    if r["kind"] == "gemm":
        return 2.0 * r["m"] * r["k"] * r["n"]
    return 4.0 * r["tokens"] * r["tokens"] * r["heads"] * r["head_dim"]


def time_torch(rows, reps):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = torch.device("cuda")
    gen = torch.Generator(device=dev)
    gen.manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, device=dev, dtype=torch.bfloat16, generator=gen)

    out = []
    for r in rows:
        if r["kind"] == "gemm":
            a, b = rand(r["m"], r["k"]), rand(r["k"], r["n"])
            fn = lambda: torch.matmul(a, b)  # noqa: E731
        else:
            q, k, v = (rand(1, r["heads"], r["tokens"], r["head_dim"]) for _ in range(3))

            def fn():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v)
        try:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(reps if r["tokens"] <= 20000 else max(3, reps // 4)):
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            out.append(statistics.median(times))
        except Exception as e:  # a shape PyTorch's flash backend refuses is a row without a figure
            print(f"torch_kernels: {r['kind']} {r['label']}: {e}", file=sys.stderr)
            out.append(None)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", help="bench_cuda --csv output (or --shapes)")
    ap.add_argument("--out", required=True, help="the comparison CSV to write")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dry-run", action="store_true", help="no torch: read and join only")
    args = ap.parse_args()
    try:
        rows = read_rows(args.rows)
    except (OSError, ValueError) as e:
        print(f"torch_kernels: {e}", file=sys.stderr)
        return 2
    torch_ms = [None] * len(rows) if args.dry_run else time_torch(rows, args.reps)
    print(f"{'kind':<10} {'shape':<34} {'ditune TF/s':>12} {'torch TF/s':>11} {'ratio':>7}")
    goal_rows, goal_met = 0, 0
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "label", "m", "k", "n", "tokens", "heads", "head_dim", "ditune_tflops", "torch_ms",
                    "torch_tflops", "ratio"])
        for r, tm in zip(rows, torch_ms):
            ours = float(r["tflops"]) if r.get("tflops") not in (None, "") else None
            theirs = flops(r) / (tm / 1e3) / 1e12 if tm else None
            ratio = ours / theirs if ours and theirs else None
            shape = (f"{r['label']} {r['m']}x{r['k']}x{r['n']}" if r["kind"] == "gemm"
                     else f"{r['label']} {r['tokens']}, {r['heads']} x {r['head_dim']}")
            fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
            print(f"{r['kind']:<10} {shape:<34} {fmt(ours, '12.1f')} {fmt(theirs, '11.1f')} {fmt(ratio, '7.2f')}")
            w.writerow([r["kind"], r["label"], r["m"], r["k"], r["n"], r["tokens"], r["heads"], r["head_dim"],
                        fmt(ours, ".3f"), fmt(tm, ".6f"), fmt(theirs, ".3f"), fmt(ratio, ".3f")])
            if r["kind"] == "flash" and r["head_dim"] == 128 and 4096 <= r["tokens"] <= 65536 + 512:
                goal_rows += 1
                goal_met += ratio is not None and ratio >= GOAL
    print(f"attention goal (>= {GOAL}x flash SDPA, head dim 128, 4k-64k tokens): {goal_met} of {goal_rows} rows"
          + (" (dry run: nothing timed)" if args.dry_run else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
