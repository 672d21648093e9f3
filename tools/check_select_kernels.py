#!/usr/bin/env python3
"""Kernel efficiencies behind `comm-bench select`'s compute roofline, measured on the GPU at
hand (docs/selection.md, section 3; docs/benchmarks/selection-kernels-*.json).

For each case: seconds per call (CUDA events, median of 20 after 5 warm-ups) and the
efficiency select's accounting gives it, FLOPs as select counts them / (seconds x the data
sheet's dense bf16 peak, comm_bench/select/gpus.py):
  gemm       one bf16 matmul (M x K) @ (K x N): 2 M N K FLOPs. The shapes of the published
             runs of tools/check_select_runs.py (Llama 3 405B at tp8, 8,192 tokens;
             gpt-oss-120b's attention at 16,384 tokens and one expert at 4,096 tokens, the
             tokens ep 8 routes to it per micro-batch of 4 x 4,096) and 8192^3.
  expert     a MoE layer's routed experts on one GPU, forward + backward (data and weight
             gradients of both matrices): E local SwiGLU experts of M tokens each, gate+up
             (M x h) @ (h x 2 f) and down (M x f) @ (f x h), one cuBLAS matmul per expert (as
             a loop of GEMMs, Megatron-Core's non-grouped path) and torch._grouped_mm (one
             grouped kernel, where this torch has it): 3 x 2 M (3 h f) FLOPs per expert.
  cross_entropy  the loss over a vocabulary: bf16 logits (T x V) to fp32 cross-entropy,
             forward + backward (torch eager); reported as the HBM bytes per logit element
             it is worth at the data sheet's bandwidth (seconds x TB/s / (T V)).
  attention  torch's scaled_dot_product_attention, causal, forward + backward, per backend
             (flash, cuDNN): select counts 3 x the causal forward, 3 x 4 b a s (s+1)/2 d
             (workload.flops_per_sample(executed=True)); FlashAttention's own benchmarks
             count the backward as 2.5 x the forward instead.

  expert_grid  (not in the default kinds) the expert case for the routed experts of each MoE
             preset (EXPERT_SHAPES) at M = 128 ... 8,192 tokens per expert, bf16 (loop and
             grouped) and FP8 (a loop of fp8 cases per expert, and torch._scaled_grouped_mm;
             against the FP8 peak).
  fp8        forward, data and weight gradient of a linear layer as three FP8 GEMMs (e4m3,
             per-tensor scales, bf16 out; torch._scaled_mm), Llama 3 8B / 70B / 405B at the
             tensor-parallel sizes of NeMo's FP8 runs; efficiency against the FP8 dense peak
             (2 x the bf16 peak on Hopper). The casts to FP8 are not timed.
  sustained  (--sustain SECONDS) the same kernels chained as one layer of a published run,
             forward + backward, run without a pause for SECONDS per layer: the efficiency
             per window of --window seconds, first window (a cool card, what the short
             cases above see) to last (clocks and power as a training run holds them).
             Log the clocks beside it: nvidia-smi --query-gpu=timestamp,clocks.sm,
             power.draw,temperature.gpu --format=csv -l 1

    python tools/check_select_kernels.py --json out.json     # needs torch and a CUDA GPU
    python tools/check_select_kernels.py --sustain 240 --json sustained.json
    python tools/check_select_kernels.py --expert-table docs/benchmarks/selection-kernels-experts-h200.json \
        comm_bench/data/select_expert_gemms.json      # select's table from an expert_grid run
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GEMMS = [  # (label, M, K, N)
    ("square 8192", 8192, 8192, 8192),
    ("llama3-405b tp8 QKV", 8192, 16384, (16384 + 2 * 8 * 128) // 8),
    ("llama3-405b tp8 attention out", 8192, 16384 // 8, 16384),
    ("llama3-405b tp8 gate+up", 8192, 16384, 2 * 53248 // 8),
    ("llama3-405b tp8 down", 8192, 53248 // 8, 16384),
    ("gpt-oss-120b QKV", 16384, 2880, (64 + 2 * 8) * 64),
    ("gpt-oss-120b attention out", 16384, 64 * 64, 2880),
    ("gpt-oss-120b expert gate+up", 4096, 2880, 2 * 2880),
    ("gpt-oss-120b expert down", 4096, 2880, 2880),
]
EXPERTS = [  # (label, local experts, tokens per expert M, hidden h, expert FFN f)
    ("gpt-oss-120b ep8, b 1", 16, 1024, 2880, 2880),
    ("gpt-oss-120b ep8, b 4", 16, 4096, 2880, 2880),
    ("gpt-oss-120b ep8, b 16", 16, 16384, 2880, 2880),
    ("mixtral-8x22b ep8, b 1", 1, 8192, 6144, 16384),
]
# expert_grid: the routed experts of the MoE presets (hidden h, expert FFN f) at each M, the
# tokens an expert gets per micro-batch (ep etp b s k / (tp E): 128 for a small micro-batch
# spread over many experts, 8,192 for a large one over few), GRID_EXPERTS local experts
EXPERT_SHAPES = [("qwen3-30b-a3b", 2048, 768), ("gpt-oss-120b", 2880, 2880), ("qwen3-235b-a22b", 4096, 1536),
                 ("deepseek-v3", 7168, 2048), ("mixtral-8x7b", 4096, 14336)]
EXPERT_M = (128, 256, 512, 1024, 2048, 4096, 8192)
GRID_EXPERTS = 8
CROSS_ENTROPY = [  # (label, tokens T, vocabulary V)
    ("gpt-oss-120b, b 4 x 4,096", 16384, 201088),
    ("llama3 vocabulary, 8,192 tokens", 8192, 128256),
]
ATTENTION = [  # (label, batch, heads, kv heads, seq, head dim)
    ("llama3-405b tp8, 8K", 1, 128 // 8, 1, 8192, 128),
    ("llama3-405b tp8, 32K", 1, 128 // 8, 1, 32768, 128),
    ("gpt-oss-120b, 4K, b 4", 4, 64, 8, 4096, 64),
]


def timed(fn, reps=20, warm=5):
    import torch
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return sorted(out)[len(out) // 2]


FP8_GEMMS = [  # Llama 3 at the tensor-parallel sizes of NeMo's 25.11 FP8 runs on H100, 8,192 tokens
    ("llama3-8b tp1 QKV", 8192, 4096, 4096 + 2 * 8 * 128),
    ("llama3-8b tp1 attention out", 8192, 4096, 4096),
    ("llama3-8b tp1 gate+up", 8192, 4096, 2 * 14336),
    ("llama3-8b tp1 down", 8192, 14336, 4096),
    ("llama3-70b tp4 QKV", 8192, 8192, (8192 + 2 * 8 * 128) // 4),
    ("llama3-70b tp4 attention out", 8192, 8192 // 4, 8192),
    ("llama3-70b tp4 gate+up", 8192, 8192, 2 * 28672 // 4),
    ("llama3-70b tp4 down", 8192, 28672 // 4, 8192),
] + [(f"{label}, cp2", 4096, K, N) for label, _, K, N in GEMMS[1:5]]
ATTENTION_70B = ("llama3-70b tp4, 8K", 1, 64 // 4, 8 // 4, 8192, 128)
SUSTAINED = {  # layer: (GEMMs (M, K, N) run forward + data + weight gradient, grouped experts, attention)
    "llama3-405b-tp8-8k": (GEMMS[1:5], None, ATTENTION[0]),
    "gpt-oss-120b-ep8-b4": (GEMMS[5:7], EXPERTS[1], ATTENTION[2]),
    "llama3-405b-tp8-32k": (GEMMS[1:5], None, ATTENTION[1]),
    "llama3-70b-tp4-8k": (FP8_GEMMS[4:8], None, ATTENTION_70B),
    # the same with FP8 GEMMs (per-tensor scaled e4m3, torch._scaled_mm) beside bf16 cuDNN attention
    "llama3-70b-tp4-8k-fp8": (FP8_GEMMS[4:8], None, ATTENTION_70B, True),
}


def fp8_gemm(M, K, N):
    """Forward, data and weight gradient of an (M x K) @ (K x N) linear layer as FP8 GEMMs
    (e4m3 operands, per-tensor scales, bf16 out: cuBLASLt through torch._scaled_mm, which takes
    a row-major first and a column-major second operand)."""
    import torch
    f8, one = torch.float8_e4m3fn, torch.ones((), device="cuda")

    def pair(m, k, n):
        a = torch.randn(m, k, device="cuda").to(f8)
        b = torch.randn(n, k, device="cuda").to(f8).T
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    calls = [pair(M, K, N), pair(M, N, K), pair(K, M, N)]
    return lambda: [c() for c in calls]


def layer_pieces(gemms, experts, attention, fp8=False):
    """(label, FLOPs as select counts them, closure, its peak as a multiple of the bf16 peak)
    for each piece of one layer."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dev, bf = "cuda", torch.bfloat16
    pieces = []
    for label, M, K, N in gemms:
        if fp8:
            pieces.append((label + " (fp8)", 3 * 2.0 * M * N * K, fp8_gemm(M, K, N), 2))
            continue
        x, w, g = (torch.randn(*s, device=dev, dtype=bf) for s in ((M, K), (K, N), (M, N)))
        pieces.append((label, 3 * 2.0 * M * N * K, lambda x=x, w=w, g=g: (x @ w, g @ w.T, x.T @ g), 1))
    if experts:
        label, E, M, h, f = experts
        pieces.append((label + " experts", E * 3 * 2.0 * M * 3 * h * f,
                       dict(expert_rows(label, E, M, h, f, 1.0, closures=True))["torch._grouped_mm"], 1))
    label, b, h, kv, s, d = attention
    q = torch.randn(b, h, s, d, device=dev, dtype=bf, requires_grad=True)
    k, v = (torch.randn(b, kv, s, d, device=dev, dtype=bf, requires_grad=True) for _ in range(2))
    g = torch.randn(b, h, s, d, device=dev, dtype=bf)

    def attend():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h).backward(g)
    pieces.append((label + " attention (cuDNN)", 3 * 4.0 * b * h * s * (s + 1) / 2 * d, attend, 1))
    return pieces


def sustained_rows(layer, seconds, window, peak):
    """The layer's pieces in a loop for `seconds`; per window, each piece's efficiency from
    the CUDA events around it (read at the window's end, so the GPU never waits on the host
    inside a window)."""
    import time
    import torch
    pieces = layer_pieces(*SUSTAINED[layer])
    rows, t0 = [], time.monotonic()
    while time.monotonic() - t0 < seconds:
        layers, w0 = [], time.monotonic()     # per layer run: (start, end) events of each piece
        while time.monotonic() - w0 < window:
            marks = []
            for _, _, fn, _ in pieces:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                marks.append((a, b))
            layers.append(marks)
            if len(layers) > 16:              # the host stays at most 16 layers ahead
                layers[-16][-1][1].synchronize()
        torch.cuda.synchronize()
        n = len(layers)
        secs = [sum(a.elapsed_time(b) for a, b in piece) / 1e3 / n for piece in zip(*layers)]
        flops = sum(p[1] for p in pieces)
        rows.append({"kind": "sustained", "case": layer, "start_s": round(w0 - t0, 1), "layers": n,
                     "seconds_per_layer": sum(secs), "efficiency": flops / sum(secs) / peak,
                     "pieces": {lab: f / s / (peak * x) for (lab, f, _, x), s in zip(pieces, secs)}})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def expert_rows(label, E, M, h, f, peak, closures=False):
    """Forward + backward of E SwiGLU experts of M tokens each: per-expert matmuls, and one
    torch._grouped_mm per matrix where available."""
    import torch
    dev, bf = "cuda", torch.bfloat16
    x = torch.randn(E, M, h, device=dev, dtype=bf)
    w1, w2 = torch.randn(E, h, 2 * f, device=dev, dtype=bf), torch.randn(E, f, h, device=dev, dtype=bf)
    a, g = torch.randn(E, M, f, device=dev, dtype=bf), torch.randn(E, M, h, device=dev, dtype=bf)
    g1 = torch.randn(E, M, 2 * f, device=dev, dtype=bf)
    flops = E * 3 * 2.0 * M * 3 * h * f

    def loop():                    # forward, data gradient, weight gradient of both matrices
        for e in range(E):
            x[e] @ w1[e], a[e] @ w2[e]
            g[e] @ w2[e].T, g1[e] @ w1[e].T
            a[e].T @ g[e], x[e].T @ g1[e]
    out = [("loop of matmuls", loop)]
    if hasattr(torch, "_grouped_mm"):
        offs = torch.arange(M, E * M + 1, M, device=dev, dtype=torch.int32)
        # torchtitan's call: weights stored (E, out, in), passed transposed; autograd runs the
        # data and weight gradients as grouped kernels too
        xf = x.reshape(E * M, h).requires_grad_()
        af = a.reshape(E * M, f).requires_grad_()
        v1 = w1.transpose(1, 2).contiguous().requires_grad_()
        v2 = w2.transpose(1, 2).contiguous().requires_grad_()
        gf, g1f = g.reshape(E * M, h), g1.reshape(E * M, 2 * f)

        def grouped():
            xf.grad = af.grad = v1.grad = v2.grad = None     # no accumulation kernels timed
            y1 = torch._grouped_mm(xf, v1.transpose(-2, -1), offs=offs)
            y2 = torch._grouped_mm(af, v2.transpose(-2, -1), offs=offs)
            torch.autograd.backward([y1, y2], [g1f, gf])
        out.append(("torch._grouped_mm", grouped))
    if closures:
        return out
    return timed_expert_rows("expert", label, out, E, M, h, f, flops, peak)


def timed_expert_rows(kind, label, ways, E, M, h, f, flops, peak):
    """A row per (how, closure) of `ways`: seconds, TFLOP/s and efficiency against `peak`, or
    the error where this GPU or build refuses the kernel."""
    rows = []
    for how, fn in ways:
        try:
            t = timed(fn)
        except Exception as e:  # noqa: BLE001  (a layout or dtype this build refuses; no FP8 here)
            rows.append({"kind": kind, "case": label, "how": how, "error": str(e)[:300]})
            continue
        rows.append({"kind": kind, "case": label, "how": how, "experts": E, "M": M, "hidden": h, "ffn": f,
                     "seconds": t, "tflops": flops / t / 1e12, "efficiency": flops / t / peak})
    return rows


def fp8_grouped(E, M, h, f):
    """The experts' six GEMMs as torch._scaled_grouped_mm calls (e4m3, row-wise scales, bf16
    out): forward (x W1, a W2), data gradients (g1 W1^T, g W2^T), weight gradients (x^T g1,
    a^T g, grouped along the tokens); None where this torch has no such kernel."""
    import torch
    if not hasattr(torch, "_scaled_grouped_mm"):
        return None
    f8, dev = torch.float8_e4m3fn, "cuda"
    offs = torch.arange(M, E * M + 1, M, device=dev, dtype=torch.int32)

    def act(rows, cols):                       # row-major (rows x cols)
        return torch.randn(rows, cols, device=dev).to(f8)

    def weights(k, n):                         # (E, k, n), column-major as the kernel takes it
        return torch.randn(E, n, k, device=dev).to(f8).transpose(-2, -1)

    def fwd(k, n):                             # (E M x k) @ (E, k, n)
        a, b = act(E * M, k), weights(k, n)
        sa, sb = torch.ones(E * M, device=dev), torch.ones(E, n, device=dev)
        return lambda: torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)

    def wgrad(k, n):                           # (k x E M) @ (E M x n), one (k x n) per expert
        a, b = act(k, E * M), act(n, E * M).T
        sa, sb = torch.ones(E * k, device=dev), torch.ones(E * n, device=dev)
        return lambda: torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)
    calls = [fwd(h, 2 * f), fwd(f, h), fwd(2 * f, h), fwd(h, f), wgrad(h, 2 * f), wgrad(f, h)]
    return lambda: [c() for c in calls]


def fp8_expert_rows(label, E, M, h, f, peak):
    """The same experts' GEMMs in FP8, efficiency against the FP8 peak (2 x bf16): a loop of
    fp8_gemm cases per expert (per-tensor scales) and fp8_grouped (one kernel per GEMM)."""
    loop = [fp8_gemm(M, h, 2 * f) for _ in range(E)] + [fp8_gemm(M, f, h) for _ in range(E)]
    ways = [("loop of FP8 GEMMs", lambda: [c() for c in loop]), ("torch._scaled_grouped_mm", fp8_grouped(E, M, h, f))]
    return timed_expert_rows("expert_fp8", label, [(how, fn) for how, fn in ways if fn is not None], E, M, h, f,
                             E * 3 * 2.0 * M * 3 * h * f, 2 * peak)


def expert_table(raw):
    """select's routed-expert efficiency table (comm_bench/data/select_expert_gemms.json) from an
    expert_grid run: per preset shape, bf16 and fp8 [M, efficiency], the faster way at each M."""
    shapes, grid = {}, {label for label, _, _ in EXPERT_SHAPES}
    for r in raw["cases"]:                    # the grid's rows only: not the expert kind's cases
        if r["kind"] not in ("expert", "expert_fp8") or "error" in r or r["case"] not in grid:
            continue
        s = shapes.setdefault(r["case"], {"model": r["case"], "hidden": r["hidden"], "ffn": r["ffn"],
                                          "bf16": {}, "fp8": {}})
        col = s["bf16" if r["kind"] == "expert" else "fp8"]
        col[r["M"]] = max(col.get(r["M"], 0.0), round(r["efficiency"], 3))
    for s in shapes.values():
        for k in ("bf16", "fp8"):
            s[k] = sorted(s[k].items())
    return {"device": raw["device"], "source": "docs/benchmarks/selection-kernels-experts-h200.json "
            "(tools/check_select_kernels.py --kinds expert_grid; --expert-table derives this file)",
            "shapes": list(shapes.values())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--expert-table", nargs=2, metavar=("RUN", "OUT"),
                   help="write select's expert efficiency table OUT from an expert_grid RUN (no GPU)")
    p.add_argument("--kinds", default="gemm,expert,cross_entropy,attention,fp8", help="comma-separated case kinds")
    p.add_argument("--sustain", type=float, default=0, help="seconds per layer of the sustained run (only that)")
    p.add_argument("--layers", default=",".join(SUSTAINED), help="comma-separated layers of the sustained run")
    p.add_argument("--window", type=float, default=10.0, help="seconds per window of the sustained run")
    a = p.parse_args(argv)
    if a.expert_table:
        with open(a.expert_table[0], encoding="utf-8") as f:
            table = expert_table(json.load(f))
        with open(a.expert_table[1], "w", encoding="utf-8") as f:
            json.dump(table, f, indent=1)
            f.write("\n")
        return
    kinds = {"sustained"} if a.sustain else set(a.kinds.split(","))
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from comm_bench.select import gpus as GP
    name = torch.cuda.get_device_name()
    peak = GP.lookup(name)[0]["peak_tflops"] * 1e12
    rows = []
    dev, bf = "cuda", torch.bfloat16
    for label, M, K, N in GEMMS if "gemm" in kinds else []:
        x, y = torch.randn(M, K, device=dev, dtype=bf), torch.randn(K, N, device=dev, dtype=bf)
        t = timed(lambda: x @ y)
        rows.append({"kind": "gemm", "case": label, "M": M, "K": K, "N": N, "seconds": t,
                     "tflops": 2 * M * N * K / t / 1e12, "efficiency": 2 * M * N * K / t / peak})
    for label, M, K, N in FP8_GEMMS if "fp8" in kinds else []:   # efficiency against the FP8 peak, 2 x bf16's
        t = timed(fp8_gemm(M, K, N))
        rows.append({"kind": "fp8", "case": label, "M": M, "K": K, "N": N, "seconds": t,
                     "tflops": 3 * 2 * M * N * K / t / 1e12, "efficiency": 3 * 2 * M * N * K / t / (2 * peak)})
    for label, E, M, h, f in EXPERTS if "expert" in kinds else []:
        rows += expert_rows(label, E, M, h, f, peak)
    for label, h, f in EXPERT_SHAPES if "expert_grid" in kinds else []:
        for M in EXPERT_M:
            rows += expert_rows(label, GRID_EXPERTS, M, h, f, peak)
            rows += fp8_expert_rows(label, GRID_EXPERTS, M, h, f, peak)
    for label, T, V in CROSS_ENTROPY if "cross_entropy" in kinds else []:
        logits = torch.randn(T, V, device=dev, dtype=bf, requires_grad=True)
        target = torch.randint(0, V, (T,), device=dev)
        t = timed(lambda: F.cross_entropy(logits.float(), target).backward())
        hbm = GP.lookup(name)[0]["hbm_tbs"] * 1e12
        rows.append({"kind": "cross_entropy", "case": label, "tokens": T, "vocab": V, "seconds": t,
                     "bytes_per_logit": t * hbm / (T * V)})
    for label, b, h, kv, s, d in ATTENTION if "attention" in kinds else []:
        q = torch.randn(b, h, s, d, device=dev, dtype=bf, requires_grad=True)
        k = torch.randn(b, kv, s, d, device=dev, dtype=bf, requires_grad=True)
        v = torch.randn(b, kv, s, d, device=dev, dtype=bf, requires_grad=True)
        g = torch.randn(b, h, s, d, device=dev, dtype=bf)
        counted = 3 * 4.0 * b * h * s * (s + 1) / 2 * d
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            def step():
                with sdpa_kernel([backend]):
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h)
                o.backward(g)
            try:
                t = timed(step)
            except Exception as e:  # noqa: BLE001  (a backend this build lacks)
                rows.append({"kind": "attention", "case": label, "backend": backend.name, "error": str(e)[:200]})
                continue
            rows.append({"kind": "attention", "case": label, "backend": backend.name, "batch": b, "heads": h,
                         "kv_heads": kv, "seq": s, "head_dim": d, "seconds": t, "tflops": counted / t / 1e12,
                         "efficiency": counted / t / peak})
    for layer in a.layers.split(",") if "sustained" in kinds else []:
        rows += sustained_rows(layer, a.sustain, a.window, peak)
    for r in rows:
        if r["kind"] != "sustained":            # sustained windows were printed as they came
            print(json.dumps(r))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"device": name, "torch": torch.__version__, "peak_tflops": peak / 1e12, "cases": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
