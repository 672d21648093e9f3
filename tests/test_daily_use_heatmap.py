"""Issue 42: heatmaps that do not cry wolf. With no known link rate a cell is coloured
against its class's median pair (one lucky pair no longer paints the others red); cells
and legend carry units; --size picks the panels; the latency heatmap's labels do not
overlap. The PNG is checked by its pixels and its layout, the HTML in the headless browser."""
import json

import numpy as np
import pytest

from cbtest import assert_no_traceback, load_results, run_cli
from comm_bench.views import heatmap, heatmap_png
from test_heatmap import _read_png, make_doc, write


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    d = tmp_path_factory.mktemp("hm")
    out = {}
    for name, args in {"bw": ("-b", "1K", "-e", "1M", "-f", "32"),
                       "lat": ("--mode", "lat", "-b", "8", "-e", "32K", "-f", "8", "-n", "50")}.items():
        path = d / f"{name}.json"
        run_cli("sweep", "-t", "tcp", "--nprocs", "3", "--pattern", "pairwise", *args, "-w", "1",
                "--confirm", "0", "--no-progress", "--no-verdict", "-o", path, timeout=300, check_rc=0)
        out[name] = path
    return out


def _near(img, rgb, tol=0.06):
    return int((np.abs(img[..., :3] - np.array(rgb) / 255.0).max(axis=-1) < tol).sum())


def test_one_lucky_pair_does_not_paint_the_others_red(tmp_path):
    """4 loopback ranks, 12 pairs at 1 GB/s but one at 2: every other cell is 100% of the
    median (dark green), the lucky one 200%; before, the 11 read 50% (yellow)."""
    doc = make_doc(nodes=4, gpn=1, transport="tcp", same_hostname=True, topo=None, sizes=(1 << 20,),
                   value=lambda s, d, size, rnd: 2.0 if (s, d) == (0, 1) else 1.0,
                   device=lambda r: f"10.0.0.{r + 1}")
    data = heatmap.build(doc)
    p = data.panels[0]
    util = p["util"][~np.isnan(p["util"])]
    assert sorted(util.round(3)) == [1.0] * 11 + [2.0]
    png = tmp_path / "h.png"
    run_cli("heatmap", write(tmp_path, doc), "-o", png, check_rc=0)
    img = _read_png(png)
    import matplotlib
    green = [int(255 * c) for c in matplotlib.colormaps["RdYlGn"](1.0)[:3]]
    yellow = [int(255 * c) for c in matplotlib.colormaps["RdYlGn"](0.5)[:3]]
    cell = (img.shape[0] // 8) ** 2 // 4           # a quarter of a cell's pixels, at least
    assert _near(img, green) > 11 * cell, _near(img, green)
    assert _near(img, yellow) < cell             # the colour bar's sliver only


def test_cells_and_legend_carry_units_and_size_picks_panels(real, tmp_path):
    path = real["bw"]
    sizes = sorted({r["size"] for r in load_results(path)["results"]})
    assert sizes == [1024, 32768, 1048576]
    p = run_cli("heatmap", path, "-o", tmp_path / "h.png", "--size", "1K", "--size", "1M", check_rc=0)
    assert "2 panel(s)" in p.stdout
    data = heatmap.build(load_results(path), sizes=[1024, 1 << 20])
    assert [q["size"] for q in data.panels] == [1024, 1 << 20]
    assert "cells: % of the link rate, then the measured GB/s" in heatmap.legend_text(data)
    bad = run_cli("heatmap", path, "-o", tmp_path / "x.png", "--size", "3M", check_rc=2)
    assert_no_traceback(bad)
    assert bad.stderr.strip().splitlines() == ["comm-bench: --size 3M: op sendrecv was measured at 1K, 32K, 1M"]
    assert not (tmp_path / "x.png").exists()
    # the HTML page, as the headless browser renders it: every measured cell says GB/s
    from test_interactive import _dom
    page = tmp_path / "h.html"
    run_cli("heatmap", path, "-o", page, "--interactive", "--size", "1M", check_rc=0)
    import html as htmlmod
    import re
    shown = [htmlmod.unescape(t) for t in
             re.findall(r'<g class="heatmap-label"><text[^>]*data-unformatted="([^"]*)"', _dom(page, tmp_path))]
    measured = [t for t in shown if t != "N/A"]
    assert len(measured) == 6 and all(t.endswith(" GB/s") and "%" in t for t in measured), shown


def test_latency_heatmap_labels_do_not_overlap(real, tmp_path):
    data = heatmap.build(load_results(real["lat"]))
    assert data.metric == "lat" and len(data.panels) == 4
    fig = heatmap_png.figure(data)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_title().startswith("size ")]
    assert len(axes) == 4
    for a in axes:
        title = a.title.get_window_extent(r)
        for b in axes:
            if b is a:
                continue
            below = [b.xaxis.label.get_window_extent(r)] + [t.get_window_extent(r) for t in b.get_xticklabels()]
            assert not any(title.overlaps(x) for x in below), (a.get_title(), b.get_title())
    # cells: us and xN of the class's median pair (colour: that median / this pair)
    p = data.panels[0]
    meas = p["measured"][~np.isnan(p["measured"])]
    assert p["util"][~np.isnan(p["measured"])] == pytest.approx(np.median(meas) / meas)
    assert "times its class's median pair" in heatmap.legend_text(data)
    json.dumps(data.title())
