"""Candidate layouts (shapes) and where their groups sit.

Data-parallel layouts over all N GPUs: every entry of layouts.DP_LAYOUTS (fsdp-hybrid only
across several nodes). Megatron-style tp x pp x dp layouts (transformers only): tp any
divisor of the GPUs per node that divides the heads and fits inside one NVLink domain
(never across PCIe or nodes); pp any size up to the layer count with tp x pp dividing N
(stages may be uneven, as Megatron-LM's --decoder-first-pipeline-num-layers allows);
dp = N / (tp pp). Rank order: tp innermost, then dp, then pp (Megatron's), so a group of
`size` ranks at `stride` spans n_intra GPUs on each of n_inter nodes.
Each shape is then configured (micro-batch, interleaving, memory switches) by predict.
"""
from __future__ import annotations

from .layouts import DP_LAYOUTS, LAYOUTS


def _divisors(n, upto):
    return [d for d in range(1, min(n, upto) + 1) if n % d == 0]


def candidates(w, cluster):
    N = cluster["world_size"]
    out = [{"layout": k, "kind": k, "tp": 1, "pp": 1, "dp": N} for k in DP_LAYOUTS
           if cluster["nodes"] > 1 or not LAYOUTS[k].across_nodes_only]
    if w["kind"] != "transformer":
        return out
    max_tp = cluster["nvlink_domain"] if cluster["nvlink"] else 1
    for tp in _divisors(cluster["gpus_per_node"], max_tp):
        if w["heads"] % tp or w["hidden"] % tp or w.get("kv_heads", tp) % tp:
            continue
        for pp in _divisors(N // tp, w["layers"]):
            if (tp, pp) == (1, 1):
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
    """Placement of the tp, dp groups, the sharding group of a hybrid layout, the replicas
    across nodes, and the scope of pipeline sends of candidate c."""
    tp, pp, dp, G = c["tp"], c["pp"], c["dp"], gpus_per_node
    pp_scope = "intra-node" if tp * dp * pp <= G else "inter-node"
    shard = min(G, dp)
    return {"tp": placement(tp, 1, G), "dp": placement(dp, tp, G), "pp_scope": pp_scope,
            "node": placement(shard, tp, G), "replicas": placement(max(1, dp // shard), G, G)}
