"""A heatmap file from a results document: load, build the model, write the PNG or the
HTML page (static or interactive). What `comm-bench heatmap` runs."""
from __future__ import annotations

import os
import time

from .errors import UsageError
from .heatmap import build, legend_text
from .heatmap_png import to_png_bytes
from .results import check_document, load as load_results
from .safefile import write_file


def render_html(data, path, interactive=False):
    if interactive:
        from .interactive import heatmap_div, page, rank_table
        html = page(f"comm-bench heatmap: {data.title()}", ["<h1>comm-bench heatmap</h1>", heatmap_div(data),
                                                            f"<p class=meta>{legend_text(data)}</p>", rank_table(data)])
    else:
        from .report_html import heatmap_page
        html = heatmap_page(data)
    return write_file(path, html, "heatmap -o")


def make(results, out, by="rank", op=None, interactive=False):
    """Load, build and render (PNG or HTML by the extension). Returns a summary dict."""
    t0 = time.monotonic()
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".png", ".html", ".htm"):
        raise UsageError(f"-o {out}: give a .png or .html file name")
    if interactive and ext == ".png":
        raise UsageError(f"--interactive makes an HTML page: give -o FILE.html (not {out})")
    doc = load_results(results) if isinstance(results, str) else results
    if isinstance(results, dict):
        check_document(doc)
    from .records import one_buffer
    one_buffer(doc, "heatmap")      # one cell is one link measured one way
    data = build(doc, by=by, op=op)
    if ext == ".png":
        write_file(out, to_png_bytes(data), "heatmap -o")
    else:
        render_html(data, out, interactive)
    return {"out": out, "cells": data.n, "panels": len(data.panels),
            "measured_pairs": int(sum((~_isnan(p["measured"])).sum() for p in data.panels)),
            "seconds": round(time.monotonic() - t0, 3)}


def _isnan(a):
    import numpy as np
    return np.isnan(a)
