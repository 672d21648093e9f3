"""Candidate layouts and where their groups sit.

Data-parallel layouts over all N GPUs: ddp, zero-1, zero-2, zero-3, fsdp. Megatron-style
tp x pp x dp layouts (transformers only): tp a power of two that divides the heads and
fits inside one NVLink domain (never across PCIe or nodes), pp a power of two up to the
layer count, tp x pp x dp = N. Rank order: tp innermost, then dp, then pp (Megatron's),
so a group of `size` ranks at `stride` spans n_intra GPUs on each of n_inter nodes.
"""
from __future__ import annotations

DP_LAYOUTS = ("ddp", "zero-1", "zero-2", "zero-3", "fsdp")


def _pow2_upto(n):
    v = 1
    while v <= n:
        yield v
        v *= 2


def candidates(w, cluster):
    N = cluster["world_size"]
    out = [{"layout": k, "kind": k, "tp": 1, "pp": 1, "dp": N} for k in DP_LAYOUTS]
    if w["kind"] != "transformer":
        return out
    max_tp = cluster["nvlink_domain"] if cluster["nvlink"] else 1
    for tp in _pow2_upto(max_tp):
        if w["heads"] % tp or w["hidden"] % tp:
            continue
        for pp in _pow2_upto(w["layers"]):
            if (tp, pp) == (1, 1) or N % (tp * pp):
                continue
            dp = N // (tp * pp)
            out.append({"layout": f"tp{tp}-pp{pp}-dp{dp}", "kind": "megatron", "tp": tp, "pp": pp, "dp": dp})
    return out


def placement(size, stride, gpus_per_node):
    """(n_intra, n_inter) of a group of `size` ranks `stride` apart."""
    G = gpus_per_node
    if size <= 1:
        return 1, 1
    if size * stride <= G:
        return size, 1
    if stride >= G:
        return 1, size
    n_intra = max(1, G // stride)
    return n_intra, max(1, size // n_intra)


def groups(c, gpus_per_node):
    """Placement of the tp, dp groups and the scope of pipeline sends of candidate c."""
    tp, pp, dp, G = c["tp"], c["pp"], c["dp"], gpus_per_node
    pp_scope = "intra-node" if tp * dp * pp <= G else "inter-node"
    return {"tp": placement(tp, 1, G), "dp": placement(dp, tp, G), "pp_scope": pp_scope}
