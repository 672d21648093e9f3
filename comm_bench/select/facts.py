"""The facts rules test: one flat name per figure (docs/selection.md lists them)."""
from __future__ import annotations

from ..errors import UsageError
from .layouts import DP_LAYOUTS

PER_LAYOUT = ("fits", "efficiency", "step_s", "comm_s", "exposed_comm_s", "comm_fraction", "memory_gb",
              "model_states_gb", "slower_pct", "vs_fastest")
GLOBAL = ("any_fits", "best_layout", "efficiency_best", "fits_megatron", "efficiency_megatron",
          "best_megatron", "slower_pct_megatron", "fits_fsdptp", "efficiency_fsdptp", "best_fsdptp",
          "slower_pct_fsdptp", "vs_fastest_megatron", "vs_fastest_fsdptp", "fastest_layout", "slower_pct_best",
          "active_params_b", "moe", "intra_gbs", "intra_latency_us", "intra_source", "inter_gbs",
          "inter_latency_us", "inter_source", "nvlink", "nvlink_domain", "nodes", "gpus_per_node",
          "world_size", "global_batch", "gpu_mem_gb", "ecosystem", "elastic", "params", "params_b", "precision",
          "model", "transformer")


def key(layout):
    return layout.replace("-", "")


NAMES = frozenset(GLOBAL) | {f"{f}_{key(l)}" for l in DP_LAYOUTS for f in PER_LAYOUT}


TIE = 1e-3      # candidates within 0.1% of the fastest are a tie: the earlier, simpler layout wins


def best(cands, kind=None):
    ok = [c for c in cands if c["feasible"] and (kind is None or c["kind"] == kind)]
    if not ok:
        return None
    top = max(c["efficiency"] for c in ok)
    return next(c for c in ok if c["efficiency"] >= top * (1 - TIE))


def slower_pct(c, top):
    """How much slower (%) candidate c is than the fastest feasible one (None: not feasible)."""
    return 100.0 * (top["efficiency"] / c["efficiency"] - 1) if c and c.get("efficiency") and top else None


def vs_fastest(c, top, none="no candidate"):
    """slower_pct in words, for rationales: '3.1% slower than the fastest', or why c is not a
    choice (its infeasibility reason; `none` where there is no such candidate). A missing
    figure never prints as 'n/a%'."""
    pct = slower_pct(c, top)
    if pct is not None:
        return f"{pct:.1f}% slower than the fastest"
    if c and c.get("reason"):
        return f"not feasible: {c['reason']}"
    return none


def build(cands, cluster, w, lm, ecosystem, elastic):
    f = {}
    by = {c["layout"]: c for c in cands}
    for l in DP_LAYOUTS:
        c = by.get(l, {"feasible": False})       # fsdp-hybrid exists across nodes only
        k = key(l)
        f[f"fits_{k}"] = bool(c["feasible"])
        for name in ("efficiency", "step_s", "comm_s", "exposed_comm_s", "memory_gb", "model_states_gb"):
            f[f"{name}_{k}"] = c.get(name)
        f[f"comm_fraction_{k}"] = (c["exposed_comm_s"] / c["step_s"]) if c.get("step_s") else None
    ok = [c for c in cands if c["feasible"]]
    top = max(ok, key=lambda c: c["efficiency"]) if ok else None
    for l in DP_LAYOUTS:
        f[f"slower_pct_{key(l)}"] = slower_pct(by.get(l), top)
        f[f"vs_fastest_{key(l)}"] = vs_fastest(by.get(l), top, "not a candidate on this cluster")
    b, bm, bt = best(cands), best(cands, "megatron"), best(cands, "fsdp-tp")
    f.update(any_fits=b is not None, best_layout=b["layout"] if b else None,
             efficiency_best=b["efficiency"] if b else None, fits_megatron=bm is not None,
             efficiency_megatron=bm["efficiency"] if bm else None, best_megatron=bm["layout"] if bm else None,
             slower_pct_megatron=slower_pct(bm, top), fits_fsdptp=bt is not None,
             efficiency_fsdptp=bt["efficiency"] if bt else None, best_fsdptp=bt["layout"] if bt else None,
             slower_pct_fsdptp=slower_pct(bt, top),
             vs_fastest_megatron=f"{bm['layout']} ({vs_fastest(bm, top)})" if bm else "none is feasible",
             vs_fastest_fsdptp=f"{bt['layout']} ({vs_fastest(bt, top)})" if bt else "none is feasible",
             fastest_layout=top["layout"] if top else None,
             slower_pct_best=slower_pct(b, top), active_params_b=w.get("active_params", w["params"]) / 1e9,
             moe=bool(w.get("experts")))
    for scope, pre in (("intra-node", "intra"), ("inter-node", "inter")):
        needed = cluster["gpus_per_node"] > 1 if pre == "intra" else cluster["nodes"] > 1
        lk = None
        if needed:
            try:
                lk = lm.link(scope)
            except UsageError:
                lk = None
        f[f"{pre}_gbs"] = lk.beta * lk.share / 1e9 if lk else None
        f[f"{pre}_latency_us"] = lk.alpha * 1e6 if lk else None
        f[f"{pre}_source"] = lk.source if lk else None
    f.update(nvlink=cluster["nvlink"], nvlink_domain=cluster["nvlink_domain"], nodes=cluster["nodes"],
             gpus_per_node=cluster["gpus_per_node"], world_size=cluster["world_size"],
             global_batch=w["global_batch"] or w["micro_batch"] * cluster["world_size"],
             gpu_mem_gb=cluster["gpu_mem_gb"], ecosystem=ecosystem, elastic=bool(elastic),
             params=w["params"], params_b=w["params"] / 1e9, precision=w["precision"], model=w["name"],
             transformer=w["kind"] == "transformer")
    return f
