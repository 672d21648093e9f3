"""What users read after real runs: heatmap labels, single-pair and collective-only
runs, latency tables, MPI output without terminal codes (issue #14)."""
import json
import re

import pytest

from cbtest import assert_no_traceback, load_results, run_cli
from comm_bench.views import heatmap

SMALL = ("-n", "5", "-w", "1")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Real local runs, each made once: {name: (results path, sweep's stdout)}."""
    d = tmp_path_factory.mktemp("ux")
    plans = {
        "tcp3": ("-t", "tcp", "--nprocs", "3", "--pattern", "pairwise", "-b", "64K", "-e", "128K", *SMALL),
        "pair": ("-t", "tcp", "--nprocs", "2", "-b", "1M", "-e", "1M", *SMALL),
        "gloo": ("-t", "gloo", "--nprocs", "2", "--op", "all_reduce", "-b", "1M", "-e", "1M", *SMALL),
        "lat": ("-t", "tcp", "--nprocs", "2", "--mode", "lat", "-b", "8", "-e", "16", "-n", "30", "-w", "2"),
    }
    out = {}

    def get(name):
        if name not in out:
            path = d / f"{name}.json"
            p = run_cli("sweep", *plans[name], "-o", path, timeout=300, check_rc=0)
            out[name] = (str(path), p.stdout)
        return out[name]
    return get


def test_tcp_heatmap_by_rank_names_every_rank(runs, tmp_path):
    """Every tcp rank of a host has the same address: labels say which rank it is."""
    path, _ = runs("tcp3")
    data = heatmap.build(load_results(path), by="rank")
    assert len(set(data.labels)) == 3 and all(re.fullmatch(r".+:r[012]", x) for x in data.labels)
    page = tmp_path / "h.html"
    run_cli("heatmap", path, "-o", page, "--by", "rank", check_rc=0)
    lowest = page.read_text().split("Lowest utilisation")[1]
    assert "127.0.0.1" not in lowest
    assert len(set(re.findall(r"<td class=l>([^<]*:r\d)</td>", lowest))) == 3


def test_single_pair_says_no_comparison_exists(runs, tmp_path):
    """One loopback pair, no rate known: nothing to be relative to, so no 100%*."""
    path, _ = runs("pair")
    data = heatmap.build(load_results(path))
    (p,) = data.panels
    assert p["alone"].sum() == 1 and not p["relative"].any()
    assert "no comparison" in heatmap.legend_text(data)
    page = tmp_path / "h.html"
    run_cli("heatmap", path, "-o", page, check_rc=0)
    html = page.read_text()
    assert "no comparison" in html and "100%*" not in html
    run_cli("heatmap", path, "-o", tmp_path / "h.png", check_rc=0)


def test_collective_only_run_heatmap_and_validate_refuse(runs, tmp_path):
    path, _ = runs("gloo")
    p = run_cli("heatmap", path, "-o", tmp_path / "g.png", check_rc=2)
    assert_no_traceback(p)
    assert len(p.stderr.strip().splitlines()) == 1 and "collective records only" in p.stderr
    assert not (tmp_path / "g.png").exists()
    p = run_cli("validate", path, check_rc=2)
    assert len(p.stderr.strip().splitlines()) == 1 and "nothing to check" in p.stderr
    assert "PASS" not in p.stdout


def test_latency_table_shows_latency_statistics(runs):
    """-n 30: p99 and p99.9 would be the maximum, so they are left out (said once), the
    statistics that 30 samples give are there (issue 42)."""
    path, stdout = runs("lat")
    report = run_cli("report", path, check_rc=0).stdout
    for text in (stdout, report):
        head = next(line for line in text.splitlines() if line.startswith("#") and "median" in line)
        cols = head.lstrip("#").split()
        for c in ("min", "median", "avg", "max", "stdev"):
            assert c in cols, (c, head)
        assert "p99" not in cols and "p99.9" not in cols and "algbw" not in cols
        assert text.count("p99, p99.9 left out: with -n 30 each is the max") == 1
    rec = load_results(path)["results"][0]
    row = next(line for line in stdout.splitlines() if line.strip().startswith("8 "))
    assert f"{rec['latency_us']['median']:.2f}" in row.split()


def test_bandwidth_table_names_the_maximum_as_such(runs):
    """-n 5: the tail column is the largest sample, and its header says max, not p99."""
    path, stdout = runs("pair")
    head = next(line for line in stdout.splitlines() if line.startswith("#") and "busbw" in line).split()
    assert "max" in head and "p99" not in head and "samples" not in stdout
    rec = load_results(path)["results"][0]
    row = next(line for line in stdout.splitlines() if line.strip().startswith("1048576 "))
    assert f"{rec['latency_us']['max']:.2f}" in row.split()


def test_mpi_progress_codes_never_reach_redirected_output(tmp_path):
    """Open MPI gives each rank a pseudo-terminal even when mpirun's output is a pipe."""
    p = run_cli("sweep", "-t", "mpi", "--nprocs", "2", "-b", "8", "-e", "64", *SMALL, "-o",
                tmp_path / "m.json", timeout=300, check_rc=0)
    assert "\x1b" not in p.stdout and "\x1b" not in p.stderr
    assert p.stdout.count("all_reduce") >= 1 and json.loads((tmp_path / "m.json").read_text())["status"] == "ok"


# ----------------------------------------------------------------------------- plot
def _pixels_near(path, rgb, tol=0.08):
    import matplotlib.image as mpimg
    import numpy as np
    img = mpimg.imread(str(path))[..., :3]
    return int((np.abs(img - np.array(rgb) / 255.0).max(axis=-1) < tol).sum())


TAB = {"C0": (31, 119, 180), "C1": (255, 127, 14), "C2": (44, 160, 44)}


def test_plot_overlays_runs_ops_and_modes(runs, tmp_path):
    out = tmp_path / "p.png"
    p = run_cli("plot", runs("pair")[0], runs("gloo")[0], runs("lat")[0], "-o", out, check_rc=0)
    assert "3 curve(s)" in p.stdout
    for name, rgb in TAB.items():           # one colour per curve: each was drawn
        assert _pixels_near(out, rgb) > 100, name
    p = run_cli("plot", runs("gloo")[0], "--op", "all_reduce", "-o", out, check_rc=0)
    assert "1 curve(s)" in p.stdout


def test_plot_draws_the_links_theoretical_rate(tmp_path):
    from comm_bench.views import plot
    from test_heatmap import make_doc, write
    doc = make_doc(nodes=1, gpn=2, sizes=(1 << 16, 1 << 20, 1 << 24))
    curves, rates = plot.build([("d", doc)])
    assert rates == {"nvlink": 450.0}
    ((key, c),) = curves.items()
    assert c["sizes"] == [1 << 16, 1 << 20, 1 << 24] and all(360 < g < 380 for g in c["gbs"])
    p = run_cli("plot", write(tmp_path, doc), "-o", tmp_path / "r.png", check_rc=0)
    assert "nvlink 450 GB/s" in p.stdout


@pytest.mark.parametrize("args, fragment", [
    (["-o", "x.pdf"], ".png file name"), (["-o", "x.png", "--op", "nope"], "nothing to plot"),
])
def test_plot_bad_input_is_one_line(runs, tmp_path, args, fragment):
    p = run_cli("plot", runs("pair")[0], *args, cwd=tmp_path, check_rc=2)
    assert fragment in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert_no_traceback(run_cli("plot", tmp_path / "missing.json", "-o", "x.png", cwd=tmp_path, check_rc=2))


def test_report_html_has_the_curves(runs, tmp_path):
    page = tmp_path / "r.html"
    run_cli("report", runs("gloo")[0], "--html", page, check_rc=0)
    html = page.read_text()
    assert 'id="curves"' in html and "data:image/png;base64," in html


def test_short_options_that_mean_otherwise_in_nccl_tests_say_so():
    """nccl-tests' -t is threads, -o the reduction op, -N run cycles: comm-bench's own
    letters keep their meaning, and --help says they differ."""
    text = " ".join(run_cli("sweep", "--help", check_rc=0).stdout.split())
    text = re.sub(r"(\w)- (\w)", r"\1-\2", text)          # click wraps at hyphens
    for flag, theirs in (("-t", "threads per process"), ("-N", "run cycles")):
        assert f"Not nccl-tests' {flag} ({theirs})" in text, flag
    # -o takes nccl-tests' reduction names too (tests/test_nccl_tests_habits.py)
    assert "nccl-tests' -o is the reduction op: -o sum|prod|max|min|avg is taken as --redop" in text
