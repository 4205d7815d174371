"""The peer of ditune's engine on the cpu kernels: one tiny-pixart denoising step in PyTorch.

The same operations as the engine's cross blocks (executor/engine/blocks.cc) on the same shapes (tiny-pixart: hidden 64, 4 heads of
16, MLP 256, 2 cross blocks, 8 text tokens; 512x512 -> 1024 image tokens), fp32, both
classifier-free-guidance branches and the Euler update, with random weights. Attention is
PyTorch 1.13's own (bmm, softmax, bmm): the S x S scores materialised, as a PyTorch user
without fused attention runs it. Run by bench_step_vs_torch.sh, which pins one thread and
OpenBLAS; prints one JSON line: {"step_median_s" (wall), "step_cpu_median_s" (this thread's
CPU time: the one thread does all the work), "step_p10_s", "step_p90_s", "blas", ...}.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F


def loaded_blas():
    """The BLAS shared objects this process has mapped (after a GEMM has run)."""
    names = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "blas" in path or "mkl" in path or "lapack" in path:
                names.add(path)
    return sorted(names)


class TinyPixart:
    def __init__(self, hidden=64, heads=4, mlp=256, blocks=2, text_tokens=8, text_hidden=32, latent=16, seed=42):
        g = torch.Generator().manual_seed(seed)
        H = hidden

        def w(rows, cols, std=1.0):
            return torch.randn(rows, cols, generator=g) * (std / math.sqrt(rows))

        self.heads, self.hidden = heads, H
        self.blocks = []
        for _ in range(blocks):
            b = {"mod": w(H, 6 * H, 0.1)}
            for n in ("wq", "wk", "wv", "wo", "xq", "xk", "xv", "xo"):
                b[n] = w(H, H)
            b["w1"], b["w2"] = w(H, mlp), w(mlp, H)
            self.blocks.append(b)
        self.t1, self.t2 = w(256, H), w(H, H)
        self.patch, self.fmod, self.out = w(latent, H), w(H, 2 * H, 0.1), w(H, latent)
        text = w(text_tokens, text_hidden) @ w(text_hidden, H)
        self.ctx = [text, text.flip(0)]  # conditional, unconditional

    def conditioning(self, t):
        i = torch.arange(128, dtype=torch.float32)
        f = torch.exp(-math.log(10000.0) * i / 128.0)
        e = torch.cat([torch.cos(t * f), torch.sin(t * f)]).unsqueeze(0)
        return F.silu(F.silu(e @ self.t1) @ self.t2)

    def norm_mod(self, x, shift, scale):
        return F.layer_norm(x, (self.hidden,), eps=1e-6) * (1 + scale) + shift

    def attention(self, q, k, v):
        h, d = self.heads, self.hidden // self.heads
        q = q.view(q.shape[0], h, d).transpose(0, 1)
        k = k.view(k.shape[0], h, d).transpose(0, 1)
        v = v.view(v.shape[0], h, d).transpose(0, 1)
        p = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d), dim=-1)
        return torch.bmm(p, v).transpose(0, 1).reshape(q.shape[1], h * d)

    def forward(self, latent, c, ctx):
        H = self.hidden
        x = latent @ self.patch
        for b in self.blocks:
            m = (c @ b["mod"]).chunk(6, dim=1)
            h = self.norm_mod(x, m[0], m[1])
            o = self.attention(h @ b["wq"], h @ b["wk"], h @ b["wv"])
            x = x + (o @ b["wo"]) * m[2]
            h2 = F.layer_norm(x, (H,), eps=1e-6)
            x = x + self.attention(h2 @ b["xq"], ctx @ b["xk"], ctx @ b["xv"]) @ b["xo"]
            y = F.gelu(self.norm_mod(x, m[3], m[4]) @ b["w1"], approximate="tanh") @ b["w2"]
            x = x + y * m[5]
        fm = (c @ self.fmod).chunk(2, dim=1)
        return self.norm_mod(x, fm[0], fm[1]) @ self.out

    def step(self, x, sigma, next_sigma, guidance=4.0):
        c = self.conditioning(sigma * 1000.0)
        vc = self.forward(x, c, self.ctx[0])
        vu = self.forward(x, c, self.ctx[1])
        return x + (next_sigma - sigma) * (vu + guidance * (vc - vu))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1024, help="image tokens (512x512 tiny-pixart: 1024)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--show-config", action="store_true", help="print torch.__config__.show() to stderr")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = TinyPixart()
    x = torch.randn(args.tokens, 16)
    times, cpu_times = [], []
    with torch.inference_mode():
        for k in range(args.warmup + args.steps):
            t0, c0 = time.perf_counter(), time.thread_time()
            x = model.step(x, 1.0 - k / 1000.0, 1.0 - (k + 1) / 1000.0)
            dt, dc = time.perf_counter() - t0, time.thread_time() - c0
            if k >= args.warmup:
                times.append(dt)
                cpu_times.append(dc)
    assert torch.isfinite(x).all()
    if args.show_config:
        import sys
        print(torch.__config__.show(), file=sys.stderr)
    q = statistics.quantiles(times, n=10)
    print(json.dumps({"step_median_s": statistics.median(times), "step_p10_s": q[0], "step_p90_s": q[-1],
                      "step_cpu_median_s": statistics.median(cpu_times),
                      "steps": len(times), "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "blas": loaded_blas()}))


if __name__ == "__main__":
    main()
