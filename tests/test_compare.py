"""`comm-bench compare` and `validate --baseline` on real runs (#14), and on crafted ones
where a verdict must not depend on this machine's noise (#39: a change is worse only
when the data support it; tests/test_compare_noise.py)."""
import copy
import json
import xml.etree.ElementTree as ET

import pytest

from cbtest import assert_no_traceback, load_results, run_cli
from test_compare_noise import SIZES, crafted


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


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    """Crafted runs with 5 judged sizes (1M-16M; lat: 8 B-128 B), 10% per-iteration
    spread: enough sizes for the signed-rank test to reach 0.95, little noise per row."""
    d = tmp_path_factory.mktemp("five")
    out = {"tcp": d / "tcp5.json", "lat": d / "lat5.json", "tcp6": d / "tcp6.json"}
    out["tcp"].write_text(json.dumps(crafted(lambda s: 4.0)))
    out["tcp6"].write_text(json.dumps(crafted(lambda s: 4.0, sizes=SIZES + (32 << 20,))))
    out["lat"].write_text(json.dumps(crafted(lambda s: 5.0, sizes=(8, 16, 32, 64, 128), mode="lat")))
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
    assert "# A = tcp.json (tcp, 2 ranks)\n# B = mpi.json (mpi, 2 ranks)" in text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    wide = run_cli("compare", runs["tcp"], runs["mpi"], "--wide").stdout       # every figure of every run
    assert "A = tcp.json (tcp, 2 ranks), B = mpi.json (mpi, 2 ranks)" in wide
    assert "B busbw%" in wide and "B p99(us)" in wide


def unwrapped(text):
    """compare's comment lines, wrapped to 80 columns ("#   " goes on), as one line each."""
    out = []
    for line in text.splitlines():
        if line.startswith("#   ") and out:
            out[-1] += " " + line[4:]
        else:
            out.append(line)
    return out


def test_compare_shows_the_change(five, tmp_path):
    base = scaled(five["tcp"], tmp_path / "fast.json", bw=2.0)
    text = run_cli("compare", base, five["tcp"], check_rc=1).stdout      # half the busbw: worse, exit 1
    rows = [line for line in text.splitlines() if line.strip().startswith("sendrecv")]
    assert len(rows) == 5 and all("-50.0%" in r and r.endswith(" 0.97   worse") for r in rows), rows


@pytest.mark.parametrize("bw, lat, tolerance, rc, mark, summary", [
    (0.8, 1.0, None, 1, "worse", "# B vs A: 5 worse, 0 better, 0 within 10%, 0 within noise"),
    (0.8, 1.0, "0.3", 0, "same", "# B vs A: 0 worse, 0 better, 5 within 30%, 0 within noise"),
    (1.5, 1.0, None, 0, "better", "# B vs A: 0 worse, 5 better, 0 within 10%, 0 within noise"),
])
def test_compare_marks_rows_sums_up_and_gates(five, tmp_path, bw, lat, tolerance, rc, mark, summary):
    """SuperBench-style gating: B (the run scaled) against A; exit 1 when B is worse."""
    b = scaled(five["tcp"], tmp_path / "b.json", bw=bw, lat=lat)
    args = ["--tolerance", tolerance] if tolerance else []
    p = run_cli("compare", five["tcp"], b, *args, check_rc=rc)
    rows = [line for line in p.stdout.splitlines() if line.strip().startswith("sendrecv")]
    assert len(rows) == 5 and all(r.split()[-1] == mark for r in rows), rows
    lines = unwrapped(p.stdout)
    assert lines[-3].startswith(summary), lines[-3]
    tol = f"{float(tolerance or 0.1) * 100:g}%"
    assert lines[-1] == ("# verdict: FAIL: B worse than A beyond 10% at confidence 0.95" if rc else
                         f"# verdict: PASS: no run worse than A beyond {tol} at confidence 0.95")
    if rc:
        assert "worst sendrecv bw" in lines[-3] and "busbw -20.0% (worse, confidence 0.97)" in lines[-3]
    out = json.loads(run_cli("compare", five["tcp"], b, *args, "--json", check_rc=rc).stdout)
    assert out["status"] == ("fail" if rc else "pass")
    assert [c[0]["verdict"] for c in (r["change"] for r in out["rows"])] == [mark] * 5


def test_compare_latency_rows_judge_the_median(five, tmp_path):
    slow = scaled(five["lat"], tmp_path / "slow.json", lat=1.5)
    p = run_cli("compare", five["lat"], slow, check_rc=1)
    text = "\n".join(unwrapped(p.stdout))
    assert "# B vs A: 5 worse" in text and "median latency +50.0%" in text
    run_cli("compare", slow, five["lat"], check_rc=0)      # the other way round: better


def test_small_bandwidth_sizes_are_shown_not_judged(five, tmp_path):
    b = scaled(five["tcp6"], tmp_path / "b.json", bw=0.5)
    p = run_cli("compare", five["tcp6"], b, "--min-size", "2M", check_rc=1)
    marks = [line.split()[-1] for line in p.stdout.splitlines() if line.strip().startswith("sendrecv")]
    assert marks == ["-"] + ["worse"] * 5 and "# B vs A: 5 worse, 0 better, 0 within 10%" in p.stdout


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


def test_baseline_regression_is_a_finding(runs, five, tmp_path):
    same = run_cli("validate", runs["tcp"], "--baseline", runs["tcp"], check_rc=0).stdout
    assert "2 figure(s) compared" in same and "0 worse" in same
    fast = scaled(five["tcp"], tmp_path / "fast.json", bw=2.0)
    junit = tmp_path / "j.xml"
    p = run_cli("validate", five["tcp"], "--baseline", fast, "--json", "--junit", junit, check_rc=1)
    rep = json.loads(p.stdout)
    assert [f["kind"] for f in rep["findings"]] == ["regression"] * 5
    assert rep["findings"][0]["change"] == pytest.approx(-0.5)
    assert rep["findings"][0]["confidence"] == pytest.approx(0.9688, abs=1e-4)
    failed = [tc.get("name") for tc in ET.parse(junit).getroot() if tc.find("failure") is not None]
    assert failed == ["regression"]
    run_cli("validate", five["tcp"], "--baseline", fast, "--tolerance", "0.6", check_rc=0)


def test_baseline_latency_and_collective_only_runs(runs, five, tmp_path):
    quick = scaled(five["lat"], tmp_path / "quick.json", lat=0.5)
    p = run_cli("validate", five["lat"], "--baseline", quick, check_rc=1)
    assert p.stdout.count("FINDING [regression]") == 5 and "median latency" in p.stdout
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
