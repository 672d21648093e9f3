"""Real sweeps over local ranks: tcp, gloo and mpi with 2 and 4 ranks, data checked."""
import subprocess

import pytest

from comm_bench.ops import OPS
from comm_bench.sizes import size_range

from cbtest import load_results, run_cli

SMALL = ["-b", "8", "-e", "256K", "-f", "8", "-n", "5", "-w", "1", "--no-progress"]


def sweep(tmp_results, *args, timeout=240):
    proc = run_cli("sweep", *args, *SMALL, "-c", "-o", tmp_results, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = load_results(tmp_results)
    assert doc["status"] == "ok"
    return proc, doc


@pytest.mark.parametrize("nprocs", [2, 4])
def test_tcp_pairs(tmp_results, nprocs):
    proc, doc = sweep(tmp_results, "-t", "tcp", "--nprocs", nprocs)
    pairs = {(r["src"], r["dst"]) for r in doc["results"]}
    assert pairs == ({(0, 1)} if nprocs == 2 else {(s, d) for s in range(4) for d in range(4) if s != d})
    assert all(r["wrong"] == 0 and r["algbw"] > 0 for r in doc["results"])
    first_pass = [r for r in doc["results"] if "confirm" not in r]   # the default confirm phase adds its own
    assert len(first_pass) == len(pairs) * len(size_range("8", "256K", "8"))
    assert "#wrong" in proc.stdout and "0->1" in proc.stdout
    assert {r["src_host"] for r in doc["results"]} and len(doc["ranks"]) == nprocs


def test_tcp_latency_mode(tmp_results):
    _, doc = sweep(tmp_results, "-t", "tcp", "--mode", "lat")
    for r in doc["results"]:
        lat = r["latency_us"]
        assert 0 < lat["min"] <= lat["median"] <= lat["p99"] <= lat["max"]


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
@pytest.mark.parametrize("nprocs", [2, 4])
def test_framework_collectives(tmp_results, transport, nprocs):
    _, doc = sweep(tmp_results, "-t", transport, "--op", "all", "--nprocs", nprocs)
    ops_seen = {r["op"] for r in doc["results"]}
    assert ops_seen == set(OPS)
    for r in doc["results"]:
        assert r["wrong"] == 0, r
        assert r["pattern"] == "collective" and r["time_us"] > 0
        factor = OPS[r["op"]].bus_factor(nprocs)
        assert r["busbw"] == pytest.approx(r["algbw"] * factor)
        if OPS[r["op"]].scales_with_n:
            assert r["size"] % (nprocs * 4) == 0


def test_pairwise_concurrent_gloo(tmp_results):
    _, doc = sweep(tmp_results, "-t", "gloo", "--op", "sendrecv", "--pattern", "pairwise-concurrent",
                   "--nprocs", 4)
    rounds = {}
    for r in doc["results"]:
        if "confirm" in r:      # the default confirm phase re-measures suspects in rounds of its own
            continue
        rounds.setdefault((r["round"], r["size"]), []).append((r["src"], r["dst"]))
    assert all(len(p) == 2 for p in rounds.values())
    assert {(r["src"], r["dst"]) for r in doc["results"]} == {(s, d) for s in range(4) for d in range(4) if s != d}


def test_single_rank_collective_runs_in_process(tmp_results):
    _, doc = sweep(tmp_results, "-t", "gloo", "--nprocs", 1)
    assert doc["world_size"] == 1 and all(r["busbw"] == 0 for r in doc["results"])


def test_rounded_sizes_measured_once(tmp_results):
    # 4 ranks of float32: 8 B rounds up to 16 B, which is also asked for; one row, noted
    proc = run_cli("sweep", "-t", "gloo", "--op", "all_gather", "--nprocs", 4, "-b", "8", "-e", "16",
                   "-f", "2", "-n", "3", "-w", "1", "--no-progress", "-o", tmp_results, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = load_results(tmp_results)
    assert doc["status"] == "ok"
    assert [(r["size"], r.get("requested_sizes")) for r in doc["results"]] == [(16, [8, 16])]
    rows = [ln for ln in proc.stdout.splitlines() if ln.split()[:1] == ["16"]]
    assert len(rows) == 1, proc.stdout
    assert "8 B and 16 B measured as 16 B" in proc.stdout


def test_closed_stdout_does_not_stop_the_sweep(tmp_results):
    # `comm-bench sweep ... | head -1`: the reader goes away after the first line
    from cbtest import COMM_BENCH
    args = ["sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "4M", "-f", "2", "-n", "20", "-w", "1",
            "--no-progress", "-o", str(tmp_results)]
    proc = subprocess.Popen([COMM_BENCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=240)
    assert first.startswith(b"# comm-bench"), first
    assert proc.returncode == 0, err[-3000:]
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err[-3000:]
    doc = load_results(tmp_results)
    assert doc["status"] == "ok"
    assert len(doc["results"]) == len(size_range("8", "4M", "2"))
