"""Drawing a heatmap (comm_bench.views.heatmap's model) with matplotlib: panels, margins, the
counters panel, PNG bytes."""
from __future__ import annotations

import base64
import io
import math

from ..errors import UsageError
from .heatmap import legend_text
from ..sizes import human_size


def mpl():
    """matplotlib's Figure (Agg, no pyplot: faster import, no GUI backend)."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError("heatmaps need matplotlib: pip install matplotlib "
                         "(or pip install 'comm-bench[viz]')") from None
    from matplotlib.figure import Figure
    return matplotlib, Figure


def _group_ticks(nodes):
    """Tick positions/labels at the centre of each node's block, boundaries between."""
    bounds, centres, names = [], [], []
    start = 0
    for i in range(1, len(nodes) + 1):
        if i == len(nodes) or nodes[i] != nodes[start]:
            centres.append((start + i - 1) / 2)
            names.append(str(nodes[start]))
            if i < len(nodes):
                bounds.append(i - 0.5)
            start = i
    return bounds, centres, names


def _draw_panel(ax, data, p, cmap):
    import numpy as np
    n = data.n
    util = p["util"]
    shown = np.ma.masked_invalid(util)
    im = ax.imshow(shown, cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal")
    ax.set_title(f"size {human_size(p['size'])}" + ("" if n <= 12 else f" ({'us' if data.metric == 'lat' else '%'})"),
                 fontsize=10, pad=8)
    ax.set_xlabel("dst (receiver)", fontsize=8)
    ax.set_ylabel("src (sender)", fontsize=8)
    if n <= 32:
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        fs = 8 if n <= 12 else 6
        ax.set_xticklabels(data.labels, rotation=60, ha="right", fontsize=fs)
        ax.set_yticklabels(data.labels, fontsize=fs)
    else:
        bounds, centres, names = _group_ticks(data.nodes)
        if len(names) > 1 and len(names) <= 256:
            step = max(1, math.ceil(len(names) / 24))
            ax.set_xticks(centres[::step])
            ax.set_xticklabels(names[::step], rotation=60, ha="right", fontsize=6)
            ax.set_yticks(centres[::step])
            ax.set_yticklabels(names[::step], fontsize=6)
            if len(bounds) <= 32:
                for b in bounds:
                    ax.axhline(b, color="white", lw=0.3)
                    ax.axvline(b, color="white", lw=0.3)
        else:
            step = max(1, math.ceil(n / 24))
            ax.set_xticks(range(0, n, step))
            ax.set_yticks(range(0, n, step))
            ax.set_xticklabels([data.labels[i] for i in range(0, n, step)], rotation=60, ha="right", fontsize=6)
            ax.set_yticklabels([data.labels[i] for i in range(0, n, step)], fontsize=6)
    if n > 32:
        _draw_margins(ax, data, util, cmap)
    if n <= 32:
        meas = p["measured"]
        big = n <= 12
        for i in range(n):
            for j in range(n):
                u, m = util[i, j], meas[i, j]
                if np.isnan(m):
                    ax.text(j, i, "N/A", ha="center", va="center", fontsize=6 if big else 4, color="#555555")
                    continue
                if p["alone"][i, j]:
                    ax.text(j, i, f"{m:.3g} {data.unit}\nno comparison" if big else f"{m:.3g}", ha="center",
                            va="center", fontsize=7 if big else 5, color="#333333")
                    continue
                mark = "*" if p["relative"][i, j] else ""
                if data.metric == "lat":
                    txt = f"{m:.3g} us\nx{1 / u:.2f}" if big else f"{m:.3g}"
                else:
                    txt = f"{u * 100:.0f}%{mark}\n{m:.3g} GB/s" if big else f"{u * 100:.0f}{mark}"
                colour = "black" if 0.25 < min(u, 1.0) < 0.85 else ("white" if u <= 0.25 else "black")
                ax.text(j, i, txt, ha="center", va="center", fontsize=7 if big else 5, color=colour)
    return im


def _draw_margins(ax, data, util, cmap):
    """Large matrices: a strip beside the matrix with each row's (sender's) median
    utilisation, one above it for each column (receiver), and the worst rows named, so
    one bad rank among 1,024 stands out."""
    import numpy as np
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # all-N/A rows
        rows = np.nanmedian(util, axis=1)
        cols = np.nanmedian(util, axis=0)
    right = ax.inset_axes([1.01, 0.0, 0.035, 1.0])
    right.imshow(np.ma.masked_invalid(rows[:, None]), cmap=cmap, vmin=0, vmax=1, aspect="auto",
                 interpolation="nearest")
    top = ax.inset_axes([0.0, 1.01, 1.0, 0.035])
    top.imshow(np.ma.masked_invalid(cols[None, :]), cmap=cmap, vmin=0, vmax=1, aspect="auto",
               interpolation="nearest")
    for a in (right, top):
        a.set_xticks([])
        a.set_yticks([])
    right.set_title("row\nmedian", fontsize=6)
    finite = rows[np.isfinite(rows)]
    if finite.size:
        ref = float(np.median(finite))
        worst = [i for i in np.argsort(np.where(np.isfinite(rows), rows, np.inf))[:3]
                 if np.isfinite(rows[i]) and rows[i] < 0.75 * ref]
        for i in worst:
            right.annotate(f"{data.labels[i]} {rows[i] * 100:.0f}%", xy=(0.5, i), xycoords="data",
                           xytext=(8, 0), textcoords="offset points", fontsize=7, color="#b71c1c",
                           va="center", ha="left", arrowprops={"arrowstyle": "-", "color": "#b71c1c", "lw": 0.6})


def render_png(data, path, dpi=None):
    fig = figure(data)
    if dpi is None:
        dpi = 100 if data.n <= 64 else 150
    fig.savefig(path, dpi=dpi, format="png")
    return path


def figure(data):
    """The heatmap's matplotlib Figure (panels, colour bar, counters, legend)."""
    matplotlib, Figure = mpl()
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d9d9d9")
    k = max(1, len(data.panels))
    ncols = min(k, 2)
    nrows = math.ceil(k / ncols)
    side = 5.5 if data.n <= 12 else (6.5 if data.n <= 64 else 7.0)
    extra = 2.8 if data.counters else 0.0
    # a row's tick labels and x label (about 1.2 in under the matrix) keep clear of the title
    # of the panel below: constrained layout with room between rows
    fig = Figure(figsize=(side * ncols + 1.5, (side + 1.2) * nrows + 1.0 + extra), layout="constrained")
    fig.get_layout_engine().set(h_pad=0.12, hspace=0.06)
    gs = fig.add_gridspec(nrows + (1 if data.counters else 0), ncols,
                          height_ratios=[side] * nrows + ([extra] if data.counters else []))
    im, axes = None, []
    if not data.panels:
        ax = fig.add_subplot(gs[0, 0])
        ax.text(0.5, 0.5, "no pair measurements (N/A)", ha="center", va="center")
        ax.set_axis_off()
    for idx, p in enumerate(data.panels):
        ax = fig.add_subplot(gs[idx // ncols, idx % ncols])
        im = _draw_panel(ax, data, p, cmap)
        axes.append(ax)
    if im is not None:
        cb = fig.colorbar(im, ax=axes, shrink=0.7, pad=0.02)
        rel = any(p["relative"].any() for p in data.panels)
        alone = any(p["alone"].any() for p in data.panels)
        cb.set_label("class's median latency / this pair's (1 = as fast as the median)" if data.metric == "lat" else
                     "utilisation = measured GB/s / theoretical rate of the pair's link"
                     + ("\n(* = no rate known: measured / the median pair of its class)" if rel else "")
                     + ("\n(grey with GB/s: no rate known and no other pair: no comparison)" if alone else ""),
                     fontsize=8)
        cb.ax.tick_params(labelsize=7)
    if data.counters:
        ax = fig.add_subplot(gs[nrows, :])
        _draw_counters(ax, data.counters)
    fig.suptitle(data.title(), fontsize=11)
    import textwrap     # the legend in lines as wide as the figure (about 16 characters an inch at 7 pt)
    fig.supxlabel(textwrap.fill(legend_text(data), int(fig.get_figwidth() * 16)), fontsize=7)
    return fig


def _draw_counters(ax, series):
    """Utilisation (%) where every series has its link's rate; else GB/s for all, so one
    axis never mixes the two units."""
    t0 = min(s["t"][0] for s in series)
    util = all(s["util"] for s in series)
    for s in series[:16]:
        y = [v * 100 for v in s["util"]] if util else s["gbs"]
        ax.plot([t - t0 for t in s["t"]], y, lw=1, marker="." if len(s["t"]) < 200 else None, ms=3,
                label=s["label"])
    ax.set_xlabel("time (s; per-record counter deltas sit at the run's cumulative measuring time)", fontsize=8)
    ax.set_ylabel("utilisation (%)" if util else "GB/s (counter rate; not every link's rate is known)",
                  fontsize=8)
    ax.set_title("counter-based utilisation over time" + (" (first 16 series)" if len(series) > 16 else ""),
                 fontsize=9)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6, ncol=4, loc="upper right")


def to_png_bytes(data, dpi=None):
    buf = io.BytesIO()
    render_png(data, buf, dpi=dpi)
    return buf.getvalue()


def png_data_uri(data, dpi=None):
    return "data:image/png;base64," + base64.b64encode(to_png_bytes(data, dpi)).decode()
