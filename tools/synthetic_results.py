"""Synthetic results documents in the real schema (README "Results format"), for planning
clusters one does not have and for the selection tests: hosts with recorded topology
snapshots (topology/fixtures/dgx-h100: 8 x H100, NVSwitch, 8 x 400G IB; or that node
turned into another GPU and NIC generation, `node_topology`), records timed by a known
alpha-beta model. Every document says so: "synthetic" in its command and options."""
from __future__ import annotations

import copy
import json

from comm_bench.select.collectives import terms
from comm_bench.topology import fixture_root, snapshot

_DGX = None


def dgx_topology(host, rdma=True, nvlink=True):
    """The DGX H100 fixture's snapshot, renamed; without RDMA NICs or NVLink on request."""
    global _DGX
    if _DGX is None:
        _DGX = snapshot(fixture_root("dgx-h100"))
    t = copy.deepcopy(_DGX)
    t["host"] = host
    if not rdma:
        t["nics"] = [n for n in t["nics"] if n.get("kind") not in ("ib", "roce")]
    if not nvlink:
        for g in t["gpus"]:
            g["nvlink"] = {"links": 0, "version": None, "gbs": None, "to_nvswitch": 0, "peers": {}}
            g["nvlinks"] = []
    return t


def node_topology(host, gpu_name, gpu_mem_bytes, nvlink_version, nvlink_links, nvlink_gbs, nic_gbs, nics=8,
                  nic_kind="ib", gpus=8):
    """The DGX H100 fixture as another node: its first `gpus` GPUs (a 4-GPU board: gpus=4)
    renamed with their memory and NVLink, `nics` compute NICs of `nic_kind` at nic_gbs GB/s
    (the rest dropped); nic_kind "ethernet" keeps one port at nic_gbs and no RDMA NIC."""
    t = dgx_topology(host, rdma=nic_kind != "ethernet")
    t["gpus"] = t["gpus"][:gpus]
    for g in t["gpus"]:
        g["name"], g["memory_total"] = gpu_name, gpu_mem_bytes
        g["nvlink"].update(links=nvlink_links, version=nvlink_version, gbs=nvlink_gbs, to_nvswitch=nvlink_links)
    if nic_kind == "ethernet":
        eth = [n for n in t["nics"] if n.get("kind") == "ethernet" and not n.get("virtual")][:1]
        for n in eth:
            n["rate_gbs"] = nic_gbs
        t["nics"] = eth
    else:
        rdma = [n for n in t["nics"] if n.get("kind") in ("ib", "roce")][:nics]
        for n in rdma:
            n["kind"], n["rate_gbs"] = nic_kind, nic_gbs
        t["nics"] = rdma
    return t


def record(op, size, seconds, n, transport="nccl", pattern="collective", src=None, dst=None, hosts=None):
    ka, kb = terms(op if op != "sendrecv" else "p2p", n)
    t_us = seconds * 1e6
    algbw = size / seconds / 1e9
    lat = {k: t_us for k in ("min", "max", "avg", "median", "p99", "p999")}
    lat["stdev"] = 0.0
    rec = {"transport": transport, "op": op, "mode": "bw", "pattern": pattern, "size": int(size),
           "count": int(size // 4), "dtype": "float32", "redop": "sum" if "reduce" in op else None, "root": None,
           "iters": 20, "warmup": 5, "time_us": t_us, "algbw": algbw,
           "busbw": algbw * (kb if op not in ("sendrecv", "p2p") else 1.0), "bw_peak": algbw,
           "msg_rate_mpps": 1.0 / t_us, "latency_us": lat, "wrong": 0, "extra": {}}
    if src is not None:  # a collective record has no src/dst at all, as the sweep writes it
        rec.update(src=src, dst=dst, src_host=hosts[src], dst_host=hosts[dst], src_device=None, dst_device=None, round=0)
    return rec


def document(transport, pattern, hosts, ranks_per_host, records, topology=dgx_topology):
    """A results document: ranks spread over `hosts`, `ranks_per_host` each, one GPU per rank."""
    ranks, host_entries, rank_host = [], [], []
    for hi, h in enumerate(hosts):
        ids = list(range(hi * ranks_per_host, (hi + 1) * ranks_per_host))
        host_entries.append({"host": h, "ranks": ids, "topology": topology(h)})
        for lr, r in enumerate(ids):
            ranks.append({"rank": r, "host": h, "local_rank": lr, "pid": 1000 + r, "addr": f"10.0.{hi}.1",
                          "devices": {"device": f"cuda:{lr}"}})
            rank_host.append(h)
    return {"schema_version": 1, "tool": "comm-bench", "version": "0.1.0",
            "command": ["synthetic_results.py", "(not measured)"],
            "started": "2026-11-30T00:00:00Z", "finished": "2026-11-30T00:01:00Z", "status": "ok",
            "failure": None, "transport": transport, "world_size": len(ranks), "pattern": pattern,
            "options": {"synthetic": True},
            "hosts": host_entries, "ranks": ranks, "environment": {}, "results": records}


SIZES = [2 ** k for k in range(10, 31, 2)]          # 1 KiB .. 1 GiB


def collective_doc(hosts, gpus, alpha, beta, ops=("all_reduce", "all_gather", "reduce_scatter"),
                   topology=dgx_topology):
    """An `-t nccl --op ...` run over len(hosts) x gpus ranks, timed by the ring model."""
    n = len(hosts) * gpus
    recs = []
    for op in ops:
        ka, kb = terms(op, n)
        for S in SIZES:
            recs.append(record(op, S, ka * alpha + kb * S / beta, n))
    return document("nccl", "collective", hosts, gpus, recs, topology)


def pairwise_doc(hosts, alpha, beta, transport="tcp", topology=dgx_topology):
    """A `--pattern pairwise` run with one rank per host: t = alpha + S / beta per pair."""
    recs = []
    for s in range(len(hosts)):
        for d in range(len(hosts)):
            if s != d:
                for S in SIZES:
                    recs.append(record("sendrecv", S, alpha + S / beta, 2, transport, "pairwise", s, d, hosts))
    return document(transport, "pairwise", hosts, 1, recs, topology)


def write(path, doc):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return str(path)
