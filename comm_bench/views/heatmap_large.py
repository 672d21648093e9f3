"""Heatmaps of large runs (aggregate(): more than HUGE ranks, or more than LARGE with a
sparse schedule, where one pixel per pair would not show; or --by switch): aggregated,
never an n x n matrix per panel of everything.

- node x node: at most MAX_BINS x MAX_BINS cells; a cell is the worst (lowest) utilisation
  of the pairs measured in its block of nodes (a sparse schedule leaves most cells N/A);
- switch x switch (where the document says which switch each host hangs off: "fabric"):
  the worst pair between two switches (a bad port shows as a row and column of red
  cells), and the median pair (a whole slow switch);
- the worst pairs, listed.
One size: the largest measured (the figure a link is judged by). Utilisation = measured /
theoretical rate of the pair's link class, or, with no rate known, relative to the
median pair of its class (at scale the best pair is noise; the legend says which).
"""
from __future__ import annotations

import base64
import io

from ..errors import UsageError
from .heatmap import op_counts, pick_op
from ..results.records import measured_gbs, pair_records
from ..sizes import human_size

LARGE = 512         # ranks above which a sparse run's heatmap is aggregated
HUGE = 2048         # ranks above which every heatmap is
SPARSE = 0.05       # a schedule measuring under this share of the n(n-1) pairs is sparse
MAX_BINS = 256     # node x node cells per side: a cell must be visible
WORST = 20


def aggregate(doc, records=None) -> bool:
    """records: how many the document holds (a streamed one keeps few in doc["results"])."""
    n = doc.get("world_size") or 0
    records = len(doc.get("results") or ()) if records is None else records
    return n > HUGE or (n > LARGE and records < SPARSE * n * (n - 1))


class Aggregate:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def build(doc, op=None, bins=MAX_BINS) -> Aggregate:
    import numpy as np

    from ..validate.fabric import switch_of
    from ..topology.linkmap import LinkMap

    recs = pair_records(doc)
    if not recs:
        raise UsageError("a heatmap needs pair records (src -> dst): run the sweep with a pair pattern")
    op = pick_op(op_counts(recs), op)
    size = max(r["size"] for r in recs if r.get("op") == op)
    recs = [r for r in recs if r.get("op") == op and r["size"] == size and not isinstance(r.get("confirm"), dict)]
    lm = LinkMap(doc)
    n = max(doc.get("world_size") or 0, 1 + max(max(r["src"], r["dst"]) for r in recs))
    src = np.fromiter((r["src"] for r in recs), int, len(recs))
    dst = np.fromiter((r["dst"] for r in recs), int, len(recs))
    val = np.fromiter((measured_gbs(r) for r in recs), float, len(recs))
    cls_theo: dict = {}
    cls = []
    for r in recs:      # one lookup per distinct (class, rate); classify is cached per end
        c = lm.classify(r["src"], r["dst"], r)
        cls.append(cls_theo.setdefault(c, len(cls_theo)))
    cls = np.asarray(cls)  # type: ignore[assignment]
    util = np.empty(len(recs))
    relative = []
    for (c, theo), i in cls_theo.items():
        m = cls == i
        if theo:
            util[m] = val[m] / theo
        else:
            util[m] = val[m] / np.median(val[m])
            relative.append(c)
    block = -(-n // min(bins, n))
    nb = -(-n // block)
    node = np.full((nb, nb), np.inf)
    np.minimum.at(node, (src // block, dst // block), util)
    node[np.isinf(node)] = np.nan
    per_node = np.full(n, np.inf)
    np.minimum.at(per_node, src, util)
    np.minimum.at(per_node, dst, util)
    per_node[np.isinf(per_node)] = np.nan
    switch = switch_of(doc)
    names = sorted(set(switch.values()), key=_natural)
    sw_med: np.ndarray | None = None
    sw_min: np.ndarray | None = None
    if names:
        index: dict[str | None, int] = {s: i for i, s in enumerate(names)}
        of = np.array([index.get(switch.get(lm.host(r)), -1) for r in range(n)])
        a, b = of[src], of[dst]
        ok = (a >= 0) & (b >= 0)
        k = len(names)
        flat = a[ok] * k + b[ok]
        sw_min = np.full(k * k, np.inf)
        np.minimum.at(sw_min, flat, util[ok])
        sw_min[np.isinf(sw_min)] = np.nan
        order = np.lexsort((util[ok], flat))        # medians per cell from one sort
        f_sorted, u_sorted = flat[order], util[ok][order]
        starts = np.flatnonzero(np.r_[True, f_sorted[1:] != f_sorted[:-1]])
        counts = np.diff(np.r_[starts, len(f_sorted)])
        sw_med = np.full(k * k, np.nan)
        sw_med[f_sorted[starts]] = u_sorted[starts + (counts - 1) // 2]
        sw_med, sw_min = sw_med.reshape(k, k), sw_min.reshape(k, k)
    worst_i = np.argsort(util)[:WORST]
    worst = [{"src": int(src[i]), "dst": int(dst[i]), "src_label": lm.label(int(src[i])),
              "dst_label": lm.label(int(dst[i])), "gbs": float(val[i]), "util": float(util[i])}
             for i in worst_i]
    return Aggregate(doc=doc, op=op, size=size, n=n, block=block, node=node, per_node=per_node,
                     switches=names, switch_median=sw_med, switch_min=sw_min, worst=worst,
                     relative=relative, pairs=len(recs), classes=sorted(c for c, _ in cls_theo))


def _natural(s):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def title(agg) -> str:
    d = agg.doc
    sim = "SIMULATED " if d.get("simulated") else ""
    return (f"{sim}{d.get('transport') or '?'} {agg.op} {d.get('pattern') or ''} — {agg.n} nodes, "
            f"{agg.pairs} pairs measured at {human_size(agg.size)}")


def legend(agg) -> str:
    rel = (f"; no rate known for {', '.join(agg.relative)}: relative to the median pair of the class"
           if agg.relative else "")
    return f"utilisation = measured / theoretical rate{rel}. Grey = N/A (not measured)."


def render_png(agg, path=None):
    """The figure as PNG bytes (written to path when given)."""
    import numpy as np

    from .heatmap_png import mpl

    _, Figure = mpl()
    views = [(agg.node, "node x node" + (f" ({agg.block} x {agg.block} nodes per cell: the worst pair)"
                                        if agg.block > 1 else " (one cell per pair)"), "node")]
    if agg.switches:
        k = len(agg.switches)
        views += [(agg.switch_min, f"switch x switch ({k} switches): the worst pair", "switch"),
                  (agg.switch_median, "switch x switch: the median pair", "switch")]
    fig = Figure(figsize=(6.2 * len(views) + 4.5, 7.5), dpi=110)
    cmap = _cmap()
    width = 0.74 / (len(views) + 0.75)
    im = None
    for i, (m, name, what) in enumerate(views):
        ax = fig.add_axes([0.04 + i * (width + 0.035), 0.12, width, 0.72])
        im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(f"dst {what}" + (f" (x{agg.block})" if what == "node" and agg.block > 1 else ""), fontsize=8)
        ax.set_ylabel(f"src {what}", fontsize=8)
        ax.tick_params(labelsize=6)
    left = 0.04 + len(views) * (width + 0.035)
    cax = fig.add_axes([left, 0.12, 0.012, 0.72])
    fig.colorbar(im, cax=cax).set_label("utilisation", fontsize=8)
    text = "worst pairs:\n" + "\n".join(f"{w['src_label']} -> {w['dst_label']}  {w['gbs']:.3g} GB/s "
                                         f"({w['util']:.0%})" for w in agg.worst[:15])
    fig.text(left + 0.05, 0.84, text, fontsize=7, va="top", family="monospace")
    fig.suptitle(title(agg), fontsize=11)
    fig.text(0.5, 0.03, legend(agg), ha="center", fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    data = buf.getvalue()
    if path:
        from ..results.safefile import write_file     # regular files only (docs/reliability.md)
        write_file(path, data, "heatmap -o")
    return data


def _cmap():
    from .heatmap_png import mpl

    matplotlib, _ = mpl()
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("#d9d9d9")
    return cmap


def render_html(agg, path):
    from .html_base import e, page

    uri = "data:image/png;base64," + base64.b64encode(render_png(agg)).decode()
    rows = "".join(f"<tr><td>{e(w['src_label'])}</td><td>{e(w['dst_label'])}</td><td>{w['gbs']:.3g}</td>"
                   f"<td>{w['util']:.0%}</td></tr>" for w in agg.worst)
    html = page(f"comm-bench heatmap: {title(agg)}", [
        f"<h1>{e(title(agg))}</h1>", f"<img src='{uri}' alt='heatmap'>", f"<p class=meta>{e(legend(agg))}</p>",
        "<h2>Worst pairs</h2><table><tr><th>src</th><th>dst</th><th>GB/s</th><th>utilisation</th></tr>"
        f"{rows}</table>"])
    from ..results.safefile import write_file
    write_file(path, html, "heatmap -o")


def worst_lines(agg, k=5):
    return [f"  worst: {w['src_label']} -> {w['dst_label']} {w['gbs']:.3g} GB/s ({w['util']:.0%})"
            for w in agg.worst[:k]]
