"""Candidate layouts (shapes) and where their groups sit.

Data-parallel layouts over all N GPUs: every entry of layouts.DP_LAYOUTS (fsdp-hybrid only
across several nodes). Model-parallel layouts (layouts.MP_LAYOUTS, transformers only), one
table of shapes tp x cp x pp x dp with ep a column:
  tp  a divisor of the GPUs per node that divides the heads, KV heads and hidden size and
      fits inside one NVLink domain (never across PCIe or nodes);
  cp  context parallelism, powers of two while each GPU keeps >= MIN_CP_TOKENS of the sequence;
  pp  any size up to the layer count with tp x cp x pp dividing N (stages may be uneven);
  dp  = N / (tp cp pp);
  ep  expert parallelism (MoE models): a divisor of the experts and of tp x cp x dp / etp,
      the experts of a layer split over ep GPUs;
  etp expert tensor parallelism: each expert's matrices split over etp GPUs, tp (Megatron-
      Core's default) or 1 (--expert-tensor-parallel-size 1: whole experts, EP borrows the
      TP ranks; Megatron-Core's MoE parallel folding, torchtitan's ETP 1).
Rank order tp, cp, dp, pp (Megatron-Core's tp-cp-ep-dp-pp): tp innermost, cp at stride tp,
dp at stride tp cp, pp outermost; the experts' own order etp-ep-edp-pp: ep at stride etp,
the experts' data parallelism (edp = tp cp dp / (etp ep)) at stride etp ep. A group of
`size` ranks at `stride` spans n_intra GPUs on each of n_inter nodes.
Each shape is then configured (micro-batch, interleaving, memory switches) by predict.
"""
from __future__ import annotations

from . import shapes as SH
from .layouts import DP_LAYOUTS, LAYOUTS, MP_LAYOUTS, etp

MIN_CP_TOKENS = 4096      # below this per GPU, attention is too short to hide the ring's sends


def _divisors(n, upto):
    return [d for d in range(1, min(n, upto) + 1) if n % d == 0]


def cp_sizes(w, n):
    out, cp = [1], 2
    while w["seq_len"] // cp >= MIN_CP_TOKENS and n % cp == 0:
        out.append(cp)
        cp *= 2
    return out


def name(kind, tp, cp, pp, dp, ep, etp_size=None):
    """tpT-ppP-dpD (Megatron's), with -cpC / -epE where > 1 and -etpE where it is not tp;
    fsdp-tp: prefixed."""
    core = (f"tp{tp}" + (f"-cp{cp}" if cp > 1 else "") + f"-pp{pp}-dp{dp}" + (f"-ep{ep}" if ep > 1 else "")
            + (f"-etp{etp_size}" if etp_size and etp_size != tp else ""))
    return core if kind == "megatron" else f"{kind}:{core}"


def candidates(w, cluster):
    N = cluster["world_size"]
    out = [dict(layout=k, kind=k, tp=1, cp=1, pp=1, dp=N, ep=1) for k in DP_LAYOUTS
           if cluster["nodes"] > 1 or not LAYOUTS[k].across_nodes_only]
    if w["kind"] != "transformer":
        return out
    max_tp = cluster["nvlink_domain"] if cluster["nvlink"] else 1
    experts = w.get("experts") or 1
    for tp in _divisors(cluster["gpus_per_node"], max_tp):
        if w["heads"] % tp or w["hidden"] % tp or w.get("kv_heads", tp) % tp:
            continue
        for cp in cp_sizes(w, N // tp):
            for pp in _divisors(N // (tp * cp), w["layers"]):
                dp = N // (tp * cp * pp)
                moe = SH.moe_layers(w) > 0
                for e_tp, ep in ((e, ep) for e in ([tp, 1] if moe and tp > 1 else [tp])
                                 for ep in (_divisors(experts, tp * cp * dp // e) if moe else [1])):
                    if (tp * cp * dp // e_tp) % ep:
                        continue
                    for kind in MP_LAYOUTS:
                        if kind == "megatron" and (tp, cp, pp, ep) == (1, 1, 1, 1):
                            continue          # that is ddp
                        if kind == "fsdp-tp" and (tp, cp, ep) == (1, 1, 1):
                            continue          # fsdp, or pipelines of it: Megatron's ground
                        out.append(dict(layout=name(kind, tp, cp, pp, dp, ep, e_tp), kind=kind, tp=tp, cp=cp,
                                        pp=pp, dp=dp, ep=ep, **({"etp": e_tp} if moe else {})))
    return out


def expert_dp(c):
    """The experts' data-parallel size: the stage's tp x cp x dp GPUs over etp x ep."""
    return max(1, c["tp"] * c.get("cp", 1) * c["dp"] // (etp(c) * c.get("ep", 1)))


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
    """Placement of the tp, cp, dp, ep and etp groups, the gradient groups of dense and expert
    weights (dp x cp at stride tp; edp at stride etp ep), the sharding group of a hybrid
    layout, the replicas across nodes, and the scope of pipeline sends of candidate c."""
    tp, pp, dp, G = c["tp"], c["pp"], c["dp"], gpus_per_node
    cp, ep, e_tp = c.get("cp", 1), c.get("ep", 1), etp(c)
    pp_scope = "intra-node" if tp * cp * dp * pp <= G else "inter-node"
    shard = min(G, dp)
    return {"tp": placement(tp, 1, G), "cp": placement(cp, tp, G), "dp": placement(dp, tp * cp, G),
            "ep": placement(ep, e_tp, G), "etp": placement(e_tp, 1, G), "grad": placement(dp * cp, tp, G),
            "expert_grad": placement(expert_dp(c), e_tp * ep, G), "pp_scope": pp_scope,
            "node": placement(shard, tp, G), "replicas": placement(max(1, dp // shard), G, G)}
