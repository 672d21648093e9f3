"""Memory per GPU (1 GB = 1e9 B).

Model states (ZeRO paper, Rajbhandari et al. 2019, arXiv 1910.02054, section 5): with
p, g, k bytes per parameter for parameters, gradients and optimizer states (mixed
precision Adam: 2, 2, 12 = 16 bytes) and N-way data parallelism:
    baseline (DDP)      (p + g + k) psi
    ZeRO-1 (P_os)       (p + g) psi + k psi / N
    ZeRO-2 (P_os+g)     p psi + (g + k) psi / N
    ZeRO-3 (P_os+g+p)   (p + g + k) psi / N          (FSDP FULL_SHARD: the same)
With tensor x pipeline parallelism each GPU holds psi / (tp pp) parameters; Megatron's
distributed optimizer shards k over dp: (p + g) psi/(tp pp) + k psi/(tp pp dp).

Activations (Korthikanti et al. 2022, arXiv 2205.05198, Table 2), bytes per layer for
sequence s, micro-batch b, hidden h, heads a, tensor parallel t, 16-bit activations:
    none        s b h (10 + 24/t + 5 a s / (h t))
    selective   s b h (10 + 24/t)         (attention core recomputed; FlashAttention alike)
    full        2 s b h                    (only each layer's input kept)
x 2 for fp32 activations. With 1F1B pipelining the first stage keeps min(pp, m)
micro-batches of its L/pp layers in flight.
"""
from __future__ import annotations

import math


def model_states_bytes(psi, p, g, k, kind, dp, tp=1, pp=1):
    psi = psi / (tp * pp)
    if kind == "ddp":
        return (p + g + k) * psi
    if kind == "zero-1":
        return (p + g) * psi + k * psi / dp
    if kind == "zero-2":
        return p * psi + (g + k) * psi / dp
    if kind in ("zero-3", "fsdp"):
        return (p + g + k) * psi / dp
    if kind == "megatron":
        return (p + g) * psi + k * psi / dp
    raise ValueError(kind)


def activation_bytes_per_layer(s, b, h, a, t=1, recompute="selective", act_bytes=2):
    if recompute == "full":
        f = 2.0
    elif recompute == "selective":
        f = 10.0 + 24.0 / t
    else:
        f = 10.0 + 24.0 / t + 5.0 * a * s / (h * t)
    return s * b * h * f * act_bytes / 2.0


def activation_bytes(w, tp=1, pp=1, microbatches=1):
    if w["kind"] != "transformer":
        return w["act_bytes_per_sample"] * w["micro_batch"] * w["bytes"]["act"] / 2.0
    per_layer = activation_bytes_per_layer(w["seq_len"], w["micro_batch"], w["hidden"], w["heads"], tp,
                                           w["recompute"], w["bytes"]["act"])
    in_flight = min(pp, microbatches) if pp > 1 else 1
    return per_layer * math.ceil(w["layers"] / pp) * in_flight
