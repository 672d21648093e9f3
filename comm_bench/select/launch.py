"""The host's floor under a micro-batch when kernels are launched one by one (`select --eager`,
issue 41; docs/selection.md, "Launch overhead").

Without CUDA graphs the CPU issues every kernel through Python, the module hooks and
autograd; a layer whose kernels are short waits for the host, not the GPU. Measured on one
H100 (tools/bench_launch_overhead.py, docs/benchmarks/selection-launch-h100.json): a
Llama-style layer (RMSNorm, GQA SDPA attention, SwiGLU MLP, bf16), forward + backward, takes
2.20-2.54 ms eager where its CUDA graph replays in 0.25-0.36 ms (42 kernels: ~53 us of host
time a kernel), and torch.compile's default mode (no CUDA graphs) is no faster (2.25-2.53
ms). HOST_LAYER_S is the median of the three host-bound cases. The GPU and the host run
side by side, so a micro-batch takes max(GPU seconds, host seconds): within -22% / +27% of
the eight measured eager steps, the misses where the two are close (each case in
docs/benchmarks/selection-launch.md).

A MoE layer's dispatcher (Megatron-Core's alltoall dispatcher, router, permute, unpermute
and the token-count copy to the host) adds MOE_DISPATCH_HOST_S, its forward + backward at
1,024 tokens where it is host-bound (tools/bench_moe_megatron.py on the same H100,
docs/benchmarks/selection-moe-megatron-h100.json); the expert loop's own launches are not
counted, so a MoE layer's floor is a lower bound. A recomputed forward adds a third of a
layer's host time (assumed: backward issues about twice the forward's kernels)."""
from __future__ import annotations

from . import shapes as SH

HOST_LAYER_S = 2.244e-3
MOE_DISPATCH_HOST_S = 5.39e-3
RECOMPUTE_SHARE = 1.0 / 3.0


def host_seconds(w, layer_share, recompute):
    """Host seconds of one micro-batch through layer_share of the model's layers (eager)."""
    if not w.get("layers"):
        return 0.0
    n = w["layers"] * layer_share
    moe = SH.moe_layers(w) / w["layers"] * n
    per = 1.0 + (RECOMPUTE_SHARE if recompute == "full" else 0.0)
    return per * (n * HOST_LAYER_S + moe * MOE_DISPATCH_HOST_S)


def note(w):
    moe = (f" (+ {MOE_DISPATCH_HOST_S * 1e3:.2f} ms a MoE layer's dispatcher)" if w.get("layers") and SH.moe_layers(w)
           else "")
    return (f"--eager: each layer's forward + backward takes at least {HOST_LAYER_S * 1e3:.2f} ms of host time"
            f"{moe}, measured on an H100 (tools/bench_launch_overhead.py"
            + (", tools/bench_moe_megatron.py)" if moe else ")"))
