"""`comm-bench compare` and `validate --baseline` on real runs (#14)."""
import copy
import json
import xml.etree.ElementTree as ET

import pytest

from cbtest import assert_no_traceback, load_results, run_cli


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tcp and an mpi sendrecv pair run at 1M and 2M, and a tcp latency run."""
    d = tmp_path_factory.mktemp("cmp")
    out = {}
    for name, args in {"tcp": ("-t", "tcp"), "mpi": ("-t", "mpi", "--op", "sendrecv", "--pattern", "pair")}.items():
        path = d / f"{name}.json"
        run_cli("sweep", *args, "--nprocs", "2", "-b", "1M", "-e", "2M", "-n", "5", "-w", "1", "-o", path,
                timeout=300, check_rc=0)
        out[name] = path
    out["lat"] = d / "lat.json"
    run_cli("sweep", "-t", "tcp", "--nprocs", "2", "--mode", "lat", "-b", "8", "-e", "16", "-n", "50",
            "-o", out["lat"], timeout=300, check_rc=0)
    return out


def scaled(path, dest, bw=1.0, lat=1.0):
    """The run as if measured faster or slower (a baseline from another day)."""
    doc = load_results(path)
    for r in doc["results"]:
        for k in ("algbw", "busbw"):
            r[k] *= bw
        r["latency_us"] = {k: v * lat for k, v in r["latency_us"].items()}
    dest.write_text(json.dumps(doc))
    return dest


def test_compare_transports_side_by_side(runs):
    p = run_cli("compare", runs["tcp"], runs["mpi"], "--json")
    out = json.loads(p.stdout)
    assert [r["transport"] for r in out["runs"]] == ["tcp", "mpi"]
    assert [(r["op"], r["mode"], r["size"]) for r in out["rows"]] == [("sendrecv", "bw", 1 << 20),
                                                                      ("sendrecv", "bw", 2 << 20)]
    tcp = load_results(runs["tcp"])["results"]
    for row, rec in zip(out["rows"], tcp):
        a, b = row["runs"]
        assert a["busbw"] == rec["busbw"] and a["p99_us"] == rec["latency_us"]["p99"]
        assert b["busbw"] > 0 and row["change"][0]["busbw"] == pytest.approx(b["busbw"] / a["busbw"] - 1)
    p = run_cli("compare", runs["tcp"], runs["mpi"])
    assert p.returncode == (1 if out["status"] == "fail" else 0), p.returncode   # two loopback runs: either
    text = p.stdout
    assert "A = tcp.json (tcp, 2 ranks), B = mpi.json (mpi, 2 ranks)" in text
    assert "B busbw%" in text and "B p99(us)" in text


def test_compare_shows_the_change(runs, tmp_path):
    base = scaled(runs["tcp"], tmp_path / "fast.json", bw=2.0)
    text = run_cli("compare", base, runs["tcp"], check_rc=1).stdout      # half the busbw: worse, exit 1
    rows = [line for line in text.splitlines() if line.strip().startswith("sendrecv")]
    assert len(rows) == 2 and all("-50.0%" in r and r.endswith(" worse") for r in rows)


@pytest.mark.parametrize("bw, lat, tolerance, rc, mark, summary", [
    (0.8, 1.0, None, 1, "worse", "# B vs A: 2 worse, 0 better, 0 within 10%"),
    (0.8, 1.0, "0.3", 0, "same", "# B vs A: 0 worse, 0 better, 2 within 30%"),
    (1.5, 1.0, None, 0, "better", "# B vs A: 0 worse, 2 better, 0 within 10%"),
])
def test_compare_marks_rows_sums_up_and_gates(runs, tmp_path, bw, lat, tolerance, rc, mark, summary):
    """SuperBench-style gating: B (the run scaled) against A; exit 1 when B is worse."""
    b = scaled(runs["tcp"], tmp_path / "b.json", bw=bw, lat=lat)
    args = ["--tolerance", tolerance] if tolerance else []
    p = run_cli("compare", runs["tcp"], b, *args, check_rc=rc)
    rows = [line for line in p.stdout.splitlines() if line.strip().startswith("sendrecv")]
    assert len(rows) == 2 and all(r.split()[-1] == mark for r in rows), rows
    lines = p.stdout.splitlines()
    assert lines[-2].startswith(summary), lines[-2]
    assert lines[-1] == ("# verdict: FAIL: B worse than A beyond 10%" if rc else
                         f"# verdict: PASS: no run worse than A beyond {float(tolerance or 0.1) * 100:g}%")
    if rc:
        assert "worst sendrecv bw" in lines[-2] and "busbw -20.0%" in lines[-2]
    out = json.loads(run_cli("compare", runs["tcp"], b, *args, "--json", check_rc=rc).stdout)
    assert out["status"] == ("fail" if rc else "pass")
    assert [c[0]["verdict"] for c in (r["change"] for r in out["rows"])] == [mark, mark]


def test_compare_latency_rows_judge_the_median(runs, tmp_path):
    slow = scaled(runs["lat"], tmp_path / "slow.json", lat=1.5)
    p = run_cli("compare", runs["lat"], slow, check_rc=1)
    assert "# B vs A: 2 worse" in p.stdout and "median latency +50.0%" in p.stdout
    run_cli("compare", slow, runs["lat"], check_rc=0)      # the other way round: better


def test_small_bandwidth_sizes_are_shown_not_judged(runs, tmp_path):
    b = scaled(runs["tcp"], tmp_path / "b.json", bw=0.5)
    p = run_cli("compare", runs["tcp"], b, "--min-size", "2M", check_rc=1)
    marks = [line.split()[-1] for line in p.stdout.splitlines() if line.strip().startswith("sendrecv")]
    assert marks == ["-", "worse"] and "# B vs A: 1 worse, 0 better, 0 within 10%" in p.stdout


@pytest.mark.parametrize("cmd, args, fragment", [
    ("compare", ["--op", "all_reduce"], "no records match --op all_reduce in tcp.json, mpi.json"),
    ("compare", ["--size", "3M"], "no records match --size 3M in tcp.json, mpi.json"),
    ("report", ["--op", "all_reduce"], "no records match --op all_reduce in tcp.json"),
    ("report", ["--size", "1M", "--pair", "1->0"], "no records match --size 1M --pair 1->0 in tcp.json"),
])
def test_a_filter_that_matches_nothing_says_so(runs, cmd, args, fragment):
    files = [runs["tcp"], runs["mpi"]] if cmd == "compare" else [runs["tcp"]]
    p = run_cli(cmd, *files, *args, check_rc=2)
    assert fragment in p.stderr and len(p.stderr.strip().splitlines()) == 1 and not p.stdout, p.stderr
    # a filter that matches prints its rows
    p = run_cli(cmd, *files, "--size", "1M")
    assert p.returncode in (0, 1) and (" 1M " in p.stdout or "1048576" in p.stdout), p.stdout


def test_baseline_regression_is_a_finding(runs, tmp_path):
    same = run_cli("validate", runs["tcp"], "--baseline", runs["tcp"], check_rc=0).stdout
    assert "2 figure(s) compared" in same and "0 worse" in same
    fast = scaled(runs["tcp"], tmp_path / "fast.json", bw=2.0)
    junit = tmp_path / "j.xml"
    p = run_cli("validate", runs["tcp"], "--baseline", fast, "--json", "--junit", junit, check_rc=1)
    rep = json.loads(p.stdout)
    assert [f["kind"] for f in rep["findings"]] == ["regression", "regression"]
    assert rep["findings"][0]["change"] == pytest.approx(-0.5)
    failed = [tc.get("name") for tc in ET.parse(junit).getroot() if tc.find("failure") is not None]
    assert failed == ["regression"]
    run_cli("validate", runs["tcp"], "--baseline", fast, "--tolerance", "0.6", check_rc=0)


def test_baseline_latency_and_collective_only_runs(runs, tmp_path):
    quick = scaled(runs["lat"], tmp_path / "quick.json", lat=0.5)
    p = run_cli("validate", runs["lat"], "--baseline", quick, check_rc=1)
    assert p.stdout.count("FINDING [regression]") == 2 and "median latency" in p.stdout
    # a latency-only run has nothing for the rules to check, but the baseline is a check
    run_cli("validate", runs["lat"], "--baseline", runs["lat"], check_rc=0)
    p = run_cli("validate", runs["lat"], check_rc=2)
    assert_no_traceback(p)


def test_baseline_bad_input(runs, tmp_path):
    p = run_cli("validate", runs["tcp"], "--baseline", runs["lat"], check_rc=2)
    assert "no op, mode and size in common" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = run_cli("validate", runs["tcp"], "--baseline", tmp_path / "missing.json", check_rc=2)
    assert "not found" in p.stderr
    p = run_cli("validate", runs["tcp"], "--baseline", runs["tcp"], "--tolerance", "-1", check_rc=2)
    assert_no_traceback(p)
    bad = copy.deepcopy(load_results(runs["tcp"]))
    bad["results"][0]["busbw"] = "fast"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    p = run_cli("compare", runs["tcp"], tmp_path / "bad.json", check_rc=2)
    assert "record 0" in p.stderr and len(p.stderr.strip().splitlines()) == 1
