#!/usr/bin/env python3
"""Eager-mode launch overhead of a small transformer layer (issue 41): one training step
(forward + backward) of a Llama-style layer (RMSNorm, GQA attention through SDPA, SwiGLU MLP,
bf16) timed three ways on one GPU: eager PyTorch, torch.compile, and the eager step captured
into a CUDA graph (torch.cuda.graph: one launch replays every kernel). The eager step's
kernels are counted with torch.profiler; (eager - graph) / kernels is the host-side cost per
kernel launch that a framework without compilation or CUDA graphs pays where the GPU's work
is too short to hide it (docs/benchmarks/selection-launch-h100.json, selection-launch.md).

    python tools/bench_launch_overhead.py --json out.json [--hidden 512,1024,2048] [--tokens 1024,4096]
Timing like nccl-tests' BenchTime: a host clock over `iters` back-to-back steps and the
synchronize that follows, divided by iters; the median of `repeats` such batches."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def layer(h, heads, kv, ffn, dev, dtype):
    import torch
    import torch.nn.functional as F

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            d = h // heads
            self.heads, self.kv, self.d = heads, kv, d
            self.n1 = torch.nn.RMSNorm(h)
            self.n2 = torch.nn.RMSNorm(h)
            self.qkv = torch.nn.Linear(h, (heads + 2 * kv) * d, bias=False)
            self.o = torch.nn.Linear(heads * d, h, bias=False)
            self.gu = torch.nn.Linear(h, 2 * ffn, bias=False)
            self.down = torch.nn.Linear(ffn, h, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).split([self.heads * self.d, self.kv * self.d, self.kv * self.d], -1)
            q = q.view(b, s, self.heads, self.d).transpose(1, 2)
            k = k.view(b, s, self.kv, self.d).transpose(1, 2)
            v = v.view(b, s, self.kv, self.d).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
            g, u = self.gu(self.n2(x)).chunk(2, -1)
            return x + self.down(F.silu(g) * u)

    return Layer().to(dev, dtype)


def timed(fn, iters, repeats):
    import torch
    out = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / iters)
    return statistics.median(out)


def kernels_per_step(step):
    import torch
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def case(h, tokens, iters, repeats):
    import torch
    dev, dtype = "cuda", torch.bfloat16
    heads = max(1, h // 128)
    kv = max(1, heads // 4)
    ffn = int(8 * h / 3 // 256 + 1) * 256
    b, s = 1, tokens
    torch.manual_seed(0)
    m = layer(h, heads, kv, ffn, dev, dtype)
    x = torch.randn(b, s, h, device=dev, dtype=dtype, requires_grad=True)
    params = list(m.parameters())

    def step(mod=m):
        y = mod(x)
        y.float().sum().backward()

    def zero():
        for p in params:
            p.grad = None
        x.grad = None

    def eager():
        zero()
        step()

    for _ in range(3):
        eager()
    t_eager = timed(eager, iters, repeats)
    n_kernels = kernels_per_step(eager)
    # CUDA graph of the whole eager step (gradients accumulate into static buffers)
    for p in params:
        p.grad = torch.zeros_like(p)
    x.grad = torch.zeros_like(x)
    s_ = torch.cuda.Stream()
    s_.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s_):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s_)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    t_graph = timed(g.replay, iters, repeats)
    # torch.compile (default mode: fused kernels, no CUDA graphs) and mode="max-autotune-no-cudagraphs" not used
    for p in params:
        p.grad = None
    cm = torch.compile(m)
    compiled = lambda: (zero(), step(cm))  # noqa: E731
    t0 = time.perf_counter()
    for _ in range(3):
        compiled()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    t_comp = timed(compiled, iters, repeats)
    n_comp = kernels_per_step(compiled)
    flops = 3 * (2 * tokens * (h * (heads + 2 * kv) * (h // heads) + heads * (h // heads) * h + 3 * h * ffn)
                 + 2 * tokens * (tokens + 1) / 2 * heads * 2 * (h // heads))
    return {"hidden": h, "heads": heads, "kv_heads": kv, "ffn": ffn, "tokens": tokens,
            "eager_s": t_eager, "graph_s": t_graph, "compile_s": t_comp, "compile_warmup_s": compile_s,
            "kernels_eager": n_kernels, "kernels_compiled": n_comp,
            "launch_s_per_kernel": (t_eager - t_graph) / n_kernels if n_kernels else None,
            "eager_over_graph": t_eager / t_graph, "flops": flops,
            "eager_tflops": flops / t_eager / 1e12, "graph_tflops": flops / t_graph / 1e12}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", default="512,1024,2048,4096")
    p.add_argument("--tokens", default="512,2048,8192")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("bench_launch_overhead: no CUDA device", file=sys.stderr)
        return 2
    rows = []
    doc = {"what": "eager vs CUDA graph vs torch.compile step time of one Llama-style layer, forward + backward, "
                   "bf16, batch 1 (tools/bench_launch_overhead.py)",
           "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cases": rows}
    for h in (int(v) for v in a.hidden.split(",")):
        for t in (int(v) for v in a.tokens.split(",")):
            r = case(h, t, a.iters, a.repeats)
            rows.append(r)
            if a.json:                        # written after every case: a run cut short keeps what it measured
                with open(a.json, "w", encoding="utf-8") as f:
                    json.dump(doc, f, indent=1)
            print(f"h {h:5d} tokens {t:5d}: eager {r['eager_s'] * 1e3:8.3f} ms  graph {r['graph_s'] * 1e3:8.3f} ms  "
                  f"compile {r['compile_s'] * 1e3:8.3f} ms  kernels {r['kernels_eager']} / {r['kernels_compiled']}  "
                  f"launch {1e6 * (r['launch_s_per_kernel'] or 0):6.2f} us/kernel", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
