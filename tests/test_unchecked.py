"""Unchecked reads unchecked everywhere (issue 26 item 1): `-c 0` gives N/A in the tables,
null in JSON, an empty CSV cell and no Prometheus series, and every reader takes such a
document; the check is on by default, as in nccl-tests."""
import json

from cbtest import assert_no_traceback, load_results, run_cli

SWEEP = ["sweep", "-t", "tcp", "--nprocs", "3", "--pattern", "pairwise", "-b", "4K", "-e", "16K", "-f", "4",
         "-n", "3", "-w", "1", "--no-progress"]


def test_unchecked_reads_unchecked_everywhere(tmp_path):
    out = tmp_path / "r.json"
    p = run_cli(*SWEEP, "-c", "0", "-o", out, timeout=240, check_rc=0)
    rows = [ln for ln in p.stdout.splitlines() if not ln.startswith("#")]
    assert rows and all(ln.split()[-2] == "N/A" for ln in rows if "->" in ln), p.stdout    # #wrong, then pair
    assert "# Out of bounds values : N/A (data not checked: -c 0)" in p.stdout
    doc = load_results(out)
    assert doc["options"]["check"] is False and doc["data_error"] is None
    first_pass = [r for r in doc["results"] if "confirm" not in r]   # the default confirm phase adds its own
    assert len(first_pass) == 12 and all(r["wrong"] is None for r in doc["results"])

    table = run_cli("report", out, check_rc=0).stdout
    assert "N/A (data not checked" in table and " 0      0->1" not in table
    csv_lines = run_cli("report", out, "--format", "csv", check_rc=0).stdout.splitlines()
    col = csv_lines[0].split(",").index("wrong")
    assert all(ln.split(",")[col] == "" for ln in csv_lines[1:])
    assert all(json.loads(ln)["wrong"] is None
               for ln in run_cli("report", out, "--format", "jsonl", check_rc=0).stdout.splitlines())
    prom = tmp_path / "cb.prom"
    run_cli("report", out, "--prometheus", prom, "--html", tmp_path / "r.html", check_rc=0)
    assert "comm_bench_busbw_bytes_per_second{" in prom.read_text()
    assert "comm_bench_wrong_elements{" not in prom.read_text()
    assert ">N/A</td>" in (tmp_path / "r.html").read_text()

    # every reader takes wrong: null. validate may name loopback rank 0 (it also serves the
    # store) slow on a loaded CI machine (a recorded run: 79% of its references, confirmed):
    # that is about the harness, not about reading unchecked records, so exit 1 is allowed
    # as long as nothing it says is about the data
    val = run_cli("validate", out, "--json")
    assert_no_traceback(val)
    assert val.returncode in (0, 1), val.stderr
    rep = json.loads(val.stdout)
    assert not [f for f in rep["findings"] if f["kind"] == "wrong-data" or "wrong" in f["message"]], rep["findings"]
    run_cli("heatmap", out, "-o", tmp_path / "h.png", check_rc=0)
    run_cli("compare", out, out, check_rc=0)
    run_cli("plot", out, "-o", tmp_path / "p.png", check_rc=0)
    sel = run_cli("select", out, "--model", "llama2-7b")
    assert_no_traceback(sel)
    assert sel.returncode in (0, 1, 2) and "wrong" not in sel.stderr, sel.stderr
    # resume: an interrupted unchecked document is continued
    cut = dict(doc, results=doc["results"][:5], status="failed", failure={"rank": 1, "host": "h", "reason": "killed"})
    out.write_text(json.dumps(cut))
    run_cli(*SWEEP, "-c", "0", "--resume", "-o", out, timeout=240, check_rc=0)
    again = load_results(out)
    again_first = [r for r in again["results"] if "confirm" not in r]
    assert again["status"] == "ok" and len(again_first) == 12 and again["resumed"][0]["records_kept"] == 5
    assert all(r["wrong"] is None for r in again["results"])


def test_the_check_is_on_by_default(tmp_path):
    out = tmp_path / "r.json"
    run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "3", "--no-progress",
            "-o", out, timeout=240, check_rc=0)
    doc = load_results(out)
    assert doc["options"]["check"] is True and [r["wrong"] for r in doc["results"]] == [0]
    # and it sees wrong data without -c (--force: into the same file, not r.1.json)
    p = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "3", "--no-progress",
                "--force", "-o", out, timeout=240, env={"COMM_BENCH_TEST_CORRUPT_TCP": "1"})
    assert p.returncode == 1 and [r["wrong"] for r in load_results(out)["results"]] == [1], p.stderr[-1500:]


def test_nccl_tests_spellings_of_c(tmp_path):
    out = tmp_path / "r.json"
    for spelling, on in ((["-c", "5"], True), (["-c", "1"], True), (["-c"], True), (["-c", "0"], False)):
        run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "2", *spelling,
                "--no-progress", "--force", "-o", out, timeout=240, check_rc=0)     # one file, replaced
        assert load_results(out)["options"]["check"] is on, spelling
    p = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-c", "yes", "-o", out)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "-c/--check" in p.stderr
    assert "-c 0" in run_cli("sweep", "--help", check_rc=0).stdout
