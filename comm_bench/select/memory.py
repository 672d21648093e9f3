"""Memory per GPU (1 GB = 1e9 B).

Model states (ZeRO paper, Rajbhandari et al. 2019, arXiv 1910.02054, section 5): with
p, g, k bytes per parameter for parameters, gradients and optimizer states (mixed
precision Adam: 2, 2, 12 = 16 bytes; Megatron-LM's defaults 2, 4, 12 = 18, layouts.py)
and each state divided by the sharding group's size where the layout shards it
(layouts.LAYOUTS `sharded`):
    baseline (DDP)      (p + g + k) psi
    ZeRO-1 (P_os)       (p + g) psi + k psi / N
    ZeRO-2 (P_os+g)     p psi + (g + k) psi / N
    ZeRO-3 (P_os+g+p)   (p + g + k) psi / N          (FSDP FULL_SHARD: the same; HYBRID_SHARD: N = GPUs per node)
With tensor x pipeline parallelism a GPU holds the parameters of its stage's layers / tp
(plus the embedding / output layer, V h / tp, on the first and last stage); Megatron's
distributed optimizer shards k over dp.

Activations (Korthikanti et al. 2022, arXiv 2205.05198, Table 2), bytes per layer for
sequence s, micro-batch b, hidden h, heads a, tensor parallel t, 16-bit activations:
    none        s b h (10 + 24/t + 5 a s / (h t))      sequence parallel: s b h (34/t + 5 a s/(h t))
    selective   s b h (10 + 24/t)                       sequence parallel: s b h 34/t
    full        2 s b h                                  sequence parallel: 2 s b h / t
Kernels that keep no score matrix (FlashAttention) store as selective does without
recomputing. x 2 for fp32 activations. With 1F1B pipelining the first stage keeps
min(pp, m) micro-batches of its layers in flight (x (1 + (pp - 1)/(pp v)) interleaved);
the last stage keeps the fp32 logits, 4 s b V / t.
"""
from __future__ import annotations

import math

from . import shapes as SH
from . import workload as W
from .layouts import LAYOUTS


def model_states_bytes(psi, p, g, k, kind, dp, tp=1, pp=1, shard_size=None, distributed_optimizer=False,
                       sharded=None):
    """Model-state bytes per GPU; psi / (tp pp) parameters per GPU; shard_size: the group
    the layout shards over (default dp); sharded: the states split over it (default the
    layout's, + k with the distributed optimizer)."""
    psi = psi / (tp * pp)
    n = shard_size or dp
    if sharded is None:
        sharded = LAYOUTS[kind].sharded + ("k" if distributed_optimizer else "")
    return sum(v * psi / (n if name in sharded else 1) for name, v in (("p", p), ("g", g), ("k", k)))


def activation_bytes_per_layer(s, b, h, a, t=1, recompute="selective", act_bytes=2, sp=False, flash=False):
    if recompute == "full":
        f = 2.0 / t if sp else 2.0
    else:
        f = 34.0 / t if sp else 10.0 + 24.0 / t
        if recompute == "none" and not flash:
            f += 5.0 * a * s / (h * t)
    return s * b * h * f * act_bytes / 2.0


def layer_activation_bytes(w, b, tp=1, recompute="none", sp=False):
    """Bytes one transformer layer keeps for backward (micro-batch b); a shaped model
    (GQA, SwiGLU, MoE: shapes.py) by its own tensors, its largest layer (a MoE one if any)."""
    f = W.recompute_share(recompute)
    if 0 < f < 1:                             # partial: that share of the layers keeps its input only
        full, none = (layer_activation_bytes(w, b, tp, rc, sp) for rc in ("full", "none"))
        return f * full + (1 - f) * none
    if "ffn_hidden" in w:
        per_token = SH.activation_bytes_per_token(w, tp, sp or tp == 1, recompute, SH.moe_layers(w) > 0,
                                                  w["bytes"]["act"])
        return per_token * w["seq_len"] * b
    return activation_bytes_per_layer(w["seq_len"], b, w["hidden"], w["heads"], tp, recompute,
                                       w["bytes"]["act"], sp, w["attention"] == "flash")


def activation_bytes(w, b, tp=1, pp=1, microbatches=1, recompute="none", sp=False, virtual=1, first_layers=None):
    """The first pipeline stage's (first_layers layers; default ceil(L / pp)) activations with
    its micro-batches in flight, plus the last stage's logits."""
    if w["kind"] != "transformer":
        return w["act_bytes_per_sample"] * b * w["bytes"]["act"] / 2.0
    per_layer = layer_activation_bytes(w, b, tp, recompute, sp)
    in_flight = min(pp, microbatches) if pp > 1 else 1
    if pp > 1 and virtual > 1:
        in_flight *= 1 + (pp - 1) / (pp * virtual)
    logits = 4.0 * w["seq_len"] * b * w["vocab"] / tp
    layers = first_layers or math.ceil(w["layers"] / pp)
    return per_layer * layers * in_flight + logits
