"""Interactive HTML pages (Plotly; its JavaScript is embedded once per page, so a page
works offline and from a file): curves with exact figures on hover, heatmaps with a size
selector and hover per cell, a searchable per-rank table for thousands of ranks.

    html = page("title", [curves_div(curves, rates), heatmap_div(data), rank_table(data)])

Only the first Plotly figure of a page carries the library (include_js).
"""
from __future__ import annotations

import json
import math

from ..errors import UsageError
from .html_base import e, page as html_page
from ..sizes import human_size

HOVER_CELLS_MAX = 256 * 256   # beyond this, hover shows indices + values (labels in the table)


def _go():
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        raise UsageError("interactive pages need plotly: pip install plotly "
                         "(or pip install 'comm-bench[viz]')") from None
    return go, make_subplots


def _size_axis(sizes):
    ticks = sorted({1 << int(round(math.log2(s))) for s in sizes if s > 0})
    step = max(1, len(ticks) // 12)
    return dict(type="log", tickvals=ticks[::step], ticktext=[human_size(t) for t in ticks[::step]],
                title="message size (bytes)")


def _nan_none(values):
    return [None if v is None or v != v else v for v in values]


def curves_div(curves, rates, include_js=True, div_id="curves"):
    """Bandwidth and latency vs size (comm_bench.views.plot.build's curves), one legend entry
    per curve toggling both panels."""
    go, make_subplots = _go()
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "bus bandwidth (GB/s, 1 GB = 1e9 B; pairs: median)", "time per operation (us)"))
    all_sizes = set()
    for i, ((run, label), c) in enumerate(sorted(curves.items())):
        name = f"{run}: {label}" if run else label
        all_sizes.update(c["sizes"])
        text = [human_size(s) for s in c["sizes"]]
        colour = f"hsl({(i * 67) % 360},65%,45%)"
        if c["mode"] == "bw" and any(v == v for v in c["gbs"]):
            fig.add_trace(go.Scatter(
                x=c["sizes"], y=_nan_none(c["gbs"]), mode="lines+markers", name=name, legendgroup=name,
                line={"color": colour}, text=text,
                customdata=list(zip(_nan_none(c["gbs_lo"]), _nan_none(c["gbs_hi"]))),
                hovertemplate="%{text}: %{y:.4g} GB/s (pairs %{customdata[0]:.4g}..%{customdata[1]:.4g})"
                              "<extra>" + name + "</extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=c["sizes"], y=_nan_none(c["us"]), mode="lines+markers", name=name, legendgroup=name,
            showlegend=not (c["mode"] == "bw" and any(v == v for v in c["gbs"])),
            line={"color": colour, "dash": "solid" if c["mode"] == "lat" else "dash"}, text=text,
            hovertemplate="%{text}: %{y:.4g} us<extra>" + name + "</extra>"), row=1, col=2)
    for cls, gbs in sorted(rates.items()):
        fig.add_hline(y=gbs, line_dash="dash", line_color="black", row=1, col=1,
                      annotation_text=f"{cls} link rate {gbs:g} GB/s", annotation_position="top left")
    axis = _size_axis(all_sizes or {1})
    fig.update_xaxes(**axis)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_layout(height=480, margin={"t": 40, "l": 50, "r": 20, "b": 50}, template="plotly_white",
                      legend={"orientation": "h", "y": -0.2})
    return fig.to_html(full_html=False, include_plotlyjs=include_js, div_id=div_id)


NA_GREY = "#d9d9d9"    # unmeasured cells: the plot's background shows through (as in the PNG)
CELL_TEXT_MAX = 32     # ranks per axis up to which every cell prints its figures


def _cell_text(data, p, i, j):
    """A cell's figures as the PNG prints them: utilisation % and GB/s (latency: us and xN)."""
    m, u = p["measured"][i, j], p["util"][i, j]
    if m != m:
        return "N/A"
    if u != u:
        return f"{m:.3g} {data.unit}"
    if data.metric == "lat":
        return f"{m:.3g} us<br>x{1 / u:.2f}"
    return f"{u * 100:.0f}%{'*' if p['relative'][i, j] else ''}<br>{m:.3g} GB/s"


def heatmap_div(data, include_js=True, div_id="heatmap"):
    """One heatmap per size panel of heatmap.build's data, a selector between them that
    opens on the largest size (small sizes are latency-bound: a healthy link reads low
    there); colour = utilisation (%) (latency: the class's median pair / this pair), each cell's
    figures printed in it up to CELL_TEXT_MAX ranks, unmeasured cells grey, hover = src
    -> dst, figures, link class."""
    go, _ = _go()
    n = data.n
    detail = n * n <= HOVER_CELLS_MAX
    lat = data.metric == "lat"
    score = "median / this" if lat else "utilisation"
    fig = go.Figure()
    last = len(data.panels) - 1
    for k, p in enumerate(data.panels):
        util = p["util"] * 100
        z = [[None if v != v else float(v) for v in row] for row in util]
        meas = p["measured"]
        if detail:
            text = [[f"{data.labels[i]} -> {data.labels[j]}<br>"
                     + ("not measured" if meas[i, j] != meas[i, j] else
                        f"{meas[i, j]:.4g} {data.unit}, " + (f"{score} {util[i, j]:.0f}%"
                                                             f"{'*' if p['relative'][i, j] else ''}"
                                                             if util[i, j] == util[i, j] else "no comparison")
                        + f"<br>{p['classes'][i, j]}")
                     for j in range(n)] for i in range(n)]
            hover = "%{hovertext}<extra>" + human_size(p["size"]) + "</extra>"
        else:
            text, hover = None, "src %{y} -> dst %{x}: %{z:.0f}%<extra></extra>"
        cells = {}
        if n <= CELL_TEXT_MAX:
            # an unmeasured cell (z None) is a gap: no text, the grey background shows
            cells = dict(text=[[_cell_text(data, p, i, j) for j in range(n)] for i in range(n)],
                         texttemplate="%{text}", textfont={"size": 11 if n <= 12 else 8})
        fig.add_trace(go.Heatmap(z=z, x=list(range(n)), y=list(range(n)), hovertext=text, hovertemplate=hover,
                                 colorscale="RdYlGn", zmin=0, zmax=100, visible=k == last, hoverongaps=False,
                                 colorbar={"title": f"{score} %"}, name=human_size(p["size"]), **cells))
    buttons = [dict(label=f"size {human_size(p['size'])}", method="update",
                    args=[{"visible": [i == k for i in range(len(data.panels))]}])
               for k, p in enumerate(data.panels)]
    ticks = dict(tickmode="array", tickvals=list(range(n)), ticktext=data.labels) if n <= 64 else {}
    fig.update_layout(
        title=data.title(), height=max(520, min(1100, 22 * n + 200)), template="plotly_white",
        plot_bgcolor=NA_GREY,
        updatemenus=[dict(buttons=buttons, active=last, direction="down", x=1, xanchor="right", y=1.08,
                          yanchor="bottom")] if len(buttons) > 1 else [],
        xaxis=dict(title="dst (receiver)", showgrid=False, zeroline=False, **ticks),
        yaxis=dict(title="src (sender)", autorange="reversed", showgrid=False, zeroline=False, **ticks),
        margin={"t": 90, "l": 120, "r": 20, "b": 120})
    return fig.to_html(full_html=False, include_plotlyjs=include_js, div_id=div_id)


def rank_table(data, table_id="ranks"):
    """Each axis entry's median utilisation as sender and receiver at the largest size,
    with a search box (label or host substring) that filters the rows."""
    import warnings

    import numpy as np
    if not data.panels:
        return ""
    util = data.panels[-1]["util"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out_med, in_med = np.nanmedian(util, axis=1), np.nanmedian(util, axis=0)
    pct = lambda v: "" if v != v else f"{v * 100:.0f}%"  # noqa: E731 - a one-line formatter
    score = "median / this" if data.metric == "lat" else "util."
    order = np.argsort(np.where(np.isfinite(out_med), out_med, np.inf))
    rows = "".join(f"<tr><td class=l>{e(data.labels[i])}</td><td class=l>{e(data.nodes[i])}</td>"
                   f"<td>{pct(out_med[i])}</td><td>{pct(in_med[i])}</td></tr>" for i in order)
    return (f"<h3>Per {e(data.by)} at {human_size(data.panels[-1]['size'])} (lowest first)</h3>"
            f"<input id=\"{table_id}-search\" placeholder=\"search rank / GPU / NIC / host\" size=40 "
            f"oninput=\"cbFilter('{table_id}', this.value)\">"
            f"<table id=\"{table_id}\"><tr><th class=l>{e(data.by)}</th><th class=l>host</th>"
            f"<th>median {score} as sender</th><th>median {score} as receiver</th></tr>{rows}</table>")


FILTER_JS = """<script>
function cbFilter(id, q) {
  q = q.toLowerCase();
  var rows = document.getElementById(id).rows;
  for (var i = 1; i < rows.length; i++)
    rows[i].style.display = rows[i].textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none";
}
</script>"""


def page(title, sections):
    return html_page(title, FILTER_JS + "\n" + "\n".join(sections))


def compare_table(result):
    """comm_bench.validate.compare's rows as an HTML table with a search box."""
    from ..validate.compare import header_cells, row_cells
    head = "".join(f"<th>{e(c)}</th>" for c in header_cells([r["name"] for r in result["runs"]]))
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row_cells(row, (".4g",) * 3)) + "</tr>"
                   for row in result["rows"])
    data = json.dumps(result).replace("</", "<\\/")     # JSON inside <script>: no closing tag
    return ("<input id=\"cmp-search\" placeholder=\"search op / size\" size=30 "
            "oninput=\"cbFilter('cmp', this.value)\">"
            f"<table id=\"cmp\"><tr>{head}</tr>{body}</table>"
            f"<script type=\"application/json\" id=\"cmp-data\">{data}</script>")


def write_compare_page(named_docs, result, path):
    from .plot import build
    title = "comm-bench compare: " + " vs ".join(name for name, _ in named_docs)
    from ..validate.compare import summary_lines
    letters = [name for name, _ in named_docs]
    verdict = "".join(f"<p class=meta>{e(line.lstrip('# '))}</p>" for line in summary_lines(result, letters))
    html = page(title, [f"<h1>{title}</h1>", curves_div(*build(named_docs)), verdict, compare_table(result)])
    from ..results.safefile import write_file
    write_file(path, html, "compare --html")
