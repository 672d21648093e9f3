"""--mode lat --pattern pairwise: the sweep and `report` end with a latency matrix (median
one-way latency per ordered pair at the smallest size), and `heatmap` draws a latency
heatmap of the same document. A real tcp sweep over loopback, 3 ranks."""
import statistics

import pytest

from comm_bench.views.heatmap import build, legend_text
from cbtest import load_results, run_cli


@pytest.fixture(scope="module")
def lat_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lat") / "lat.json"
    p = run_cli("sweep", "-t", "tcp", "--mode", "lat", "--pattern", "pairwise", "--nprocs", "3",
                "-b", "8", "-e", "64", "-f", "8", "-n", "50", "--no-progress", "-o", out, check_rc=0)
    return p.stdout, load_results(out)


def medians_at(doc, size):
    cells = {}
    for r in doc["results"]:
        if r["size"] == size:
            cells.setdefault((r["src"], r["dst"]), []).append(r["latency_us"]["median"])
    return {k: statistics.median(v) for k, v in cells.items()}


def parse_matrix(text):
    lines = text.splitlines()
    i = max(k for k, line in enumerate(lines) if line.startswith("# median one-way latency (us) at 8 B"))
    out = {}
    for line in lines[i + 2:i + 5]:
        src, *vals = line.split()
        for dst, v in enumerate(vals):
            if v != "N/A":
                out[(int(src), dst)] = float(v)
    return out


def test_sweep_and_report_end_with_the_latency_matrix(lat_run, tmp_path):
    stdout, doc = lat_run
    want = medians_at(doc, 8)
    assert len(want) == 6
    for text in (stdout, run_cli("report", doc_path(doc, tmp_path), check_rc=0).stdout):
        assert "busbw (GB/s) at" not in text
        got = parse_matrix(text)
        assert got.keys() == want.keys()
        for k, v in want.items():
            assert got[k] == pytest.approx(v, abs=0.006)


def doc_path(doc, tmp_path):
    import json
    p = tmp_path / "lat.json"
    p.write_text(json.dumps(doc))
    return p


def test_heatmap_of_a_latency_run_draws_latencies(lat_run, tmp_path):
    _, doc = lat_run
    data = build(doc)
    assert data.metric == "lat" and data.unit == "us"
    assert [p["size"] for p in data.panels] == [8, 64]
    want = medians_at(doc, 8)
    p = data.panels[0]
    import statistics
    mid = statistics.median(want.values())      # the class's median pair (issue 42: not the fastest)
    for (s, d), v in want.items():      # by rank: axis entry i is rank i
        assert p["measured"][s, d] == pytest.approx(v)
        assert p["util"][s, d] == pytest.approx(mid / v)
    assert "cells: median one-way latency" in legend_text(data)
    out = tmp_path / "lat.png"
    proc = run_cli("heatmap", doc_path(doc, tmp_path), "-o", out, check_rc=0)
    assert "12 measured cells" in proc.stdout and out.stat().st_size > 10000
