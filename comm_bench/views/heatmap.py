"""Link-level utilisation heatmaps from a results document.

Each cell is one (src, dst) pair: utilisation = measured bandwidth / theoretical rate of
the link class the pair crosses (comm_bench.topology.linkmap). Where no theoretical rate
is known (loopback, virtual interfaces) the cell is relative to the best pair of the same
class in that panel, and the legend says so. One panel per size class; N/A where
nothing was measured. Axes: ranks, GPUs, NICs or hosts (--by), labelled host:device.

    data = build(doc, by="rank")          # matrices (numpy), labels, classes
    heatmap_png.to_png_bytes(data)                 # matplotlib (Agg)
    heatmap_output.make("run.json", "heat.html")    # load + build + PNG or HTML file

Counters in the records become a utilisation-over-time panel: heatmap_counters.py.
"""
from __future__ import annotations

import math

from ..errors import UsageError
from .heatmap_counters import counter_series
from ..results.records import latency_pair_records, measured_gbs, median_latency_us, pair_records, superseded

BY_CHOICES = ("rank", "gpu", "nic", "host")
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

    metric = "bw"     # "lat": cells are median one-way latencies (us)

    @property
    def unit(self):
        return "us" if self.metric == "lat" else "GB/s"

    @property
    def n(self):
        return len(self.keys)

    def title(self):
        d = self.doc
        lat = " latency" if self.metric == "lat" else ""
        return (f"{d.get('transport') or '?'} {getattr(self, 'op', None) or '?'}{lat} {d.get('pattern') or ''} — "
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
    nic = lm.nic(rank, rec, side)
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

    from ..topology.linkmap import LinkMap

    if by not in BY_CHOICES:
        raise UsageError(f"--by {by}: use one of {', '.join(BY_CHOICES)}")
    recs, metric, value = pair_records(doc), "bw", measured_gbs
    if not recs:        # a --mode lat run: a latency heatmap
        recs, metric, value = latency_pair_records(doc), "lat", median_latency_us
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
        v = value(rec)
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
        if metric == "lat":
            _latency_scores(p, n)
            continue
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
    data.op, data.metric = op, metric
    return data


def _latency_scores(p, n):
    """A latency panel's colour: the fastest pair of the class / this pair (1 = as fast as
    the fastest; links have no theoretical latency, so peers are the reference)."""
    import numpy as np

    meas, cls_m = p["measured"], p["classes"]
    util = np.full((n, n), np.nan)
    alone = np.zeros((n, n), dtype=bool)
    for cls in {c for c in cls_m[~np.isnan(meas)]}:
        mask = ~np.isnan(meas) & (cls_m == cls)
        best = np.nanmin(meas[mask])
        if mask.sum() < 2 or not best > 0:
            alone |= mask
        else:
            util[mask] = best / meas[mask]
    p["util"], p["relative"], p["alone"] = util, np.zeros((n, n), dtype=bool), alone


def legend_text(data):
    if getattr(data, "metric", "bw") == "lat":
        return ("latency: median one-way (us, half a round trip); colour = the fastest pair of its link class / "
                "this pair (1 = as fast as the fastest; xN = N times its latency).  Grey = N/A (not measured).")
    parts = []
    for cls, rates in sorted(data.classes_seen.items()):
        if rates:
            r = ", ".join(f"{x:g}" for x in rates[:4]) + (" ..." if len(rates) > 4 else "")
            parts.append(f"{cls}: {r} GB/s")
        elif all(p["alone"][p["classes"] == cls].all() for p in data.panels if (p["classes"] == cls).any()):
            parts.append(f"{cls}: no theoretical rate and one pair only: no comparison exists (GB/s shown)")
        else:
            parts.append(f"{cls}: no theoretical rate (* = relative to the best pair of the class)")
    old = {superseded(r) for r in data.doc.get("results") or []
           if type(r) is dict and r.get("op") == data.op} - {None}
    note = "".join(f"  NOT VALID: {why}." for why in sorted(old))
    return ("link classes — " + "; ".join(parts) + ".  Grey = N/A (not measured)." if parts else
            "no pairs measured") + note


