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
  attention  torch's scaled_dot_product_attention, causal, forward + backward, per backend
             (flash, cuDNN): select counts 3 x the causal forward, 3 x 4 b a s (s+1)/2 d
             (workload.flops_per_sample(executed=True)); FlashAttention's own benchmarks
             count the backward as 2.5 x the forward instead.

    python tools/check_select_kernels.py --json out.json     # needs torch and a CUDA GPU
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from comm_bench.select import gpus as GP
    name = torch.cuda.get_device_name()
    peak = GP.lookup(name)[0]["peak_tflops"] * 1e12
    rows = []
    dev, bf = "cuda", torch.bfloat16
    for label, M, K, N in GEMMS:
        x, y = torch.randn(M, K, device=dev, dtype=bf), torch.randn(K, N, device=dev, dtype=bf)
        t = timed(lambda: x @ y)
        rows.append({"kind": "gemm", "case": label, "M": M, "K": K, "N": N, "seconds": t,
                     "tflops": 2 * M * N * K / t / 1e12, "efficiency": 2 * M * N * K / t / peak})
    for label, b, h, kv, s, d in ATTENTION:
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
    for r in rows:
        print(json.dumps(r))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"device": name, "torch": torch.__version__, "peak_tflops": peak / 1e12, "cases": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
