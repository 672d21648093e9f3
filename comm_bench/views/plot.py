"""Bandwidth and latency versus message size, the standard picture of the field: one
figure, log-x, every (run, transport, op, mode) of the given documents overlaid, and the
theoretical rate of the links they crossed drawn as dashed lines.

    curves, rates = build([("a.json", doc_a), ("b.json", doc_b)])
    render_png(curves, rates, "bw.png")

Bandwidth is busbw (else algbw) of bw-mode records; the latency panel shows the median
per-iteration time (one-way latency in --mode lat). Pair patterns: the median over the
pairs of each size, their min..max as a band.
"""
from __future__ import annotations

import io
import os
import statistics

from ..errors import UsageError
from .heatmap_png import mpl
from ..results.records import measured_gbs
from ..sizes import human_size


def _median_lat(rec):
    lat = rec.get("latency_us") if isinstance(rec.get("latency_us"), dict) else {}
    v = lat.get("median")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    v = rec.get("time_us")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def curve_key(name, rec, several):
    mode = rec.get("mode", "bw")
    label = f"{rec.get('transport')} {rec.get('op')}" + (" (lat)" if mode == "lat" else "")
    return (name if several else "", label)


def build(named_docs, ops=None):
    """[(name, doc)] -> (curves, rates). curves: {(run, label): {"mode", "sizes": [...],
    "gbs": [median], "gbs_lo", "gbs_hi", "us": [median]}}; rates: {"class": GB/s}."""
    from ..topology.linkmap import LinkMap

    several = len(named_docs) > 1
    points, rates = {}, {}
    for name, doc in named_docs:
        lm = LinkMap(doc)
        pairs, collective = set(), False
        for rec in doc.get("results") or []:
            if not isinstance(rec, dict) or not isinstance(rec.get("size"), int):
                continue
            if ops and rec.get("op") not in ops:
                continue
            key = curve_key(name, rec, several)
            by_size = points.setdefault(key, {"mode": rec.get("mode", "bw"), "sizes": {}})["sizes"]
            p = by_size.setdefault(rec["size"], {"gbs": [], "us": []})
            gbs = measured_gbs(rec) if rec.get("mode", "bw") == "bw" else None
            if gbs is not None:
                p["gbs"].append(gbs)
            us = _median_lat(rec)
            if us is not None:
                p["us"].append(us)
            if isinstance(rec.get("src"), int) and isinstance(rec.get("dst"), int):
                pairs.add((rec["src"], rec["dst"], rec.get("src_device"), rec.get("dst_device")))
            else:
                collective = True
        for s, d, sd, dd in pairs:
            cls, theo = lm.classify(s, d, {"src_device": sd, "dst_device": dd})
            if theo:
                rates[cls] = max(rates.get(cls, 0.0), theo)
        n = doc.get("world_size") or 0
        if collective and n >= 2:   # a ring crosses every rank -> rank+1 link; the slowest bounds it
            known = [(theo, cls) for cls, theo in (lm.classify(r, (r + 1) % n) for r in range(n)) if theo]
            if known:
                theo, cls = min(known)
                rates[cls] = max(rates.get(cls, 0.0), theo)
    curves = {}
    for key, c in points.items():
        sizes = sorted(c["sizes"])
        med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731 - a one-line median (NaN when empty)
        curves[key] = {"mode": c["mode"], "sizes": sizes,
                       "gbs": [med(c["sizes"][s]["gbs"]) for s in sizes],
                       "gbs_lo": [min(c["sizes"][s]["gbs"], default=float("nan")) for s in sizes],
                       "gbs_hi": [max(c["sizes"][s]["gbs"], default=float("nan")) for s in sizes],
                       "us": [med(c["sizes"][s]["us"]) for s in sizes]}
    if not curves:
        raise UsageError("nothing to plot: the results hold no records" + (f" of op {', '.join(ops)}" if ops else ""))
    return curves, rates


def figure(curves, rates, title=""):
    _, Figure = mpl()
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(13, 5.2), layout="constrained")
    bw_ax, lat_ax = fig.subplots(1, 2)
    sizes_fmt = FuncFormatter(lambda v, _: human_size(int(v)) if v >= 1 else "")
    for i, ((run, label), c) in enumerate(sorted(curves.items())):
        colour = f"C{i % 10}"
        name = f"{run}: {label}" if run else label
        if c["mode"] == "bw" and any(v == v for v in c["gbs"]):
            bw_ax.plot(c["sizes"], c["gbs"], marker="o", ms=3, lw=1.4, color=colour, label=name)
            if c["gbs_lo"] != c["gbs_hi"]:
                bw_ax.fill_between(c["sizes"], c["gbs_lo"], c["gbs_hi"], color=colour, alpha=0.15, lw=0)
        lat_ax.plot(c["sizes"], c["us"], marker="o", ms=3, lw=1.4, color=colour, label=name,
                    ls="-" if c["mode"] == "lat" else "--")
    for j, (cls, gbs) in enumerate(sorted(rates.items())):
        bw_ax.axhline(gbs, color="k", ls=(0, (4, 2 + j)), lw=1.0, label=f"{cls} link rate {gbs:g} GB/s")
    bw_ax.set_ylabel("bus bandwidth (GB/s, 1 GB = 1e9 B)")
    bw_ax.set_title("bandwidth vs message size (pairs: median, band min..max)", fontsize=10)
    lat_ax.set_yscale("log")
    lat_ax.set_ylabel("time (us)")
    lat_ax.set_title("latency vs message size (solid: one-way, --mode lat; dashed: bw-mode time per op)",
                     fontsize=10)
    for ax in (bw_ax, lat_ax):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(sizes_fmt)
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="major", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def png_bytes(curves, rates, title=""):
    buf = io.BytesIO()
    figure(curves, rates, title).savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def make(paths, out, ops=None):
    """Load the documents, plot them into `out` (.png). Returns a summary dict."""
    from ..results.document import load_measured as load
    from ..results.safefile import write_file

    if os.path.splitext(out)[1].lower() != ".png":
        raise UsageError(f"-o {out}: give a .png file name")
    docs = [(os.path.basename(p), load(p)) for p in paths]
    curves, rates = build(docs, ops)
    title = " vs ".join(name for name, _ in docs) if len(docs) > 1 else docs[0][0]
    write_file(out, png_bytes(curves, rates, title), "plot -o")
    return {"out": out, "curves": len(curves), "rates": rates}
