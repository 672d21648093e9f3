"""A heatmap file from a results document: load, build the model, write the PNG or the
HTML page (static or interactive). What `comm-bench heatmap` runs."""
from __future__ import annotations

import os
import time

from ..errors import UsageError
from .heatmap import BY_CHOICES, build, legend_text
from .heatmap_large import aggregate
from .heatmap_png import to_png_bytes
from ..results.document import check_document, load_measured as load_results
from ..results.safefile import write_file


def render_html(data, path, interactive=False):
    if interactive:
        from .interactive import heatmap_div, page, rank_table
        html = page(f"comm-bench heatmap: {data.title()}", ["<h1>comm-bench heatmap</h1>", heatmap_div(data),
                                                            f"<p class=meta>{legend_text(data)}</p>", rank_table(data)])
    else:
        from .report_html import heatmap_page
        html = heatmap_page(data)
    return write_file(path, html, "heatmap -o")


def make(results, out, by="rank", op=None, interactive=False, sizes=None):
    """Load, build and render (PNG or HTML by the extension). Returns a summary dict."""
    t0 = time.monotonic()
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".png", ".html", ".htm"):
        raise UsageError(f"-o {out}: give a .png or .html file name")
    if interactive and ext == ".png":
        raise UsageError(f"--interactive makes an HTML page: give -o FILE.html (not {out})")
    doc, cells = read(results, by) if isinstance(results, str) else (results, None)
    if isinstance(results, dict):
        check_document(doc)
    from ..results.records import one_buffer
    one_buffer(doc, "heatmap", cells.labels_seen if cells else ())      # one cell is one link measured one way
    if cells and aggregate(doc, cells.count + len(doc["results"])):
        doc, cells = load_results(results), None       # the aggregated view reads records: whole
    if by == "switch" or (cells is None and aggregate(doc)):
        return _make_large(doc, out, ext, op, t0)
    data = build(doc, by=by, op=op, cells=cells, sizes=sizes)
    measured = int(sum((~_isnan(p["measured"])).sum() for p in data.panels))
    if not data.panels or not measured:       # a heatmap of nothing is bad input, not "0 panel(s)", exit 0
        where = f"'{results}'" if isinstance(results, str) else "the results"
        raise UsageError(f"nothing to draw: {where} holds no pair record with a measured rate"
                         f"{f' of op {op}' if op else ''} (a heatmap shows pair patterns: sweep with "
                         "--pattern pairwise)")
    if ext == ".png":
        write_file(out, to_png_bytes(data), "heatmap -o")
    else:
        render_html(data, out, interactive)
    return {"out": out, "cells": data.n, "panels": len(data.panels),
            "measured_pairs": measured,
            "seconds": round(time.monotonic() - t0, 3)}


def read(path, by):
    """(doc, cells): a large document streamed, its plain pair records kept as Cells, the
    others in doc["results"]; a small one (or --by switch) read whole (cells None)."""
    from ..validate.pair_obs import stream_with
    from .heatmap_cells import Cells

    return stream_with(path, lambda lm: Cells(lm, by) if by in BY_CHOICES else None)


def _make_large(doc, out, ext, op, t0):
    """The aggregated heatmap (heatmap_large.py) of a large run or a --by switch view."""
    from . import heatmap_large as large

    agg = large.build(doc, op=op)
    try:
        if ext == ".png":
            large.render_png(agg, out)
        else:
            large.render_html(agg, out)
    except OSError as exc:
        raise UsageError(f"cannot write '{out}': {exc.strerror}") from None
    return {"out": out, "cells": agg.node.shape[0], "panels": 2 if agg.switches else 1,
            "measured_pairs": agg.pairs, "seconds": round(time.monotonic() - t0, 3),
            "aggregated": {"nodes": agg.n, "block": agg.block, "switches": len(agg.switches)},
            "worst": large.worst_lines(agg)}


def _isnan(a):
    import numpy as np
    return np.isnan(a)
