"""`comm-bench report`: filters, CSV, JSON Lines, the OpenMetrics textfile and the
nccl-tests closing lines, on a real run (#14)."""
import csv
import io
import json
import statistics

import pytest

from cbtest import load_results, run_cli


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("rep") / "tcp3.json"
    p = run_cli("sweep", "-t", "tcp", "--nprocs", "3", "--pattern", "pairwise", "-b", "64K", "-e", "128K",
                "-n", "5", "-w", "1", "-c", "-o", path, timeout=300, check_rc=0)
    return path, p.stdout


def test_sweep_and_report_close_with_nccl_tests_lines(run):
    path, stdout = run
    busbw = [r["busbw"] for r in load_results(path)["results"]]
    for text in (stdout, run_cli("report", path, check_rc=0).stdout):
        assert "# Out of bounds values : 0 OK" in text
        line = next(x for x in text.splitlines() if x.startswith("# Avg bus bandwidth"))
        assert float(line.split(":")[1]) == pytest.approx(sum(busbw) / len(busbw), rel=1e-5)


def test_filters(run):
    path, _ = run
    rows = json.loads(run_cli("report", path, "--format", "json", "--pair", "0->1,2->0", "--size", "64K",
                              check_rc=0).stdout)
    assert sorted((r["src"], r["dst"], r["size"]) for r in rows) == [(0, 1, 65536), (2, 0, 65536)]
    p = run_cli("report", path, "--format", "json", "--op", "all_reduce", check_rc=2)   # says so (#26)
    assert not p.stdout and "no records match --op all_reduce" in p.stderr
    for bad, fragment in ((["--pair", "0to1"], "is not a pair"), (["--size", "big"], "is not a size")):
        p = run_cli("report", path, *bad, check_rc=2)
        assert fragment in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_csv_unrounded_snake_case_with_pairs_and_hosts(run):
    path, _ = run
    recs = load_results(path)["results"]
    rows = list(csv.DictReader(io.StringIO(run_cli("report", path, "--format", "csv", check_rc=0).stdout)))
    assert len(rows) == len(recs) and len([r for r in recs if "confirm" not in r]) == 12   # + any confirm phase
    for key in ("busbw_gbs", "lat_p99_us", "src", "dst", "src_host", "dst_host", "time_us"):
        assert key in rows[0]
    for row, rec in zip(rows, recs):
        assert float(row["busbw_gbs"]) == rec["busbw"] and float(row["time_us"]) == rec["time_us"]
        assert (int(row["src"]), int(row["dst"]), row["src_host"]) == (rec["src"], rec["dst"], rec["src_host"])
        assert float(row["lat_p999_us"]) == rec["latency_us"]["p999"]


def test_jsonl_one_record_a_line(run):
    path, _ = run
    lines = run_cli("report", path, "--format", "jsonl", check_rc=0).stdout.splitlines()
    assert [json.loads(x) for x in lines] == load_results(path)["results"]


def test_prometheus_textfile_parses_as_openmetrics(run, tmp_path):
    parser = pytest.importorskip("prometheus_client.openmetrics.parser")
    path, _ = run
    prom = tmp_path / "comm_bench.prom"
    run_cli("report", path, "--prometheus", prom, "--size", "128K", check_rc=0)
    fams = {f.name: f for f in parser.text_string_to_metric_families(prom.read_text())}
    bus = fams["comm_bench_busbw_bytes_per_second"]
    assert bus.type == "gauge" and len(bus.samples) == 6
    recs = {(r["src"], r["dst"]): r for r in load_results(path)["results"] if r["size"] == 131072}
    for s in bus.samples:
        assert s.value == pytest.approx(recs[(int(s.labels["src"]), int(s.labels["dst"]))]["busbw"] * 1e9)
    stats = {s.labels["stat"] for s in fams["comm_bench_latency_seconds"].samples}
    assert {"median", "p99", "p999"} <= stats
    assert fams["comm_bench_run_ok"].samples[0].value == 1


def test_pairwise_runs_end_with_the_matrix(run):
    """nvbandwidth's picture: busbw src (rows) -> dst (columns) at the largest size, the
    median of every measurement of the pair there (a confirm phase measures some again)."""
    path, stdout = run
    recs = {}
    for r in load_results(path)["results"]:
        if r["size"] == 131072:
            recs.setdefault((r["src"], r["dst"]), []).append(r["busbw"])
    recs = {k: statistics.median(v) for k, v in recs.items()}
    report = run_cli("report", path, check_rc=0).stdout
    wide = run_cli("report", path, "--wide", check_rc=0).stdout
    for text, spec in ((stdout, ".2f"), (report, ".2f"), (wide, ".3f")):     # --wide: nvbandwidth's digits
        lines = text.splitlines()
        at = lines.index("# busbw (GB/s) at 131072 B, src rank (rows) -> dst rank (columns)")
        assert lines[at + 1].split() == ["#", "0", "1", "2"]
        for s in range(3):
            cells = lines[at + 2 + s].split()
            assert cells[0] == str(s) and cells[1 + s] == "N/A"
            assert [c for d, c in enumerate(cells[1:]) if d != s] == \
                [format(recs[(s, d)], spec) for d in range(3) if d != s]
