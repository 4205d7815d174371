#!/usr/bin/env python3
"""What a collective costs the host in eager PyTorch: host µs of one call, and of the framework
ops a sequence-parallel library wraps around an all-to-all, where the device is not the
bottleneck (small tensors, one process with an NCCL group of one GPU).

ditune prices the wrapper around each Ulysses all-to-all as Mechanisms::ulysses_ops framework
ops (reshape, transpose, contiguous, empty_like, the collective, reshape, transpose,
contiguous, reshape: nine by count) at Mechanisms::eager_op_us each. A collective's own call
(process group, work object, stream events) may cost the host several plain ops; this
measures it, and the whole wrapped sequence, in µs and in tiny-op units:
  tiny_op         Tensor.add_ on 16 elements
  all_to_all      dist.all_to_all_single on a [1, tokens, heads, head_dim] bf16 tensor
  all_gather      dist.all_gather_into_tensor, same tensor
  all_reduce      dist.all_reduce, same tensor
  a2a_wrapped     the nine ops above around the all-to-all (written here, in the order the
                  library's all_to_all_4D issues them), inside an autograd Function's apply
Each row: ATen ops dispatched (TorchDispatchMode), host µs per call (median of rounds of
back-to-back calls, then a sync). A group of one GPU moves no bytes between GPUs; the host
side of the call is what is measured.

  python3 bench/collective_host_ops.py --out collective_host_ops.csv
  python3 bench/collective_host_ops.py --out collective_host_ops.csv --dry-run
"""
import argparse
import csv
import os
import statistics
import sys
import time

COLUMNS = ["op", "tokens", "heads", "head_dim", "aten_ops", "host_us", "status", "source"]
OPS = ["tiny_op", "all_to_all", "all_gather", "all_reduce", "a2a_wrapped"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--heads", type=int, default=24)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    rows = []
    base = {"tokens": a.tokens, "heads": a.heads, "head_dim": a.head_dim}
    if a.dry_run:
        rows = [dict(base, op=op, aten_ops="", host_us="", status="dry-run", source="") for op in OPS]
    else:
        import torch
        import torch.distributed as dist
        from torch.utils._python_dispatch import TorchDispatchMode
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
        x = torch.randn(1, a.tokens, a.heads, a.head_dim, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        gathered = torch.empty((1,) + tuple(x.shape[1:]), device="cuda", dtype=torch.bfloat16)
        tiny = torch.zeros(16, device="cuda")
        world = dist.get_world_size()

        def a2a_4d(t):
            # The library's order: reshape, transpose, contiguous, empty_like, the collective,
            # reshape, transpose, contiguous, reshape.
            bs, shard, hc, hs = t.shape
            t2 = t.reshape(bs, shard, world, hc // world, hs).transpose(0, 2).contiguous()
            o = torch.empty_like(t2)
            dist.all_to_all_single(o, t2)
            o = o.reshape(shard * world, bs, hc // world, hs)
            return o.transpose(0, 1).contiguous().reshape(bs, shard * world, hc // world, hs)

        class A2A(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return a2a_4d(t)

            @staticmethod
            def backward(ctx, g):
                return g

        calls = {
            "tiny_op": lambda: tiny.add_(1),
            "all_to_all": lambda: dist.all_to_all_single(out, x),
            "all_gather": lambda: dist.all_gather_into_tensor(gathered, x),
            "all_reduce": lambda: dist.all_reduce(out),
            "a2a_wrapped": lambda: A2A.apply(x),
        }

        class Count(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.ops = 0

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.ops += 1
                return func(*args, **(kwargs or {}))

        with torch.inference_mode():
            for op in OPS:
                row = dict(base, op=op, source=f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
                try:
                    fn = calls[op]
                    for _ in range(20):
                        fn()
                    torch.cuda.synchronize()
                    counter = Count()
                    with counter:
                        fn()
                    torch.cuda.synchronize()
                    times = []
                    for _ in range(a.rounds):
                        torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        for _ in range(a.reps):
                            fn()
                        torch.cuda.synchronize()
                        times.append((time.perf_counter() - t0) / a.reps * 1e6)
                    row.update(aten_ops=counter.ops, host_us=f"{statistics.median(times):.2f}", status="ok")
                except Exception as e:  # one op's failure must not lose the others
                    row.update(aten_ops="", host_us="", status=f"error: {type(e).__name__}: {str(e)[:160]}")
                rows.append(row)
                print(" ".join(f"{k}={row[k]}" for k in COLUMNS if k != "source"), flush=True)
        dist.destroy_process_group()
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    ok = [r for r in rows if r["status"] == "ok"]
    tiny = next((float(r["host_us"]) for r in ok if r["op"] == "tiny_op"), None)
    for r in ok:
        if tiny and r["op"] != "tiny_op":
            print(f"{r['op']}: {float(r['host_us']) / tiny:.1f} tiny ops of host time")
    verb = "listed (dry run)" if a.dry_run else "measured"
    print(f"collective host ops: {len(ok) if not a.dry_run else len(rows)} of {len(rows)} {verb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
