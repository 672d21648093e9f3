"""`sweep --records jsonl`: records appended to DOC.records.jsonl by real tcp ranks, the
document holding the header only; every reader follows it."""
import json

from cbtest import assert_no_traceback, run_cli


def test_sweep_streams_records_beside_the_document(tmp_path):
    out = tmp_path / "s.json"
    run_cli("sweep", "-t", "tcp", "-N", 4, "--pattern", "matchings", "--matchings", 2, "-b", "64K", "-e", "128K",
            "-n", 3, "-w", 1, "--records", "jsonl", "-o", out, "--no-progress", timeout=180, check_rc=0)
    head = json.loads(out.read_text())
    lines = (tmp_path / "s.records.jsonl").read_text().splitlines()
    assert head["results"] == [] and head["records_file"] == "s.records.jsonl" and head["status"] == "ok"
    recs = [r for r in map(json.loads, lines) if "confirm" not in r]    # the default confirm phase's aside
    assert len(recs) == 2 * 4 * 2 and {(r["src"], r["dst"]) for r in recs} == {
        p for rnd in head_schedule(head) for p in rnd}
    rep = run_cli("report", out, check_rc=0)
    assert rep.stdout.count("->") >= 16
    v = run_cli("validate", out, "--json")
    assert v.returncode in (0, 1) and json.loads(v.stdout)["checked"]["pairs"] == 8
    run_cli("heatmap", out, "-o", tmp_path / "h.png", check_rc=0)
    # the document is the header: it did not grow with the records
    assert out.stat().st_size < 20000


def head_schedule(head):
    from comm_bench.schedule import schedule
    return [[tuple(p) for p in r] for r in schedule("matchings", head["world_size"], k=2)]


def test_jsonl_and_resume_refused(tmp_path):
    p = run_cli("sweep", "-t", "tcp", "-N", 2, "--records", "jsonl", "--resume", "-o", tmp_path / "x.json")
    assert p.returncode == 2 and "--resume" in p.stderr
    assert_no_traceback(p)


def test_finalize_rewrites_the_header_only(tmp_path):
    """A rank that died: the spawner marks the document failed; the records stay in their
    file (not copied into the document), and every reader still sees them."""
    from comm_bench.results import document as results

    out = tmp_path / "f.json"
    run_cli("simulate", "--nodes", 8, "--leaf", 4, "--confirm", 0, "-o", out, check_rc=0)
    jl = tmp_path / "f.records.jsonl"
    before = jl.read_bytes()
    results.finalize(str(out), "failed", {"rank": 3, "host": "node0003", "reason": "killed"}, authoritative=True)
    head = json.loads(out.read_text())
    assert head["status"] == "failed" and head["results"] == [] and jl.read_bytes() == before
    assert len(results.load(str(out))["results"]) == before.count(b"\n")
