"""Interactive pages (Plotly embedded: offline) for heatmap, report and compare, drawn by
a real headless browser from real runs: the screenshot's pixels show the charts (#14)."""
import os
import subprocess

import numpy as np
import pytest

from cbtest import run_cli
from test_heatmap import _browser, _read_png

pytest.importorskip("plotly")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    d = tmp_path_factory.mktemp("pages")
    runs = {}
    for name, args in {"tcp3": ("--nprocs", "3", "--pattern", "pairwise"), "pair": ("--nprocs", "2")}.items():
        runs[name] = d / f"{name}.json"
        run_cli("sweep", "-t", "tcp", *args, "-b", "64K", "-e", "256K", "-n", "5", "-w", "1", "-o", runs[name],
                timeout=300, check_rc=0)
    out = {k: d / f"{k}.html" for k in ("heatmap", "report", "compare")}
    run_cli("heatmap", runs["tcp3"], "-o", out["heatmap"], "--interactive", check_rc=0)
    run_cli("report", runs["tcp3"], "--html", out["report"], "--interactive", check_rc=0)
    run_cli("compare", runs["tcp3"], runs["pair"], "--html", out["compare"], check_rc=0)
    return out


def test_pages_are_offline_and_carry_their_controls(pages):
    for name, path in pages.items():
        html = path.read_text()
        assert html.startswith("<!DOCTYPE html>") and "Plotly.newPlot" in html, name
        assert "<script src" not in html and "<link " not in html, name   # nothing fetched
        assert html.count("plotly.js v") == 1, name       # the library once per page
    heat = pages["heatmap"].read_text()
    assert "size 64K" in heat and "size 256K" in heat      # the size selector
    assert 'id="ranks-search"' in heat and "vm:r2" in heat
    assert 'id="cmp-search"' in pages["compare"].read_text()


def _shot(page, tmp_path, height=1100):
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser: apt-get install chromium-headless-shell (or chromium)")
    shot = tmp_path / f"{page.stem}.png"
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--virtual-time-budget=10000", f"--screenshot={shot}", f"--window-size=1300,{height}",
                        f"file://{page}"], capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, HOME=str(tmp_path)))
    assert shot.exists(), (p.returncode, p.stderr[-2000:])
    return _read_png(shot)[..., :3]


def _near(img, rgb, tol=0.1):
    return int((np.abs(img - np.array(rgb) / 255.0).max(axis=-1) < tol).sum())


RDYLGN_GREEN, CURVE_0, CURVE_1 = (26, 152, 80), (190, 40, 40), (172, 189, 40)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["heatmap", "report", "compare"])
def test_browser_draws_the_charts(pages, name, tmp_path):
    img = _shot(pages[name], tmp_path, 2600 if name == "report" else 1100)
    if name in ("heatmap", "report"):
        assert _near(img, RDYLGN_GREEN, 0.2) > 2000       # coloured cells, not a blank page
    if name in ("report", "compare"):
        assert _near(img, CURVE_0) > 150                  # the first run's curve
    if name == "compare":
        assert _near(img, CURVE_1) > 150                  # and the second's, overlaid


def test_interactive_bad_input_is_one_line(pages, tmp_path):
    src = pages["heatmap"].parent / "tcp3.json"
    for args, fragment in ((["heatmap", src, "-o", tmp_path / "h.png", "--interactive"], "HTML page"),
                           (["report", src, "--interactive"], "--html FILE"),
                           (["compare", src, "--html", tmp_path / "no" / "c.html"], "cannot write")):
        p = run_cli(*args, check_rc=2)
        assert fragment in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def _dom(page, tmp_path):
    """The page's DOM after its scripts ran (what the user sees, as markup)."""
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser: apt-get install chromium-headless-shell (or chromium)")
    p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                        "--dump-dom", f"file://{page}"], capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, HOME=str(tmp_path)))
    assert "heatmap-label" in p.stdout, p.stderr[-2000:]
    return p.stdout


def test_heatmap_page_opens_on_the_largest_size_with_figures_in_grey_framed_cells(pages, tmp_path):
    """#26: the selector shows the largest size and its panel is the one drawn; each
    measured cell prints its utilisation and GB/s, each unmeasured one N/A on grey."""
    import html as htmlmod
    import json
    import re
    import statistics

    doc = json.loads((pages["heatmap"].parent / "tcp3.json").read_text())
    largest = max(r["size"] for r in doc["results"])
    gbs = {}
    for r in doc["results"]:
        if r["size"] == largest:
            gbs.setdefault((r["src"], r["dst"]), []).append(r["busbw"])
    gbs = {k: statistics.median(v) for k, v in gbs.items()}
    mid = statistics.median(gbs.values())     # loopback has no rate: relative to the median pair (*)
    want = [["N/A" if s == d else f"{100 * gbs[(s, d)] / mid:.0f}%*<br>{gbs[(s, d)]:.3g} GB/s" for d in range(3)]
            for s in range(3)]
    dom = _dom(pages["heatmap"], tmp_path)
    head = re.search(r'class="updatemenu-header".*?data-unformatted="([^"]*)"', dom).group(1)
    assert head == "size 256K" and largest == 256 << 10
    shown = [htmlmod.unescape(t) for t in re.findall(r'<g class="heatmap-label"><text[^>]*data-unformatted="([^"]*)"', dom)]
    assert shown == [c for row in want for c in row]
    img = _shot(pages["heatmap"], tmp_path, 700)
    assert _near(img, (217, 217, 217), 0.01) > 3 * 5000     # three grey N/A cells (~300 x 100 px each)
