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


def layer_activation_bytes(w, b, tp=1, recompute="none", sp=False, etp=None):
    """Bytes one transformer layer keeps for backward (micro-batch b); a shaped model
    (GQA, SwiGLU, MoE: shapes.py) by its own tensors, its largest layer (a MoE one if any);
    etp: the experts' tensor parallelism (tp when not given)."""
    f = W.recompute_share(recompute)
    if 0 < f < 1:                             # partial: that share of the layers keeps its input only
        full, none = (layer_activation_bytes(w, b, tp, rc, sp, etp) for rc in ("full", "none"))
        return f * full + (1 - f) * none
    if "ffn_hidden" in w:
        per_token = SH.activation_bytes_per_token(w, tp, sp or tp == 1, recompute, SH.moe_layers(w) > 0,
                                                  w["bytes"]["act"], w["precision"] == "fp8", etp or tp)
        return per_token * w["seq_len"] * b
    return activation_bytes_per_layer(w["seq_len"], b, w["hidden"], w["heads"], tp, recompute,
                                       w["bytes"]["act"], sp, w["attention"] == "flash")


def in_flight_layers(pp, v, m, chunk_layers, group=None, rank=0):
    """Peak layer-micro-batches whose activations the first pipeline rank holds: Megatron-Core's
    1F1B schedule (schedules.py, forward_backward_pipelining_with/without_interleaving)
    replayed on rank 0. Without interleaving rank 0 runs min(pp - 1, m) warm-up forwards,
    then one forward and one backward in turn: min(pp, m) micro-batches of its layers. With v
    chunks it runs (pp - 1) x 2 + (v - 1) x N warm-up chunk forwards (N the micro-batch group,
    --microbatch-group-size-per-virtual-pipeline-stage, default pp; the Llama 3 schedule's
    flexible N), forward chunk k = (i // N) % v, backward chunk v - 1 - (i // N) % v, and
    never more than its m x v chunk passes: what it holds is the sum of the layers of the
    chunks forwarded and not yet backwarded. chunk_layers: the layers of rank 0's v chunks
    (the first may hold fewer: the embedding counts as a layer, Llama 3 section 3.3.2).
    Korthikanti et al.'s L (1 + (pp - 1) / (pp v)) is this count for even chunks and m > pp.
    rank r > 0 runs fewer warm-up passes: min(pp - r, m) micro-batches, (pp - r - 1) x 2 + (v - 1) x N
    chunk forwards."""
    if pp <= 1:
        return float(sum(chunk_layers))
    if v <= 1:
        return min(pp - rank, m) * float(sum(chunk_layers))
    n = group or pp
    total = m * v
    chunk = lambda i: (i // n) % v           # noqa: E731  (the i-th forward's / backward's chunk)
    warm = min(total, (pp - rank - 1) * 2 + (v - 1) * n)
    held = sum(chunk_layers[chunk(i)] for i in range(warm))
    peak, f = held, warm
    for j in range(total):                    # steady state: one forward (if any left), one backward
        if f < total:
            held += chunk_layers[chunk(f)]
            f += 1
        peak = max(peak, held)
        held -= chunk_layers[v - 1 - chunk(j)]
    return float(peak)


def stage_chunks(first, middle, v):
    """Layers of the first rank's v chunks: middle / v each, the first stage's deficit taken
    from chunk 0 (the embedding's chunk: Megatron-Core's --account-for-embedding-in-pipeline-split,
    Llama 3's 'the first model chunk on the first stage has only the embedding'); a first stage
    with more layers than the others spreads them evenly."""
    if v <= 1:
        return [float(first)]
    if first < middle and middle % v == 0:
        per = middle // v
        out = [float(per)] * v
        deficit = middle - first
        for k in range(v):
            take = min(out[k], deficit)
            out[k] -= take
            deficit -= take
        return out
    return [first / v] * v


def activation_bytes(w, b, tp=1, pp=1, microbatches=1, recompute="none", sp=False, virtual=1, first_layers=None,
                     middle_layers=None, etp=None):
    """The first pipeline stage's (first_layers layers; default ceil(L / pp)) activations with
    its micro-batches in flight (in_flight_layers), plus the last stage's logits."""
    if w["kind"] != "transformer":
        return w["act_bytes_per_sample"] * b * w["bytes"]["act"] / 2.0
    per_layer = layer_activation_bytes(w, b, tp, recompute, sp, etp)
    layers = first_layers or math.ceil(w["layers"] / pp)
    n_mtp = w.get("mtp", 0) if pp <= 1 else 0  # without a pipeline the MTP modules' layers and logits too
    layers += n_mtp
    chunks = stage_chunks(layers, middle_layers or layers, virtual if pp > 1 else 1)
    logits = (1 + n_mtp) * 4.0 * w["seq_len"] * b * w["vocab"] / tp
    return per_layer * in_flight_layers(pp, virtual, max(1, microbatches), chunks) + logits
