"""`comm-bench select --html FILE`: "what this means for training" as one self-contained
page: the recommendation and its reasons, the candidates, the link model, and the
utilisation heatmap of every results file with pair records (the links the figures rest on)."""
from __future__ import annotations

from ..views.report_html import heat_section, e, page


def _table(head, rows, left=()):
    th = "".join(f"<th class=l>{e(h)}</th>" if h in left else f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td class=l>{e(v)}</td>" if h in left else f"<td>{e(v)}</td>"
                                    for h, v in zip(head, r)) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _num(v, spec):
    return "-" if v is None else format(v, spec)


def render(res, docs, path):
    rec, w, cl = res["recommendation"], res["workload"], res["cluster"]
    parts = [f"<h1>What this means for training: {e(w['name'])} ({w['params'] / 1e9:.3g} B params, "
             f"{e(w['precision'])}) on {cl['nodes']} x {cl['gpus_per_node']} GPUs</h1>",
             "<h2>Recommendation</h2>",
             f"<p class=\"{'ok' if rec['layout'] else 'bad'}\">{e(rec['layout'] or 'none')}"
             + (f" with {e(rec['framework'])}" if rec["framework"] else "") + "</p>",
             "<ul>" + "".join(f"<li>{e(x)}</li>" for x in rec["rationale"]) + "</ul>",
             "<h2>Candidates</h2>",
             _table(["layout", "framework", "memory/GPU GB", "comm/step s", "exposed s", "step s", "efficiency",
                     "feasible", "comm from"],
                    [[c["layout"], c["framework"], _num(c["memory_gb"], ".1f"), _num(c["comm_s"], ".4g"),
                      _num(c["exposed_comm_s"], ".4g"), _num(c["step_s"], ".4g"), _num(c["efficiency"], ".1%"),
                      "yes" if c["feasible"] else c["reason"], c["comm_source"] or "-"] for c in res["candidates"]],
                    left=("layout", "framework", "feasible", "comm from")),
             "<h2>Link model</h2>",
             _table(["class", "scope", "op", "n", "alpha us", "beta GB/s", "max rel err", "source", "from"],
                    [[r["class"], r["scope"], r["op"], r.get("n") or "-", _num(r["alpha_us"], ".3g"),
                      _num(r["beta_gbs"], ".4g"), _num(r["max_rel_err"], ".1%"), r["source"],
                      r.get("from") or r.get("note") or ""] for r in res["link_model"]],
                    left=("class", "scope", "op", "source", "from"))]
    for p, doc in docs:
        parts.append(f"<h2>Links measured in {e(p)}</h2>")
        parts.append(_heatmap(doc))
    parts.append("<p class=\"meta\">Formulas and sources: docs/selection.md.</p>")
    from ..results.safefile import write_file
    write_file(path, page(f"comm-bench select: {w['name']}", "\n".join(parts)), "--html")


def _heatmap(doc):
    from ..views.heatmap import build
    from ..results.records import pair_records
    if not pair_records(doc):
        return "<p class=\"meta\">collective records only: no pair heatmap (see the link model above)</p>"
    try:
        return heat_section(build(doc))
    except Exception as exc:  # noqa: BLE001 - the page stays useful without its picture
        return f"<p class=\"meta\">heatmap not drawn: {e(exc)}</p>"
