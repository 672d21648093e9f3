"""Self-contained HTML pages (no CDN, no external file): the heatmap page and the full
report (`comm-bench report RESULTS.json --html`): run summary, topology per host,
results tables, heatmaps (inline base64 PNG) and validate findings.

    render(doc, "report.html")        # the lead's `report --html` calls this
"""
from __future__ import annotations

import statistics

from ..results import data_error
from .html_base import e, page
from ..results.records import buffer_label

MATRIX_COLOURS = {"X": "#eeeeee", "PIX": "#c8e6c9", "PXB": "#dcedc8", "PHB": "#fff9c4",
                  "NODE": "#ffe0b2", "SYS": "#ffcdd2", "N/A": "#f5f5f5"}


def heat_section(data):
    from .heatmap import legend_text
    from .heatmap_png import png_data_uri
    from ..sizes import human_size
    import numpy as np
    parts = [f"<img class=\"heat\" id=\"heatmap\" alt=\"utilisation heatmap\" src=\"{png_data_uri(data)}\">",
             f"<p class=\"meta\">{e(legend_text(data))}</p>"]
    rows = []
    for p in data.panels:
        m, u = p["measured"], p["util"]
        ok = ~np.isnan(m)
        if not ok.any():
            continue
        for cls in sorted({c for c in p["classes"][ok]}):
            mask = ok & (p["classes"] == cls)
            vals = m[mask]
            uv = u[mask]
            rel = bool(p["relative"][mask].any())
            util = (f"{np.nanmedian(uv) * 100:.0f}%{'*' if rel else ''}" if np.isfinite(uv).any()
                    else "no comparison (no rate known, no other pair)")
            rows.append(f"<tr><td>{human_size(p['size'])}</td><td class=l>{e(cls)}</td><td>{mask.sum()}</td>"
                        f"<td>{np.min(vals):.3g}</td><td>{np.median(vals):.3g}</td><td>{np.max(vals):.3g}</td>"
                        f"<td>{util}</td></tr>")
            if len(rows) > 200:
                break
    unit, score = data.unit, ("median / this" if data.metric == "lat" else "utilisation")
    if rows:
        parts.append(f"<table><tr><th>size</th><th class=l>link class</th><th>cells</th><th>min {unit}</th>"
                     f"<th>median {unit}</th><th>max {unit}</th><th>median {score}</th></tr>"
                     + "".join(rows) + "</table>")
    worst = _worst_cells(data, 10)
    if worst:
        parts.append(f"<h3>{'Slowest pairs' if data.metric == 'lat' else 'Lowest utilisation'}</h3><table><tr>"
                     f"<th>size</th><th class=l>src</th><th class=l>dst</th>"
                     f"<th class=l>class</th><th>{unit}</th><th>{score}</th></tr>" + "".join(
                         f"<tr><td>{human_size(s)}</td><td class=l>{e(a)}</td><td class=l>{e(b)}</td>"
                         f"<td class=l>{e(c)}</td><td>{m:.3g}</td><td>{u * 100:.0f}%</td></tr>"
                         for s, a, b, c, m, u in worst) + "</table>")
    return "\n".join(parts)


def _worst_cells(data, k):
    import numpy as np
    out = []
    for p in data.panels:
        u = np.where(np.isnan(p["util"]), np.inf, p["util"])
        flat = np.argsort(u, axis=None)[:k]
        for f in flat:
            i, j = divmod(int(f), data.n)
            if np.isfinite(u[i, j]):
                out.append((p["size"], data.labels[i], data.labels[j], p["classes"][i, j],
                            float(p["measured"][i, j]), float(u[i, j])))
    out.sort(key=lambda x: x[5])
    return out[:k]


def heatmap_page(data):
    d = data.doc
    body = [f"<h1>comm-bench heatmap</h1><p class=\"meta\">{e(data.title())} &middot; "
            f"started {e(d.get('started'))} &middot; status {e(d.get('status'))}</p>", heat_section(data)]
    return page(f"comm-bench heatmap: {data.title()}", "\n".join(body))


# ----------------------------------------------------------------------------- report
def _summary(doc):
    hosts = doc.get("hosts") or []
    status = doc.get("status")
    cls = "ok" if status == "ok" else "bad"
    rows = [("transport", doc.get("transport")), ("pattern", doc.get("pattern")),
            ("world size", doc.get("world_size")), ("hosts", len(hosts)),
            ("status", f"<span class={cls}>{e(status)}</span>"), ("started", doc.get("started")),
            ("finished", doc.get("finished")), ("version", doc.get("version")),
            ("command", " ".join(map(str, doc.get("command") or [])))]
    f = doc.get("failure")
    if f:
        rows.append(("failure", f"rank {f.get('rank')} on {f.get('host')}: {f.get('reason')}"))
    err = data_error.of_document(doc)
    if err:
        rows.append(("data check", data_error.describe(err)))
    libs = ((doc.get("environment") or {}).get("libraries") or {})
    if libs:
        rows.append(("libraries", ", ".join(f"{k} {v}" for k, v in libs.items())))
    return "<table>" + "".join(
        f"<tr><th class=l>{e(k)}</th><td class=l>{v if k == 'status' else e(v)}</td></tr>" for k, v in rows) + "</table>"


def _matrix_table(m):
    labels = m.get("labels") or []
    if not labels or len(labels) > 64:
        return ""
    head = "<tr><th></th>" + "".join(f"<th>{e(x)}</th>" for x in labels) + "</tr>"
    body = []
    for i, lab in enumerate(labels):
        cells = []
        for c in m["cells"][i]:
            colour = "#bbdefb" if str(c).startswith("NV") else MATRIX_COLOURS.get(c, "#fff")
            cells.append(f"<td style=\"background:{colour}\">{e(c)}</td>")
        body.append(f"<tr><th>{e(lab)}</th>{''.join(cells)}</tr>")
    return f"<table class=mx>{head}{''.join(body)}</table>"


def _topology(doc):
    parts = []
    try:
        from ..topology import format_text
    except ImportError:
        format_text = None
    hosts = doc.get("hosts") or []
    for h in hosts[:16]:
        t = h.get("topology")
        parts.append(f"<h3>{e(h.get('host'))} (ranks {e(', '.join(map(str, h.get('ranks') or [])))})</h3>")
        if not isinstance(t, dict):
            parts.append("<p class=meta>no topology recorded</p>")
            continue
        if t.get("matrix"):
            parts.append(_matrix_table(t["matrix"]))
        if format_text is not None:
            try:
                parts.append(f"<pre>{e(format_text(t))}</pre>")
            except Exception:  # noqa: BLE001 - a malformed snapshot must not stop the report
                pass
    if len(hosts) > 16:
        parts.append(f"<p class=meta>... and {len(hosts) - 16} more hosts</p>")
    return "\n".join(parts) or "<p class=meta>no hosts</p>"


def _results_tables(doc):
    from ..sizes import human_size
    recs = [r for r in doc.get("results") or [] if isinstance(r, dict)]
    groups = {}
    for r in recs:
        groups.setdefault((r.get("transport"), r.get("op"), r.get("mode", "bw"), r.get("pattern"),
                           buffer_label(r)), []).append(r)
    out = []
    for (tr, op, mode, pat, buf), rs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        out.append(f"<h3>{e(tr)} {e(op)} ({e(mode)}, {e(pat)}{'' if buf == 'host' else ', buffer ' + e(buf)})</h3>")
        by_size = {}
        for r in rs:
            by_size.setdefault(r.get("size"), []).append(r)
        pairs = any("src" in r for r in rs)
        head = ("<tr><th>size</th><th>count</th><th class=l>type</th><th class=l>redop</th>"
                + ("<th>pairs</th><th>min busbw</th><th>median busbw</th><th>max busbw</th>" if pairs else "")
                + "<th>time (us)</th><th>algbw (GB/s)</th><th>busbw (GB/s)</th><th>#wrong</th></tr>")
        rows = []
        for size, group in sorted(by_size.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            def med(k):
                v = [x.get(k) for x in group if isinstance(x.get(k), (int, float))]
                return statistics.median(v) if v else None
            f = lambda v, p=3: "" if v is None else f"{v:.{p}g}"  # noqa: E731 - a one-line number formatter
            r0 = group[0]
            extra = ""
            if pairs:
                b = [x.get("busbw") for x in group if isinstance(x.get("busbw"), (int, float))]
                extra = (f"<td>{len(group)}</td><td>{f(min(b) if b else None)}</td><td>{f(med('busbw'))}</td>"
                         f"<td>{f(max(b) if b else None)}</td>")
            counts = [x["wrong"] for x in group if isinstance(x.get("wrong"), int)]
            wrong = sum(counts) if counts else "N/A"      # N/A: not checked (-c 0)
            rows.append(f"<tr><td>{e(human_size(size) if isinstance(size, int) else size)}</td>"
                        f"<td>{e(r0.get('count'))}</td><td class=l>{e(r0.get('dtype'))}</td>"
                        f"<td class=l>{e(r0.get('redop') or '')}</td>{extra}<td>{f(med('time_us'), 4)}</td>"
                        f"<td>{f(med('algbw'))}</td><td>{f(med('busbw'))}</td>"
                        f"<td{' class=bad' if wrong not in (0, 'N/A') else ''}>{wrong}</td></tr>")
        out.append("<table>" + head + "".join(rows) + "</table>")
        if pairs:
            out.append("<p class=meta>pair patterns: time/algbw/busbw columns are medians over pairs</p>")
    return "\n".join(out) or "<p class=meta>no records</p>"


def _curves(doc, interactive=False):
    """Bandwidth and latency vs size (comm_bench.views.plot), inline; interactive: Plotly, whose
    JavaScript this section carries for the whole page (it comes before the heatmap)."""
    import base64

    from ..errors import UsageError
    from .plot import build, png_bytes
    try:
        if interactive:
            from .interactive import FILTER_JS, curves_div
            return FILTER_JS + curves_div(*build([("", doc)]), include_js=True)
        png = png_bytes(*build([("", doc)]))
    except UsageError as exc:
        return f"<p class=meta>no curves: {e(exc)}</p>"
    return (f"<img class=\"heat\" id=\"curves\" alt=\"bandwidth and latency vs message size\" "
            f"src=\"data:image/png;base64,{base64.b64encode(png).decode()}\">")


def _findings(doc, rules=None):
    from ..errors import UsageError
    from ..validate.checks import check
    try:
        rep = check(doc, rules)
    except UsageError as exc:
        return f"<p class=meta>validate: {e(exc)}</p>"
    if not rep["findings"]:
        return "<div class=pass>validate: PASS &mdash; no findings</div>"
    return "".join(f"<div class=finding><b>{e(f['kind'])}</b>: {e(f['message'])}</div>" for f in rep["findings"])


def render(doc, out_path, rules=None, by="rank", interactive=False):
    """Write the full report for a results document (dict) to out_path (one HTML file)."""
    from ..errors import UsageError
    from .heatmap import build
    from ..results.records import latency_pair_records, pair_records
    from ..results.document import check_document
    check_document(doc)
    title = f"comm-bench report: {doc.get('transport')} {doc.get('pattern') or ''} ({doc.get('world_size')} ranks)"
    body = [f"<h1>{e(title)}</h1>", "<h2>Run</h2>", _summary(doc),
            "<h2>Findings</h2>", _findings(doc, rules),
            "<h2>Curves</h2>", _curves(doc, interactive)]   # before the heatmap: it brings Plotly
    if pair_records(doc) or latency_pair_records(doc):
        try:
            data = build(doc, by=by)
            if interactive:
                from .interactive import heatmap_div, rank_table
                heat = heatmap_div(data, include_js=False) + rank_table(data)
            else:
                heat = heat_section(data)
        except UsageError as exc:      # e.g. matplotlib missing: the rest of the report still helps
            heat = f"<p class=meta>no heatmap: {e(exc)}</p>"
        body += ["<h2>Heatmap</h2>", heat]
    body += ["<h2>Results</h2>", _results_tables(doc), "<h2>Topology</h2>", _topology(doc)]
    from ..results.safefile import write_file
    return write_file(out_path, page(title, "\n".join(body)), "--html")
