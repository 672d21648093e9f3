"""Link-level utilisation heatmaps from a results document.

Each cell is one (src, dst) pair: utilisation = measured bandwidth / theoretical rate of
the link class the pair crosses (comm_bench.topology.linkmap). Where no theoretical rate
is known (loopback, virtual interfaces) the cell is relative to the median pair of the same
class in that panel (a healthy link reads about 100%, one lucky pair does not paint the
others red), and the legend says so. One panel per size class; N/A where
nothing was measured. Axes: ranks, GPUs, NICs or hosts (--by), labelled host:device.

    data = build(doc, by="rank")          # matrices (numpy), labels, classes
    heatmap_png.to_png_bytes(data)                 # matplotlib (Agg)
    heatmap_output.make("run.json", "heat.html")    # load + build + PNG or HTML file

Counters in the records become a utilisation-over-time panel: heatmap_counters.py.
"""
from __future__ import annotations

import math

from ..errors import UsageError
from .heatmap_cells import Cells
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


def op_counts(recs):
    """op -> how many of the records measured it."""
    counts = {}
    for r in recs:
        counts[r.get("op")] = counts.get(r.get("op"), 0) + 1
    return counts


def pick_op(counts, op=None):
    """The op the panels show: `op`, else the one with the most pair records (ops
    measure different things, so cells never mix them); counts: op_counts."""
    if op is None:
        return max(sorted(counts, key=str), key=counts.get) if counts else None
    if op not in counts:
        raise UsageError(f"--op {op}: the results have pair records of {', '.join(map(str, sorted(counts, key=str))) or 'no op'}")
    return op


def build(doc, by="rank", max_panels=MAX_PANELS, op=None, cells=None, sizes=None):
    """cells: the pair records' figures where a streaming reader kept them (Cells); the
    pair records left in doc["results"] join them. sizes: the panels' sizes (--size),
    else up to max_panels picked (size_classes)."""
    import numpy as np

    from ..topology.linkmap import LinkMap

    if by not in BY_CHOICES:
        raise UsageError(f"--by {by}: use one of {', '.join(BY_CHOICES)}")
    lm = cells.lm if cells else LinkMap(doc)
    metric, value = "bw", measured_gbs
    cells = cells or Cells(lm, by, value)
    for r in pair_records(doc):
        cells.add(r)
    if not cells.count:        # a --mode lat run: a latency heatmap
        metric, value = "lat", median_latency_us
        cells = Cells(lm, by, value)
        for r in latency_pair_records(doc):
            cells.add(r)
    if not cells.count and any(type(r) is dict and measured_gbs(r) is not None for r in doc.get("results") or []):
        raise UsageError("a heatmap needs pair records (src -> dst) and this run has collective records "
                         "only: run the sweep with --pattern pairwise, or draw busbw per size with "
                         "`comm-bench plot`")
    op = pick_op(cells.counts, op)
    measured = sorted({size for o, size in cells.cols if o == op})
    if sizes:
        from ..sizes import human_size
        missing = [s for s in sizes if s not in measured]
        if missing:
            raise UsageError(f"--size {', '.join(human_size(s) for s in missing)}: op {op} was measured at "
                             f"{', '.join(human_size(s) for s in measured)}")
        sizes = sorted(set(sizes))
    else:
        sizes = size_classes(measured, max_panels)
    keys, labels, panels, classes_seen = cells.panels(op, sizes)
    nodes = [k[0] for k in keys]
    n = len(keys)
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
                ref = np.nanmedian(meas[mask]) if mask.any() else np.nan
                if mask.sum() < 2:
                    alone |= mask
                elif ref and ref > 0:
                    util[mask] = meas[mask] / ref
                    relative |= mask
        p["util"], p["relative"], p["alone"] = util, relative, alone
    counters = counter_series(doc, lm)
    data = HeatmapData(doc, by, keys, labels, nodes, panels,
                       {k: sorted(x for x in v if x) for k, v in classes_seen.items()}, counters)
    data.op, data.metric = op, metric
    return data


def _latency_scores(p, n):
    """A latency panel's colour: the class's median latency / this pair's (1 = as fast as
    the median pair; links have no theoretical latency, so peers are the reference)."""
    import numpy as np

    meas, cls_m = p["measured"], p["classes"]
    util = np.full((n, n), np.nan)
    alone = np.zeros((n, n), dtype=bool)
    for cls in {c for c in cls_m[~np.isnan(meas)]}:
        mask = ~np.isnan(meas) & (cls_m == cls)
        ref = np.nanmedian(meas[mask])
        if mask.sum() < 2 or not ref > 0:
            alone |= mask
        else:
            util[mask] = ref / meas[mask]
    p["util"], p["relative"], p["alone"] = util, np.zeros((n, n), dtype=bool), alone


def legend_text(data):
    if getattr(data, "metric", "bw") == "lat":
        return ("cells: median one-way latency (us, half a round trip) and xN = N times its class's median "
                "pair; colour = the class's median / this pair (1 = as fast as the median).  "
                "Grey = N/A (not measured).")
    parts = []
    for cls, rates in sorted(data.classes_seen.items()):
        if rates:
            r = ", ".join(f"{x:g}" for x in rates[:4]) + (" ..." if len(rates) > 4 else "")
            parts.append(f"{cls}: {r} GB/s")
        elif all(p["alone"][p["classes"] == cls].all() for p in data.panels if (p["classes"] == cls).any()):
            parts.append(f"{cls}: no theoretical rate and one pair only: no comparison exists (GB/s shown)")
        else:
            parts.append(f"{cls}: no theoretical rate (* = % of the class's median pair)")
    old = {superseded(r) for r in data.doc.get("results") or []
           if type(r) is dict and r.get("op") == data.op} - {None}
    note = "".join(f"  NOT VALID: {why}." for why in sorted(old))
    return ("cells: % of the link rate, then the measured GB/s.  link classes — " + "; ".join(parts)
            + ".  Grey = N/A (not measured)." if parts else
            "no pairs measured") + note


