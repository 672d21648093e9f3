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
    p = run_cli("compare", runs["tcp"], runs["mpi"], "--json", check_rc=0)
    out = json.loads(p.stdout)
    assert [r["transport"] for r in out["runs"]] == ["tcp", "mpi"]
    assert [(r["op"], r["mode"], r["size"]) for r in out["rows"]] == [("sendrecv", "bw", 1 << 20),
                                                                      ("sendrecv", "bw", 2 << 20)]
    tcp = load_results(runs["tcp"])["results"]
    for row, rec in zip(out["rows"], tcp):
        a, b = row["runs"]
        assert a["busbw"] == rec["busbw"] and a["p99_us"] == rec["latency_us"]["p99"]
        assert b["busbw"] > 0 and row["change"][0]["busbw"] == pytest.approx(b["busbw"] / a["busbw"] - 1)
    text = run_cli("compare", runs["tcp"], runs["mpi"], check_rc=0).stdout
    assert "A = tcp.json (tcp, 2 ranks), B = mpi.json (mpi, 2 ranks)" in text
    assert "B busbw%" in text and "B p99(us)" in text


def test_compare_shows_the_change(runs, tmp_path):
    base = scaled(runs["tcp"], tmp_path / "fast.json", bw=2.0)
    text = run_cli("compare", base, runs["tcp"], check_rc=0).stdout
    rows = [line for line in text.splitlines() if line.strip().startswith("sendrecv")]
    assert len(rows) == 2 and all("-50.0%" in r for r in rows)


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
