"""`comm-bench sweep --transport rdma` end to end (launcher, torch store, results JSON).

Slow under QEMU emulation (each rank imports torch: minutes). tests/test_rdma.py
sets COMM_BENCH_VM_SWEEP=1 in the VM (CI runs these) unless COMM_BENCH_VM_SWEEP=0 on the host.
"""
import json
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(not os.environ.get("COMM_BENCH_VM_SWEEP"),
                                reason="COMM_BENCH_VM_SWEEP is not set (tests/test_rdma.py sets it in the VM)")


def _sweep(tmp_path, *args):
    out = tmp_path / "r.json"
    cmd = [shutil.which("comm-bench") or "comm-bench", "sweep", "-t", "rdma", "--no-progress",
           "--timeout", "900", "-o", str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    if os.environ.get("COMM_BENCH_VM_OUT"):
        name = "_".join(a.strip("-") for a in args if a in ("--mode", "bw", "lat", "pairwise"))
        shutil.copy(out, os.path.join(os.environ["COMM_BENCH_VM_OUT"], f"sweep_{name or 'pair'}_{len(doc['results'])}.json"))
    return doc


@pytest.mark.parametrize("mode", ["bw", "lat"])
def test_sweep_pair_checked_2B_to_8M(tmp_path, mode):
    doc = _sweep(tmp_path, "--nprocs", "2", "-c", "1", "-b", "2", "-e", "8M", "-f", "4", "--mode", mode,
                 "--op", "write,read,send", "-n", "20", "-w", "2", "-d", "uint8")
    recs = doc["results"]
    assert {r["op"] for r in recs} == {"write", "read", "send"}
    assert sorted({r["size"] for r in recs}) == [2 * 4 ** k for k in range(12)]  # 2 B .. 8 MiB
    assert len(recs) == 3 * 12
    for r in recs:
        assert r["wrong"] == 0, r
        assert r["algbw"] > 0 and r["bw_peak"] > 0 and r["msg_rate_mpps"] > 0
        lat = r["latency_us"]
        assert 0 < lat["min"] <= lat["median"] <= lat["p99"] <= lat["max"], lat
        # every op puts at least one packet on the wire (a read its request), warm-up included
        assert r["extra"]["counters"].get("sent_pkts", 0) >= 22, r["extra"]["counters"]


def test_sweep_pairwise_three_ranks_fills_matrix(tmp_path):
    doc = _sweep(tmp_path, "--nprocs", "3", "--pattern", "pairwise", "-c", "1", "-b", "64K", "-e", "64K",
                 "--op", "write", "-n", "20", "-w", "2")
    cells = {(r["src"], r["dst"]) for r in doc["results"]}
    assert cells == {(s, d) for s in range(3) for d in range(3) if s != d}
    assert all(r["wrong"] == 0 and r["extra"]["counters"] for r in doc["results"])
    # each rank read its port's health before and after its sweep (issue 40)
    for rank in doc["ranks"]:
        nic = rank["health"]["nic"]
        assert nic["before"]["device"] == "rxe0" and nic["after"]["state"] == "ACTIVE", rank["health"]
        assert "gpu" not in rank["health"]
