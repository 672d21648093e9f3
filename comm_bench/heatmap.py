"""Link-level utilisation heatmaps from a results document.

Each cell is one (src, dst) pair: utilisation = measured bandwidth / theoretical rate of
the link class the pair crosses (comm_bench.topology.linkmap). Where no theoretical rate
is known (loopback, virtual interfaces) the cell is relative to the best pair of the same
class in that panel, and the legend says so. One panel per size class; N/A where
nothing was measured. Axes: ranks, GPUs, NICs or hosts (--by), labelled host:device.

    data = build(doc, by="rank")          # matrices (numpy), labels, classes
    heatmap_png.render_png(data, "heat.png")        # matplotlib (Agg)
    heatmap_output.make("run.json", "heat.html")    # load + build + PNG or HTML file

Counters in the records become a utilisation-over-time panel (counter_series):
  - the deltas transports record around each timed loop: rdma extra.counters
    {port_xmit_data, port_rcv_data (4-byte words), port_xmit_bytes, ...} with extra.device
    "mlx5_0:1"; nccl/cuda extra.nvml_counters {bus_id: {pcie_tx, pcie_rx, nvlink_tx,
    nvlink_rx}} (bytes). One point per record: bytes / ((iters + warmup) x time_us), at
    the run's cumulative measuring time, over the NIC's / GPU link's theoretical rate;
  - time series: extra.counters {"device": "mlx5_0", "rate_gbs": 50.0 (optional),
    "t": [s, ...], "tx_bytes": [cumulative, ...]} (or a list of such dicts, or
    "samples": [{"t": s, "tx_bytes": n}, ...]).
"""
from __future__ import annotations

import math

from .errors import UsageError
from .records import measured_gbs, number, pair_records

BY_CHOICES = ("rank", "gpu", "nic", "host")
NVML_MIN_WINDOW_S = 0.1
MAX_PANELS = 4


def size_classes(sizes, max_panels=MAX_PANELS):
    """Pick at most max_panels sizes (smallest, largest, log-spaced between)."""
    sizes = sorted(set(sizes))
    if len(sizes) <= max_panels:
        return sizes
    logs = [math.log(s) for s in sizes]
    picks = []
    for k in range(max_panels):
        target = logs[0] + (logs[-1] - logs[0]) * k / (max_panels - 1)
        best = min(range(len(sizes)), key=lambda i: abs(logs[i] - target))
        if sizes[best] not in picks:
            picks.append(sizes[best])
    return sorted(picks)


# ----------------------------------------------------------------------------- model
class HeatmapData:
    """keys/labels/nodes for the axes; panels: [{size, measured, theoretical, util,
    relative (bool matrix: util relative to best of class), classes (str matrix)}]."""

    def __init__(self, doc, by, keys, labels, nodes, panels, classes_seen, counters):
        self.doc, self.by, self.keys, self.labels, self.nodes = doc, by, keys, labels, nodes
        self.panels, self.classes_seen, self.counters = panels, classes_seen, counters

    @property
    def n(self):
        return len(self.keys)

    def title(self):
        d = self.doc
        return (f"{d.get('transport') or '?'} {getattr(self, 'op', None) or '?'} {d.get('pattern') or ''} — "
                f"{d.get('world_size') or '?'} ranks, by {self.by}")


def _axis_key(lm, rank, rec, side, by):
    node = lm.node(rank, rec, side)
    if by == "rank":
        return (node, rank), lm.label(rank, rec, side)
    if by == "host":
        return (node,), node
    if by == "gpu":
        kind, val = lm.device(rank, rec, side)
        if kind == "gpu":
            return (node, "gpu", val), f"{node}:GPU{val}"
        return (node, "rank", rank), lm.label(rank, rec, side)
    nic = lm._nic_for(rank, rec, side)
    if nic is not None:
        return (node, "nic", nic.get("name")), f"{node}:{nic.get('name')}"
    kind, val = lm.device(rank, rec, side)
    if kind == "nic":
        return (node, "nic", val), f"{node}:{val}"
    return (node, "rank", rank), lm.label(rank, rec, side)


def _sort_key(k):
    return tuple((0, x) if isinstance(x, int) else (1, str(x)) for x in k)


def pick_op(recs, op=None):
    """The op the panels show: `op`, else the one with the most pair records (ops
    measure different things, so cells never mix them)."""
    counts = {}
    for r in recs:
        counts[r.get("op")] = counts.get(r.get("op"), 0) + 1
    if op is None:
        return max(sorted(counts, key=str), key=counts.get) if counts else None
    if op not in counts:
        raise UsageError(f"--op {op}: the results have pair records of {', '.join(map(str, sorted(counts, key=str))) or 'no op'}")
    return op


def build(doc, by="rank", max_panels=MAX_PANELS, op=None):
    import numpy as np

    from .topology.linkmap import LinkMap

    if by not in BY_CHOICES:
        raise UsageError(f"--by {by}: use one of {', '.join(BY_CHOICES)}")
    recs = pair_records(doc)
    if not recs and any(type(r) is dict and measured_gbs(r) is not None for r in doc.get("results") or []):
        raise UsageError("a heatmap needs pair records (src -> dst) and this run has collective records "
                         "only: run the sweep with --pattern pairwise, or draw busbw per size with "
                         "`comm-bench plot`")
    op = pick_op(recs, op)
    recs = [r for r in recs if r.get("op") == op]
    lm = LinkMap(doc)
    sizes = size_classes([r["size"] for r in recs], max_panels)
    # axis entities: every rank of the run (so unmeasured ones show as N/A), then pairs
    rank_side = {}
    for r in sorted(lm.ranks):
        rank_side[r] = _axis_key(lm, r, None, "src", by)
    keyset = {}
    for r in sorted(lm.ranks):
        k, lab = rank_side[r]
        keyset.setdefault(k, lab)
    ends = {}

    def end_of(rank, dev, rec, side):
        e = ends.get((rank, dev))
        if e is None:
            if dev is None and rank in rank_side:
                k, lab = rank_side[rank]
            else:
                k, lab = _axis_key(lm, rank, rec, side, by)
            e = (k, lab, lm.end_info(rank, dev, rec, side))
            ends[(rank, dev)] = e
        return e

    wanted = set(sizes)
    cells = {}      # (size, ks, kd) -> [[measured], theoretical, class]
    classes_seen = {}
    for rec in recs:
        size = rec["size"]
        if size not in wanted:
            continue
        s, d = rec["src"], rec["dst"]
        ks, ls, es = end_of(s, rec.get("src_device"), rec, "src")
        kd, ld, ed = end_of(d, rec.get("dst_device"), rec, "dst")
        if ks not in keyset:
            keyset[ks] = ls
        if kd not in keyset:
            keyset[kd] = ld
        cls, theo = lm.classify_ends(es, ed, s, d, rec)
        v = measured_gbs(rec)
        ck = (size, ks, kd)
        c = cells.get(ck)
        if c is None:
            cells[ck] = [[v], theo, cls]
            seen = classes_seen.get(cls)
            if seen is None:
                seen = classes_seen[cls] = set()
            seen.add(theo)
        else:
            c[0].append(v)
    keys = sorted(keyset, key=_sort_key)
    index = {k: i for i, k in enumerate(keys)}
    labels = [keyset[k] for k in keys]
    nodes = [k[0] for k in keys]
    n = len(keys)
    panels = []
    for size in sizes:
        meas = np.full((n, n), np.nan)
        theo = np.full((n, n), np.nan)
        cls_m = np.full((n, n), "", dtype=object)
        panels.append({"size": size, "measured": meas, "theoretical": theo, "classes": cls_m})
    pidx = {s: i for i, s in enumerate(sizes)}
    for (size, ks, kd), (vals, t, cls) in cells.items():
        p = panels[pidx[size]]
        i, j = index[ks], index[kd]
        p["measured"][i, j] = float(np.median(vals)) if len(vals) > 1 else vals[0]
        p["theoretical"][i, j] = t if t else np.nan
        p["classes"][i, j] = cls
    for p in panels:
        meas, theo, cls_m = p["measured"], p["theoretical"], p["classes"]
        with np.errstate(invalid="ignore", divide="ignore"):
            util = meas / theo
        relative = np.zeros((n, n), dtype=bool)
        alone = np.zeros((n, n), dtype=bool)    # no rate and no peer: nothing to compare with
        norel = np.isnan(theo) & ~np.isnan(meas)
        if norel.any():
            for cls in {c for c in cls_m[norel]}:
                mask = norel & (cls_m == cls)
                best = np.nanmax(meas[mask]) if mask.any() else np.nan
                if mask.sum() < 2:
                    alone |= mask
                elif best and best > 0:
                    util[mask] = meas[mask] / best
                    relative |= mask
        p["util"], p["relative"], p["alone"] = util, relative, alone
    counters = counter_series(doc, lm)
    data = HeatmapData(doc, by, keys, labels, nodes, panels,
                       {k: sorted(x for x in v if x) for k, v in classes_seen.items()}, counters)
    data.op = op
    return data


# ----------------------------------------------------------------------------- counters
_BYTE_KEYS = {"port_xmit_data": 4, "port_rcv_data": 4}


def _series_from(c):
    """[(name, t list, {counter: cumulative bytes list})]"""
    if isinstance(c, list):
        return [x for item in c for x in _series_from(item)]
    if not isinstance(c, dict):
        return []
    if isinstance(c.get("samples"), list):
        samples = [s for s in c["samples"] if isinstance(s, dict) and number(s.get("t")) is not None]
        t = [s["t"] for s in samples]
        ctrs = {}
        for s in samples:
            for k, v in s.items():
                if k != "t" and (k.endswith("bytes") or k in _BYTE_KEYS):
                    ctrs.setdefault(k, []).append(v)
        ctrs = {k: v for k, v in ctrs.items() if len(v) == len(t)}
        return [(c.get("device") or "?", t, ctrs, number(c.get("rate_gbs")))]
    t = c.get("t")
    if isinstance(t, list):
        ctrs = {k: v for k, v in c.items() if isinstance(v, list) and len(v) == len(t)
                and (k.endswith("bytes") or k in _BYTE_KEYS)}
        return [(c.get("device") or "?", t, ctrs, number(c.get("rate_gbs")))]
    return []


_DELTA_BYTES = (("port_xmit_bytes", "tx", 1), ("port_rcv_bytes", "rx", 1),
                ("port_xmit_data", "tx", 4), ("port_rcv_data", "rx", 4))


def _delta_bytes(c):
    """{'tx': bytes, 'rx': bytes} from a counter-delta dict (rdma transport format)."""
    out = {}
    for key, name, scale in _DELTA_BYTES:
        v = number(c.get(key))
        if v is not None and name not in out:
            out[name] = v * scale
    return out


def counter_series(doc, lm=None):
    """[{label, t: [s], gbs: [GB/s], util: [fraction] | None, rate_gbs}] from records' counters.

    Two shapes are read: time series (extra.counters with "t" or "samples", see the module
    doc) and the deltas the transports record around each timed loop: extra.counters
    {port_xmit_data, port_rcv_data, ...} with extra.device "mlx5_0:1" (rdma), and
    extra.nvml_counters {bus_id: {pcie_tx, pcie_rx, nvlink_tx, nvlink_rx}} (nccl, cuda).
    Deltas become one point per record at the run's cumulative measuring time."""
    out = {}
    clock = 0.0

    def add(key, label, rate, t, gbs):
        s = out.setdefault(key, {"label": label, "t": [], "gbs": [], "rate_gbs": rate})
        s["t"].append(float(t))
        s["gbs"].append(gbs)

    for rec in doc.get("results") or []:
        if type(rec) is not dict:
            continue
        extra = rec.get("extra")
        if not extra or type(extra) is not dict:
            continue
        t_us, iters = number(rec.get("time_us")), number(rec.get("iters"))
        dur = t_us * (iters + (number(rec.get("warmup")) or 0)) / 1e6 if t_us and iters else None
        if dur:
            clock += dur
        dst_extra = extra.get("dst") if isinstance(extra.get("dst"), dict) else {}
        for side_extra, side in ((extra, "src"), (dst_extra, "dst")):
            rank = rec.get(side)
            host = lm.node(rank, rec, side) if lm is not None and isinstance(rank, int) else "?"
            topo = (lm.topo.get(lm.host(rank, rec, side)) or {}) if lm is not None and isinstance(rank, int) else {}
            c = side_extra.get("counters")
            if isinstance(c, dict) and "t" not in c and "samples" not in c and dur:
                dev = str(side_extra.get("device") or "?").split(":")[0]
                nic = next((n for n in topo.get("nics") or [] if n.get("name") == dev), None)
                rate = nic.get("rate_gbs") if nic else None
                for name, nbytes in _delta_bytes(c).items():
                    add((host, dev, name), f"{host}:{dev} {name}", rate, clock, nbytes / dur / 1e9)
            elif c:
                for dev, t, ctrs, rate in _series_from(c):
                    if len(t) < 2:
                        continue
                    if rate is None:
                        nic = next((n for n in topo.get("nics") or [] if n.get("name") == dev), None)
                        rate = nic.get("rate_gbs") if nic else None
                    for name, vals in ctrs.items():
                        scale = _BYTE_KEYS.get(name, 1)
                        for k in range(1, len(t)):
                            dt = (number(t[k]) or 0) - (number(t[k - 1]) or 0)
                            a, b = number(vals[k]), number(vals[k - 1])
                            if dt > 0 and a is not None and b is not None and a >= b:
                                add((host, dev, name), f"{host}:{dev} {name}", rate, t[k],
                                    (a - b) * scale / dt / 1e9)
            nv = side_extra.get("nvml_counters")
            # NVML refreshes its traffic counters only every few tens of ms, so a shorter
            # measurement's delta holds traffic of earlier ones: such points are not rates
            if isinstance(nv, dict) and dur and dur >= NVML_MIN_WINDOW_S:
                for bus, ctrs in nv.items():
                    if not isinstance(ctrs, dict):
                        continue
                    g = next((g for g in topo.get("gpus") or [] if g.get("pci") == str(bus).lower()
                              or str(bus).lower().endswith(str(g.get("pci"))[5:])), None)
                    dev = g.get("label") if g else str(bus)
                    for name, v in ctrs.items():
                        v = number(v)
                        if v is None:
                            continue
                        rate = None
                        if g and name.startswith("pcie"):
                            rate = (g.get("pcie") or {}).get("cur_gbs")
                        elif g and name.startswith("nvlink"):
                            rate = (g.get("nvlink") or {}).get("gbs")
                        add((host, dev, name), f"{host}:{dev} {name}", rate, clock, v / dur / 1e9)
    series = []
    for s in out.values():
        order = sorted(range(len(s["t"])), key=s["t"].__getitem__)
        s["t"] = [s["t"][i] for i in order]
        s["gbs"] = [s["gbs"][i] for i in order]
        s["util"] = [g / s["rate_gbs"] for g in s["gbs"]] if s["rate_gbs"] else None
        series.append(s)
    return series


def legend_text(data):
    parts = []
    for cls, rates in sorted(data.classes_seen.items()):
        if rates:
            r = ", ".join(f"{x:g}" for x in rates[:4]) + (" ..." if len(rates) > 4 else "")
            parts.append(f"{cls}: {r} GB/s")
        elif all(p["alone"][p["classes"] == cls].all() for p in data.panels if (p["classes"] == cls).any()):
            parts.append(f"{cls}: no theoretical rate and one pair only: no comparison exists (GB/s shown)")
        else:
            parts.append(f"{cls}: no theoretical rate (* = relative to the best pair of the class)")
    return "link classes — " + "; ".join(parts) + ".  Grey = N/A (not measured)." if parts else \
        "no pairs measured"


