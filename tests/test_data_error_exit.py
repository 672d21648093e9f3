"""Wrong data fails the run (issue 24): real ranks over loopback with the transports' test
hooks changing one received value, and the run exits 1 with the count and the place in its
last line, the document's data_error saying the same while its status stays ok (the
measurement completed), and validate and report showing it."""
import os
import subprocess

import pytest

from cbtest import COMM_BENCH, load_results, run_cli

HOOK = {"tcp": "COMM_BENCH_TEST_CORRUPT_TCP"}   # the native loop's hook; the others: Python's


@pytest.mark.parametrize("transport", ["tcp", "gloo", "mpi", "grpc"])
def test_wrong_data_exits_1_and_says_where(tmp_results, transport):
    if transport == "grpc":
        pytest.importorskip("grpc")
    p = run_cli("sweep", "-t", transport, "--nprocs", "2", "--op", "sendrecv", "--pattern", "pair",
                "-b", "1K", "-e", "4K", "-f", "4", "-n", "4", "-w", "1", "-c", "--no-progress",
                "-o", tmp_results, timeout=240, env={HOOK.get(transport, "COMM_BENCH_TEST_CORRUPT_CHECK"): "1"})
    doc = load_results(tmp_results)
    wrong = [r["wrong"] for r in doc["results"]]
    assert len(wrong) == 2 and all(w > 0 for w in wrong), (wrong, p.stderr[-2000:])
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    last = p.stderr.strip().splitlines()[-1]
    assert f"data check FAILED: {sum(wrong)} wrong value(s) in 2 record(s)" in last, last
    assert "sendrecv 1K pair 0->1" in last and "sendrecv 4K pair 0->1" in last, last
    assert doc["status"] == "ok" and doc["failure"] is None
    assert doc["data_error"]["wrong"] == sum(wrong)
    assert [(e["op"], e["size"], e["src"], e["dst"]) for e in doc["data_error"]["records"]] == \
        [("sendrecv", 1024, 0, 1), ("sendrecv", 4096, 0, 1)]
    v = run_cli("validate", tmp_results)
    assert v.returncode == 1 and v.stdout.count("[wrong-data]") == 2, (v.returncode, v.stdout, v.stderr)
    rep = run_cli("report", tmp_results, check_rc=0)
    assert f"# data check FAILED: {sum(wrong)} wrong value(s)" in rep.stdout, rep.stdout


def test_a_clean_checked_run_exits_0(tmp_results):
    p = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "3", "-c",
                "--no-progress", "-o", tmp_results, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = load_results(tmp_results)
    assert doc["data_error"] is None and [r["wrong"] for r in doc["results"]] == [0]
    assert "# Out of bounds values : 0 OK" in p.stdout


def test_every_rank_exits_1_under_a_launcher(tmp_results, tmp_path):
    """Launched as torchrun launches (no spawner to say it): every rank exits 1, rank 0's
    last line names the collective and each rank's count."""
    from comm_bench.system.netutil import free_port

    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2",
               LOCAL_WORLD_SIZE="2", COMM_BENCH_TEST_CORRUPT_CHECK="1")
    env.pop("COMM_BENCH_DEBUG", None)
    cmd = [COMM_BENCH, "sweep", "-t", "gloo", "--op", "all_reduce", "-b", "1K", "-e", "1K", "-n", "3",
           "-c", "--no-progress", "-o", str(tmp_results)]
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], [o[1][-1500:] for o in outs]
    last = outs[0][1].strip().splitlines()[-1]
    assert "data check FAILED: 2 wrong value(s) in 1 record(s): all_reduce 1K ranks 0,1: 2" in last, last
    doc = load_results(tmp_results)
    assert doc["status"] == "ok" and doc["data_error"]["records"][0]["ranks"] == {"0": 1, "1": 1}
