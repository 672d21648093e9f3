"""`comm-bench sweep --transport rdma` end to end (launcher, torch store, results JSON).

Slow under QEMU emulation (each rank imports torch: minutes), so it runs only
with COMM_BENCH_VM_SWEEP=1 (tests/test_rdma.py passes it into the VM).
"""
import json
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(not os.environ.get("COMM_BENCH_VM_SWEEP"),
                                reason="set COMM_BENCH_VM_SWEEP=1 to run comm-bench sweep in the VM (slow)")


def _sweep(tmp_path, *args):
    out = tmp_path / "r.json"
    cmd = [shutil.which("comm-bench") or "comm-bench", "sweep", "-t", "rdma", "--no-progress",
           "--timeout", "900", "-o", str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    if os.environ.get("COMM_BENCH_VM_OUT"):
        shutil.copy(out, os.path.join(os.environ["COMM_BENCH_VM_OUT"], f"sweep_{len(doc['results'])}.json"))
    return doc


def test_sweep_pair_checked_2B_to_8M(tmp_path):
    doc = _sweep(tmp_path, "--nprocs", "2", "-c", "1", "-b", "2", "-e", "8M", "-f", "8",
                 "--op", "write,read,send", "-n", "20", "-w", "2", "-d", "uint8")
    recs = doc["results"]
    assert {r["op"] for r in recs} == {"write", "read", "send"}
    assert len(recs) == 3 * 8  # 2 B .. 8 MiB by 8x
    for r in recs:
        assert r["wrong"] == 0, r
        assert r["algbw"] > 0 and r["bw_peak"] > 0 and r["msg_rate_mpps"] > 0
        assert r["extra"]["counters"].get("sent_pkts", 0) > 0 or r["op"] == "read"


def test_sweep_pairwise_three_ranks_fills_matrix(tmp_path):
    doc = _sweep(tmp_path, "--nprocs", "3", "--pattern", "pairwise", "-c", "1", "-b", "64K", "-e", "64K",
                 "--op", "write", "-n", "20", "-w", "2")
    cells = {(r["src"], r["dst"]) for r in doc["results"]}
    assert cells == {(s, d) for s in range(3) for d in range(3) if s != d}
    assert all(r["wrong"] == 0 and r["extra"]["counters"] for r in doc["results"])
