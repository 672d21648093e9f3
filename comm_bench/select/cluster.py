"""Cluster shape as the selection uses it: nodes, GPUs per node, GPU memory and peak
compute, NVLink domain, and the link class of each scope, from the results' topology
snapshots (hosts[].topology, ranks[].devices), overridden by flags. Every figure carries
where it came from ("topology", "ranks", "flag", "assumed")."""
from __future__ import annotations

import os

from ..errors import UsageError
from ..topology import links as L
from ..topology.linkmap import LinkMap

from . import gpus as GP


def _gpus(doc):
    out = []
    for h in doc.get("hosts") or []:
        topo = h.get("topology") if isinstance(h, dict) else None
        if isinstance(topo, dict):
            out.append((h.get("host"), topo.get("gpus") or [], topo.get("nics") or []))
    return out


def _nvlink_gbs(g):
    nv = g.get("nvlink") or {}
    if nv.get("gbs"):
        return float(nv["gbs"])
    v, n = nv.get("version"), nv.get("links")
    return L.nvlink_gbs(v, n) or L.nvlink_gbs(L.NVML_NVLINK_GENERATION.get(v), n)


def describe(docs, nodes=None, gpus_per_node=None, gpu_mem_gb=None, gpu_model=None):
    """The cluster dict: measured shape from the documents, flags over it."""
    c = {"sources": {}}
    n_nodes, rpn, gpn, mems, names, nvl, domain, pcie_rate = 1, 1, 0, [], [], [], [], []
    rdma_nics, eth_rates, inter_kinds = [], [], {}
    for path, doc in docs:
        lm = LinkMap(doc)
        per = {}
        for r in lm.ranks:
            per.setdefault(lm.node(r), []).append(r)
        n_nodes = max(n_nodes, len(per) or 1)
        rpn = max([rpn] + [len(v) for v in per.values()])
        for host, gpus, nics in _gpus(doc):
            gpn = max(gpn, len(gpus))
            for g in gpus:
                if g.get("memory_total"):
                    mems.append(g["memory_total"] / 1e9)
                names.append(g.get("name") or "")
                nv = g.get("nvlink") or {}
                if nv.get("links"):
                    nvl.append(_nvlink_gbs(g))
                    domain.append(len(gpus) if nv.get("to_nvswitch") else 1 + len(nv.get("peers") or {}))
                else:
                    domain.append(1)
                pcie_rate.append((g.get("pcie") or {}).get("cur_gbs"))
            rd = [n for n in nics if n.get("kind") in ("ib", "roce") and n.get("state", "up") != "down"]
            rdma_nics.append(len(rd))
            for n in rd:                # (kind, rate) -> how many NICs of it
                key = (n["kind"], n.get("rate_gbs") or 0)
                inter_kinds[key] = inter_kinds.get(key, 0) + 1
            for n in nics:
                if n.get("kind") == "ethernet" and not n.get("virtual") and n.get("rate_gbs"):
                    eth_rates.append(n["rate_gbs"])
        for r in lm.ranks.values():
            gpu = (r.get("devices") or {}).get("gpu")
            if isinstance(gpu, dict) and gpu.get("total_mem") and not mems:
                mems.append(gpu["total_mem"] / 1e9)
    c["nodes"], c["sources"]["nodes"] = (nodes, "flag") if nodes else (n_nodes, "results")
    if gpus_per_node:
        c["gpus_per_node"], c["sources"]["gpus_per_node"] = gpus_per_node, "flag"
    elif gpn:
        c["gpus_per_node"], c["sources"]["gpus_per_node"] = gpn, "topology"
    else:
        c["gpus_per_node"] = rpn
        c["sources"]["gpus_per_node"] = "assumed (no GPU in the topology: one per rank)"
    c["world_size"] = c["nodes"] * c["gpus_per_node"]
    if gpu_mem_gb:
        c["gpu_mem_gb"], c["sources"]["gpu_mem_gb"] = gpu_mem_gb, "flag"
    elif gpu_model:
        entry, key = GP.lookup(gpu_model)
        if entry is None:
            raise UsageError(f"unknown --gpu {gpu_model!r} (known: {', '.join(GP.GPUS)})")
        c["gpu_mem_gb"], c["sources"]["gpu_mem_gb"] = entry["mem_gb"], f"--gpu {key} (data sheet)"
    elif mems:
        c["gpu_mem_gb"], c["sources"]["gpu_mem_gb"] = round(min(mems), 3), "topology (NVML memory_total)"
    else:
        c["gpu_mem_gb"] = GP.ASSUMED["mem_gb"]
        c["sources"]["gpu_mem_gb"] = "assumed (no GPU memory in the results: give --gpu or --gpu-mem)"
    c["gpu_name"] = gpu_model or (names[0] if names else None)
    if gpu_model and GP.lookup(gpu_model)[0] is None:
        raise UsageError(f"unknown --gpu {gpu_model!r} (known: {', '.join(GP.GPUS)})")
    full = domain and min(domain) >= 2 and all(nvl)
    c["nvlink"] = bool(full)
    c["nvlink_domain"] = min(min(domain), c["gpus_per_node"]) if full else 1
    if c["nvlink"]:
        c["intra_class"], c["intra_theoretical_gbs"] = "nvlink", min(nvl)
    else:
        rates = [r for r in pcie_rate if r]
        c["intra_class"], c["intra_theoretical_gbs"] = "pcie", (min(rates) if rates else None)
    c["nics_per_node"] = max(rdma_nics) if rdma_nics and max(rdma_nics) else 1
    if inter_kinds:
        # the fastest port, the most common kind among equals (a DGX: 8 IB compute NICs
        # beside 4 RoCE storage ports); then the name, so the choice never depends on order
        kind, rate = max(inter_kinds, key=lambda kr: (kr[1], inter_kinds[kr], kr[0]))
        c["inter_class"], c["inter_theoretical_gbs"] = kind, rate or None
    elif eth_rates:
        c["inter_class"], c["inter_theoretical_gbs"] = "ethernet", max(eth_rates)
    else:
        c["inter_class"], c["inter_theoretical_gbs"] = None, None
    c["from"] = [os.path.basename(p) for p, _ in docs]
    return c


def parse_mem_gb(text):
    """'80G', '80GB', '141GiB', '80' -> GB (1 GB = 1e9 B)."""
    if text is None:
        return None
    s = str(text).strip().upper().replace(" ", "")
    mult = 1.0
    for suf, m in (("GIB", 2 ** 30 / 1e9), ("GB", 1.0), ("G", 1.0), ("TB", 1e3), ("T", 1e3)):
        if s.endswith(suf):
            s, mult = s[: -len(suf)], m
            break
    try:
        v = float(s) * mult
    except ValueError:
        raise UsageError(f"--gpu-mem: bad size {text!r} (use e.g. 80G, 141GiB)") from None
    if v <= 0:
        raise UsageError(f"--gpu-mem must be > 0 (got {text!r})")
    return v
