"""GPU/NIC connection matrix like `nvidia-smi topo -m`, computed from PCI paths + NVLinks.

  X     self
  NV#   joined by a bonded set of # NVLinks (directly or through NVSwitch)
  PIX   at most one PCIe switch between them
  PXB   several PCIe switches, not through the host bridge
  PHB   through a PCIe host bridge (same root complex, e.g. the CPU's root ports)
  NODE  through the interconnect between host bridges inside one NUMA node
  SYS   through the SMP interconnect between NUMA nodes (UPI, Infinity Fabric)
  N/A   a device's PCI path is unknown
"""
from .. import links as L
from ..system.sysfs import switch_chain

LEGEND = {
    "X": "self",
    "NV#": "bonded set of # NVLinks",
    "PIX": "at most a single PCIe switch",
    "PXB": "multiple PCIe switches, without the host bridge",
    "PHB": "a PCIe host bridge (typically the CPU)",
    "NODE": "PCIe + the interconnect between host bridges within a NUMA node",
    "SYS": "PCIe + the SMP interconnect between NUMA nodes (QPI/UPI)",
}


def _same_device(a, b):
    return a.split(".")[0] == b.split(".")[0]


def pci_relation(a, b, pci):
    """Relation of PCI functions a, b (bdf strings) without NVLink."""
    if a == b:
        return "X"
    da, db = pci.get(a), pci.get(b)
    if da is None or db is None:
        return "N/A"
    if _same_device(a, b):
        return "PIX"
    if da["root_complex"] != db["root_complex"]:
        na, nb = da.get("numa_node"), db.get("numa_node")
        return "NODE" if na == nb else "SYS"
    ca, cb = da["chain"] + [a], db["chain"] + [b]
    k = 0
    while k < min(len(ca), len(cb)) and ca[k] == cb[k]:
        k += 1
    if k == 0:
        return "PHB"
    roles = dict(switch_chain(da, pci)) | dict(switch_chain(db, pci))
    lca = ca[k - 1]
    switches = sum(1 for x in ca[k:] + cb[k:] if roles.get(x) == "upstream")
    if roles.get(lca) in ("upstream", "downstream"):
        switches += 1
    return "PIX" if switches <= 1 else "PXB"


def pci_path(a, b, pci):
    """bdfs of the links between a and b (each device's own link and the bridges up to
    and excluding their lowest common ancestor)."""
    da, db = pci.get(a), pci.get(b)
    if da is None or db is None:
        return []
    ca, cb = da["chain"] + [a], db["chain"] + [b]
    k = 0
    if da["root_complex"] == db["root_complex"]:
        while k < min(len(ca), len(cb)) and ca[k] == cb[k]:
            k += 1
    return ca[k:] + cb[k:]


def pcie_bottleneck(a, b, pci, use="cur"):
    """Slowest PCIe link (GB/s) on the path between a and b, or None."""
    rates = []
    for bdf in pci_path(a, b, pci):
        link = (pci.get(bdf) or {}).get("link") or {}
        r = L.pcie_gbs(link.get(f"{use}_gen"), link.get(f"{use}_width"))
        if r:
            rates.append(r)
    return min(rates) if rates else None


def device_pcie_gbs(bdf, pci, use="cur"):
    link = (pci.get(bdf) or {}).get("link") or {}
    return L.pcie_gbs(link.get(f"{use}_gen"), link.get(f"{use}_width"))


def nvlink_between(ga, gb):
    """(links, version) between two GPU entries of a snapshot."""
    direct = [lk for lk in ga.get("nvlinks", []) if lk.get("active") and lk.get("remote_pci") == gb["pci"]]
    if direct:
        return len(direct), max((lk.get("version") or 0) for lk in direct) or None
    sa = [lk for lk in ga.get("nvlinks", []) if lk.get("active") and lk.get("remote_type") == "NVSWITCH"]
    sb = [lk for lk in gb.get("nvlinks", []) if lk.get("active") and lk.get("remote_type") == "NVSWITCH"]
    if sa and sb:
        return min(len(sa), len(sb)), max((lk.get("version") or 0) for lk in sa + sb) or None
    return 0, None


def build(gpus, nics, pci):
    """matrix = {labels, kinds, cells: [[str]], rates_gbs: [[float|None]], classes: [[str]]}"""
    ents = [("gpu", g["label"], g) for g in gpus] + [("nic", n["label"], n) for n in nics]
    n = len(ents)
    cells = [["X"] * n for _ in range(n)]
    rates = [[None] * n for _ in range(n)]
    classes = [["same-device"] * n for _ in range(n)]
    for i in range(n):
        ki, _, ei = ents[i]
        for j in range(n):
            if i == j:
                continue
            kj, _, ej = ents[j]
            rel, cls, rate = None, "pcie", None
            if ki == kj == "gpu":
                nl, ver = nvlink_between(ei, ej)
                if nl:
                    rel, cls, rate = f"NV{nl}", "nvlink", L.nvlink_gbs(ver, nl)
            if rel is None:
                rel = pci_relation(ei.get("pci"), ej.get("pci"), pci) if ei.get("pci") and ej.get("pci") else "N/A"
                if rel == "X":      # two ports of one function
                    rel = "PIX"
                rate = pcie_bottleneck(ei.get("pci"), ej.get("pci"), pci) if rel != "N/A" else None
                if kj == "nic" or ki == "nic":
                    rate = L.min_rate(rate, *(e.get("rate_gbs") for k, e in ((ki, ei), (kj, ej)) if k == "nic"))
                    cls = "pcie"
            cells[i][j], classes[i][j], rates[i][j] = rel, cls, rate
    return {"labels": [e[1] for e in ents], "kinds": [e[0] for e in ents], "cells": cells,
            "classes": classes, "rates_gbs": rates, "legend": LEGEND}


def format_matrix(m, extra_cols=None, width=None):
    """nvidia-smi topo -m's matrix; with `width` (a terminal's columns), a matrix wider than
    that is printed in blocks of columns, each under its own header, the extra columns
    (NUMA, CPU affinity) last."""
    labels = m["labels"]
    if not labels:
        return "(no GPUs or NICs found)"
    widest = max(len(str(c)) for row in m["cells"] for c in row) if m["cells"] else 0
    w = max(6, max(len(x) for x in labels) + 1, widest + 2)  # cells never run together
    extra_cols = extra_cols or {}
    full = w * (len(labels) + 1) + 14 * len(extra_cols)
    per = len(labels) if not width or full <= width else max(1, (width - w) // w)
    blocks = [list(range(i, min(i + per, len(labels)))) for i in range(0, len(labels), per)]
    lines = []
    for b, cols in enumerate(blocks):
        last = b == len(blocks) - 1 and (per == len(labels))    # extras beside the matrix when it fits
        head = " " * w + "".join(f"{labels[j]:>{w}}" for j in cols)
        if last and extra_cols:
            head += "".join(f"  {k:<12}" for k in extra_cols)
        lines += ([""] if b else []) + [head.rstrip()]
        for i, lab in enumerate(labels):
            row = f"{lab:<{w}}" + "".join(f"{m['cells'][i][j]:>{w}}" for j in cols)
            if last:
                for col in extra_cols.values():
                    row += f"  {str(col[i] if col[i] is not None else 'N/A'):<12}"
            lines.append(row.rstrip())
    if extra_cols and per != len(labels):
        lines += ["", (" " * w + "".join(f"  {k:<12}" for k in extra_cols)).rstrip()]
        for i, lab in enumerate(labels):
            lines.append((f"{lab:<{w}}" + "".join(f"  {str(col[i] if col[i] is not None else 'N/A'):<12}"
                                                   for col in extra_cols.values())).rstrip())
    return "\n".join(lines)
