"""snapshot(): this node's topology as one JSON-serialisable dict, quickly and without
raising (the sweep stores it per host in results "hosts[].topology").

    {"schema": 1, "host", "root", "source", "elapsed_s",
     "numa": [{node, cpulist, ncpus, mem_total_kb, distance}],
     "gpus": [{label, index, name, uuid, pci, numa_node, local_cpulist, memory_total,
               pcie: {cur_gen, max_gen, cur_width, max_width, cur_gbs, max_gbs},
               nvlink: {links, version, gbs, peers: {label: links}, reason}, pci_chain}],
     "nics": [{label, name, kind: ib|roce|ethernet|virtual, pci, netdev, numa_node,
               state, rate, rate_gbs, link_layer, ports, speed_mbps, addrs, pcie, pci_chain}],
     "bridges": [{bdf, port_type, link, acs}]  (bridges above GPUs and NICs),
     "matrix": {labels, kinds, cells, classes, rates_gbs, legend},
     "nvml": {available, reason, driver_version, cuda_driver_version},
     "warnings": [str], "errors": [str]}
"""
import json
import os
import socket
import textwrap
import time

from ..system.netutil import iface_addrs
from .. import links as L
from . import matrix as M
from .nvml_snapshot import read_nvml
from ..system.sysfs import read_infiniband, read_net, read_numa, read_pci

SCHEMA = 1


def _meta(root):
    try:
        with open(os.path.join(root, "meta.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _pcie_info(dev):
    link = (dev or {}).get("link") or {}
    return {"cur_gen": link.get("cur_gen"), "max_gen": link.get("max_gen"),
            "cur_width": link.get("cur_width"), "max_width": link.get("max_width"),
            "cur_gbs": L.pcie_gbs(link.get("cur_gen"), link.get("cur_width")),
            "max_gbs": L.pcie_gbs(link.get("max_gen"), link.get("max_width"))} if link else None


def snapshot(root="/", nvml=None, host=None, live=None):
    """root: sysfs root ("/" live, or a fixture folder). nvml: None = query NVML when
    live, else root/nvml.json if present; a dict or path = that recorded document;
    False = skip NVML. Never raises; problems land in "errors"."""
    t0 = time.monotonic()
    live = (os.path.abspath(root) == "/") if live is None else live
    snap = {"schema": SCHEMA, "host": host or (socket.gethostname() if live else _meta(root).get("host")),
            "root": os.path.abspath(root), "source": "live" if live else "fixture",
            "numa": [], "gpus": [], "nics": [], "bridges": [], "matrix": None,
            "nvml": None, "warnings": [], "errors": []}
    try:
        _fill(snap, root, nvml, live)
    except Exception as e:  # noqa: BLE001 - never raise: a broken sysfs must not stop a sweep
        snap["errors"].append(f"topology discovery failed: {type(e).__name__}: {e}")
    snap["elapsed_s"] = round(time.monotonic() - t0, 4)
    return snap


def _fill(snap, root, nvml, live):
    pci = read_pci(root)
    snap["numa"] = read_numa(root)
    if nvml is None:
        fx = os.path.join(root, "nvml.json")
        nvml = fx if (not live and os.path.exists(fx)) else (None if live else False)
    doc = ({"available": False, "reason": "NVML not read", "gpus": []} if nvml is False
           else read_nvml(nvml if nvml is not None else None))
    snap["nvml"] = {k: doc.get(k) for k in ("available", "reason", "driver_version",
                                            "cuda_driver_version", "nvml_version")}
    # GPUs: NVML order when available, else NVIDIA/AMD display functions from PCI
    gpus = []
    if doc.get("gpus"):
        for g in doc["gpus"]:
            dev = pci.get(g.get("pci"))
            pcie = _pcie_info(dev) or {}
            nv = g.get("pcie") or {}
            for k in ("cur_gen", "max_gen", "cur_width", "max_width"):
                if pcie.get(k) is None and nv.get(k) is not None:
                    pcie[k] = nv[k]
            pcie["cur_gbs"] = L.pcie_gbs(pcie.get("cur_gen"), pcie.get("cur_width"))
            pcie["max_gbs"] = L.pcie_gbs(pcie.get("max_gen"), pcie.get("max_width"))
            numa = g.get("numa_node") if g.get("numa_node") is not None else (dev or {}).get("numa_node")
            gpus.append({"label": f"GPU{g.get('index', len(gpus))}", "index": g.get("index", len(gpus)),
                         "name": g.get("name"), "uuid": g.get("uuid"), "pci": g.get("pci"),
                         "numa_node": numa, "local_cpulist": (dev or {}).get("local_cpulist"),
                         "memory_total": g.get("memory_total"), "pcie": pcie,
                         "nvlinks": g.get("nvlinks") or [], "nvlink_reason": g.get("nvlink_reason"),
                         "pci_chain": (dev or {}).get("chain")})
    else:
        for bdf in sorted(b for b, d in pci.items() if d["kind"] == "gpu"):
            dev = pci[bdf]
            gpus.append({"label": f"GPU{len(gpus)}", "index": len(gpus), "name": dev.get("vendor_name"),
                         "uuid": None, "pci": bdf, "numa_node": dev["numa_node"],
                         "local_cpulist": dev["local_cpulist"], "memory_total": None,
                         "pcie": _pcie_info(dev), "nvlinks": [], "pci_chain": dev["chain"]})
    # NICs: RDMA devices, then physical Ethernet ports that no RDMA device covers
    addrs = iface_addrs() if live else {}
    nets = {n["name"]: n for n in read_net(root, pci)}
    nics, covered = [], set()
    for ib in read_infiniband(root, pci, live=live):
        port = next((p for p in ib["ports"] if (p.get("state") or "").upper() == "ACTIVE"),
                    ib["ports"][0] if ib["ports"] else {})
        ll = (port.get("link_layer") or "").lower()
        kind = "roce" if ll == "ethernet" else "ib"
        covered.update(ib["netdevs"])
        nd = ib["netdev"]
        dev = pci.get(ib["pci"])
        nics.append({"label": f"NIC{len(nics)}", "name": ib["name"], "kind": kind, "pci": ib["pci"],
                     "netdev": nd, "numa_node": ib["numa_node"], "state": port.get("state"),
                     "phys_state": port.get("phys_state"), "rate": port.get("rate"),
                     "rate_gbs": L.ib_gbs(port.get("rate_gbps")), "link_layer": port.get("link_layer"),
                     "ports": ib["ports"], "fw_ver": ib["fw_ver"], "read_with": ib["read_with"],
                     "speed_mbps": (nets.get(nd) or {}).get("speed_mbps"),
                     "local_cpulist": (dev or {}).get("local_cpulist"),
                     "addrs": addrs.get(nd, []) if nd else [], "pcie": _pcie_info(dev),
                     "pci_chain": (dev or {}).get("chain"), "virtual": ib["pci"] is None})
    for name, n in sorted(nets.items()):
        if name in covered or n["type"] == "loopback":
            continue
        dev = pci.get(n["pci"])
        nics.append({"label": f"NIC{len(nics)}", "name": name, "kind": "virtual" if n["virtual"] else "ethernet",
                     "pci": n["pci"], "netdev": name, "numa_node": (dev or {}).get("numa_node"),
                     "state": n["operstate"], "rate": f"{n['speed_mbps']} Mb/s" if n["speed_mbps"] else None,
                     "rate_gbs": None if n["virtual"] else L.eth_gbs(n["speed_mbps"]),
                     "speed_mbps": n["speed_mbps"], "mtu": n["mtu"], "driver": n["driver"],
                     "local_cpulist": (dev or {}).get("local_cpulist"),
                     "addrs": addrs.get(name, []), "pcie": _pcie_info(dev),
                     "pci_chain": (dev or {}).get("chain"), "virtual": n["virtual"]})
    # NVLink summary per GPU
    for g in gpus:
        act = [lk for lk in g["nvlinks"] if lk.get("active")]
        ver = max((lk.get("version") or 0 for lk in act), default=0) or None
        peers = {}
        for h in gpus:
            if h is not g:
                nl, _ = M.nvlink_between(g, h)
                if nl:
                    peers[h["label"]] = nl
        g["nvlink"] = {"links": len(act), "version": ver, "gbs": L.nvlink_gbs(ver, len(act)),
                       "to_nvswitch": sum(1 for lk in act if lk.get("remote_type") == "NVSWITCH"),
                       "peers": peers, "reason": g.pop("nvlink_reason", None)}
    mat_nics = [n for n in nics if not n.get("virtual")]
    snap["matrix"] = M.build(gpus, mat_nics, pci)
    for g in gpus:
        g.pop("nvlinks", None)
    snap["gpus"], snap["nics"] = gpus, nics
    # bridges above GPUs and NICs, and warnings
    seen = {}
    for e in gpus + nics:
        for b in e.get("pci_chain") or []:
            d = pci.get(b)
            if d and b not in seen:
                seen[b] = {"bdf": b, "port_type": d["port_type"], "vendor": d["vendor_name"],
                           "link": d["link"], "acs": d["acs"], "numa_node": d["numa_node"]}
    snap["bridges"] = [seen[b] for b in sorted(seen)]
    snap["warnings"] = _warnings(gpus, nics, pci, seen)


def _warnings(gpus, nics, pci, bridges):
    w = []
    for e in gpus + nics:
        dev = pci.get(e.get("pci"))
        link = (dev or {}).get("link")
        if link and link.get("degraded"):
            w.append(f"{e['label']} ({e.get('name')}, {e['pci']}): PCIe link runs at "
                     f"gen{link.get('cur_gen')} x{link.get('cur_width')}, capable of "
                     f"gen{link.get('max_gen')} x{link.get('max_width')}")
    for b in bridges.values():
        link = b.get("link")
        if link and link.get("degraded"):
            w.append(f"bridge {b['bdf']}: PCIe link gen{link.get('cur_gen')} x{link.get('cur_width')}"
                     f" below gen{link.get('max_gen')} x{link.get('max_width')}")
        if b.get("acs") and b["acs"].get("p2p_redirect") and b.get("port_type") == "downstream":
            w.append(f"bridge {b['bdf']}: ACS redirect enabled ({','.join(b['acs']['enabled'])}); "
                     "GPU/NIC peer-to-peer below it goes through the root complex")
    for n in nics:
        if n["kind"] in ("ib", "roce") and (n.get("state") or "").upper() != "ACTIVE":
            w.append(f"{n['label']} ({n['name']}): port state {n.get('state')}")
    return w


def _gbs(v):
    return f"{v:g} GB/s" if isinstance(v, (int, float)) else "unknown"


def cuda_version(v):
    """NVML's integer (12020) as major.minor (12.2); anything else as it is."""
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) and v >= 1000 else v


def _aligned(rows, width=None, lead="  "):
    """rows of cells -> lines, each column as wide as its widest cell (names vary in length);
    with `width`, the cells that do not fit go on a continuation line, aligned the same way."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    cut = len(widths)
    while width and cut > 1 and len(lead) + sum(widths[:cut]) + 2 * (cut - 1) > width:
        cut -= 1
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:cut], widths)).rstrip() for r in rows]
    if cut == len(widths):
        return lines
    rest = _aligned([r[cut:] for r in rows], width, lead + "    ")
    return [ln for pair in zip(lines, ("    " + x for x in rest)) for ln in pair]


def _wrapped(text, width):
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False)) if width else text


def format_text(snap, width=None):
    """Human-readable topo report (what `comm-bench topo` prints); `width`: fit that many
    columns (a device's cells over two lines, matrices in blocks of columns)."""
    out = [f"host {snap.get('host') or '?'}  ({snap.get('source')}, {snap.get('elapsed_s')} s)"]
    nv = snap.get("nvml") or {}
    if nv.get("available"):
        out.append(f"NVML: driver {nv.get('driver_version')}, CUDA {cuda_version(nv.get('cuda_driver_version'))}")
    else:
        out.append(_wrapped(f"NVML: {nv.get('reason') or 'not available'}", width))
    numa = snap.get("numa") or []
    if numa:
        out.append(_wrapped("NUMA: " + "; ".join(f"node{n['node']} cpus {n['cpulist']}" for n in numa), width))
    out.append("")
    out.append("GPUs:")
    if not snap.get("gpus"):
        out.append("  none")
    rows = []
    for g in snap.get("gpus") or []:
        p = g.get("pcie") or {}
        nl = g.get("nvlink") or {}
        nvs = (f"NVLink{nl.get('version') or '?'} x{nl['links']} = {_gbs(nl.get('gbs'))}"
               if nl.get("links") else f"NVLink: {nl.get('reason') or 'none'}")
        rows.append([g["label"], g.get("name") or "?", g.get("pci") or "?",
                     f"NUMA {g.get('numa_node') if g.get('numa_node') is not None else '-'}",
                     f"PCIe gen{p.get('cur_gen')} x{p.get('cur_width')} (max gen{p.get('max_gen')} "
                     f"x{p.get('max_width')}) = {_gbs(p.get('cur_gbs'))}", nvs])
    out += _aligned(rows, width)
    out.append("NICs:")
    if not snap.get("nics"):
        out.append("  none")
    rows = []
    for n in snap.get("nics") or []:
        rows.append([n["label"], n["name"], n["kind"], n.get("pci") or "virtual",
                     f"netdev {n.get('netdev') or '-'}", f"state {n.get('state') or '-'}",
                     f"rate {n.get('rate') or '-'}", f"= {_gbs(n.get('rate_gbs'))}",
                     f"NUMA {n.get('numa_node') if n.get('numa_node') is not None else '-'}",
                     " ".join(n.get("addrs") or [])])
    out += _aligned(rows, width)
    m = snap.get("matrix")
    if m and m.get("labels"):
        out.append("")
        cols = {"NUMA": [], "CPU affinity": []}
        ents = (snap.get("gpus") or []) + [n for n in snap.get("nics") or [] if not n.get("virtual")]
        for e in ents:
            cols["NUMA"].append(e.get("numa_node"))
            cols["CPU affinity"].append(e.get("local_cpulist"))
        out.append(M.format_matrix(m, cols, width))
        out.append("")
        out.append(_wrapped("Legend: " + "; ".join(f"{k} = {v}" for k, v in M.LEGEND.items()), width))
        out.append("")
        out.append("Theoretical one-direction rate between devices (GB/s):")
        out.append(M.format_matrix({"labels": m["labels"], "cells": [
            ["-" if i == j else (f"{r:g}" if r else "N/A") for j, r in enumerate(row)]
            for i, row in enumerate(m["rates_gbs"])]}, width=width))
    acs = [b for b in snap.get("bridges") or [] if b.get("acs")]
    if acs:
        out.append("")
        out.append(_wrapped("ACS on bridges: " + ", ".join(
            f"{b['bdf']} {'+'.join(b['acs']['enabled']) or 'off'}" for b in acs), width))
    for w in snap.get("warnings") or []:
        out.append(_wrapped(f"warning: {w}", width))
    for e in snap.get("errors") or []:
        out.append(_wrapped(f"error: {e}", width))
    return "\n".join(out)
