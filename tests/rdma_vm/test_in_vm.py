"""The rdma transport on a real ibverbs device (Soft-RoCE rxe0 in the VM)."""
import json
import os
import shlex
import subprocess
import sys
import time

import pytest
from minirun import run_ranks

from comm_bench.schedule import my_pair, schedule

OPS = ("write", "read", "send", "write_imm")
SIZES = (2, 4096, 65536, 1 << 20)


def _ok(results):
    for rank, r in enumerate(results):
        assert "ok" in r, f"rank {rank}: {r.get('error')}\n{r.get('trace', '')}"
    return [r["ok"] for r in results]


def _record(res, op, mode, size, iters, warmup):
    """What the sweep makes of a RunResult (comm_bench.metrics: the one place figures are derived)."""
    from comm_bench.metrics import make_record

    return make_record(transport="rdma", op=op, mode=mode, pattern="pair", size=size, dtype="uint8", iters=iters,
                       warmup=warmup, n=2, samples_us=res.samples_us, wrong=res.wrong, extra=res.extra, elem=1,
                       round_trip=res.round_trip, mean_us=res.mean_us, peak_gbps=res.peak_gbps)


def _pair_body(cases, iters=50, warmup=5):
    """Each case (op, mode, size) once as src (rank 0) -> dst (rank 1), with -c."""
    def body(t, rank):
        out = []
        for op, mode, size in cases:
            res = t.run(op, size, iters, warmup, check=True, mode=mode, peer=1 - rank,
                        role="src" if rank == 0 else "dst")
            out.append({"op": op, "mode": mode, "size": size, "n": len(res.samples_us),
                        "sum_us": sum(res.samples_us), "wrong": res.wrong, "extra": res.extra,
                        "record": _record(res, op, mode, size, iters, warmup) if res.samples_us else None})
        return out
    return body


@pytest.mark.parametrize("mode", ["bw", "lat"])
def test_every_op_moves_correct_bytes(mode):
    cases = [(op, mode, s) for op in OPS for s in SIZES]
    src, dst = _ok(run_ranks(2, _pair_body(cases), max_bytes=max(SIZES)))
    for s, d in zip(src, dst):
        what = f"{s['op']} {s['mode']} {s['size']} B"
        assert s["n"] == 50 and s["sum_us"] > 0, what
        assert s["wrong"] == 0 and d["wrong"] == 0, what
        sent = s["extra"]["counters"].get("sent_pkts", 0)
        # every op posts at least one packet (a read its request), warm-up included
        assert sent >= s["n"], f"{what}: {sent} packets counted on the port: {s['extra']['counters']}"
        if mode == "bw":
            rec = s["record"]   # perftest's average (S x iters / span) and the native peak window
            assert rec["algbw"] > 0 and rec["bw_peak"] >= rec["algbw"] * 0.99, what
            assert rec["msg_rate_mpps"] > 0, what


def test_check_counts_wrong_bytes():
    """The check is real: bytes that arrive with the wrong content are counted, while
    the same landed bytes checked against what was sent count none."""
    import zlib

    def body(t, rank):
        peer = 1 - rank
        res = t.run("write", 4096, 10, 1, check=True, mode="bw", peer=peer, role="src" if rank == 0 else "dst")
        expected, sent = zlib.crc32(b"this-run"), zlib.crc32(b"not-this-run")
        t.engine.prepare(peer, 4096, sent, True, 0, 0)   # src: sbuf = pattern(sent); dst: rbuf cleared
        t.ctx.store.barrier("corrupt/ready")
        if rank == 0:  # a real RDMA write of the wrong pattern into the peer's buffer
            t.engine.stream(peer, "write", 4096, 1, 0, False)
        t.ctx.store.barrier("corrupt/landed")          # the write has completed
        return {"first": res.wrong, "as_expected": t.engine.count_wrong(peer, 4096, expected, False),
                "as_sent": t.engine.count_wrong(peer, 4096, sent, False)}
    src, dst = _ok(run_ranks(2, body, max_bytes=4096))
    assert dst["first"] == 0
    assert dst["as_sent"] == 0, dst             # what landed is the written data, not a cleared buffer
    assert dst["as_expected"] > 4000, dst       # ...and it is nearly all wrong for this run


def test_multi_qp_and_bidirectional():
    opts = {"qps": 4, "bidir": True, "tx_depth": 64}
    cases = [(op, "bw", s) for op in OPS for s in (2, 65536)]
    src, dst = _ok(run_ranks(2, _pair_body(cases, iters=400), options=opts, max_bytes=65536))
    for s, d in zip(src, dst):
        assert s["wrong"] == 0 and d["wrong"] == 0, s
        assert s["n"] == 400 and d["n"] == 400, (s["n"], d["n"])  # both sides streamed
        assert s["extra"]["qps"] == 4 and s["extra"]["bidir"] is True


@pytest.mark.parametrize("pattern", ["pairwise", "pairwise-concurrent"])
def test_pairwise_fills_matrix(pattern):
    n = 4

    def body(t, rank):
        cells = {}
        for rnd in schedule(pattern, n):
            peer, role = my_pair(rnd, rank)
            if peer is None:
                continue
            res = t.run("write", 65536, 30, 3, check=True, mode="bw", peer=peer, role=role)
            if role == "src":
                cells[str(peer)] = {"gbps": _record(res, "write", "bw", 65536, 30, 3)["algbw"], "wrong": res.wrong}
            elif res.wrong:
                cells[f"wrong_from_{peer}"] = res.wrong
        return cells

    per_rank = _ok(run_ranks(n, body, max_bytes=65536, timeout=60))
    for src in range(n):
        for dst in range(n):
            if src != dst:
                cell = per_rank[src][str(dst)]
                assert cell["gbps"] > 0 and cell["wrong"] == 0, (src, dst, cell)
        assert not [k for k in per_rank[src] if k.startswith("wrong_from")]


def _one_error(results, rank=0):
    r = results[rank]
    assert "error" in r, f"rank {rank} did not fail: {r}"
    assert "\n" not in r["error"], r["error"]
    return r["error"], r["exit"]


def test_unknown_device_lists_the_real_ones():
    err, code = _one_error(run_ranks(2, lambda t, r: None, options={"device": "mlx5_9"}, timeout=5))
    assert err.startswith("TransportUnavailable") and code == 2
    assert "unknown RDMA device 'mlx5_9'" in err and "rxe0" in err


def test_missing_gid_index():
    err, code = _one_error(run_ranks(2, lambda t, r: None, options={"gid_index": 77}, timeout=5))
    assert code == 2 and "GID index 77 is missing on rxe0 port 1" in err and "valid: 0, 1" in err


def test_missing_port():
    err, code = _one_error(run_ranks(2, lambda t, r: None, options={"ib_port": 2}, timeout=5))
    assert code == 2 and "rxe0 has no port 2" in err


def test_port_not_active():
    """A second Soft-RoCE device on a dummy link that is down: its port is not ACTIVE."""
    subprocess.run(["ip", "link", "add", "cbdown0", "type", "dummy"], check=True)
    try:
        subprocess.run(["rdma", "link", "add", "rxe1", "type", "rxe", "netdev", "cbdown0"], check=True)
        try:
            err, code = _one_error(run_ranks(2, lambda t, r: None, options={"device": "rxe1"}, timeout=5))
        finally:
            subprocess.run(["rdma", "link", "delete", "rxe1"], check=False)
    finally:
        subprocess.run(["ip", "link", "delete", "cbdown0"], check=False)
    assert code == 2 and "port 1 of rxe1 is" in err and "not ACTIVE" in err, err


def test_memlock_limit_too_low():
    """No CAP_IPC_LOCK (an unprivileged user) and a 64 KiB locked-memory limit: one line
    that says how to raise it, before any memory is registered."""
    here = os.path.dirname(os.path.abspath(__file__))
    script = (f"import json, sys; sys.path.insert(0, {here!r}); from minirun import run_ranks; "
              f"print(json.dumps(run_ranks(2, lambda t, r: None, max_bytes=8 << 20, timeout=10)[0]))")
    cmd = (f"ulimit -l 64 && exec setpriv --reuid=65534 --regid=65534 --clear-groups "
           f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}")
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=180, cwd="/tmp")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rank0 = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rank0.get("exit") == 2 and "\n" not in rank0["error"], rank0
    assert "locked-memory limit (64 KiB)" in rank0["error"] and "ulimit -l" in rank0["error"], rank0


def test_dmabuf_is_refused_plainly():
    err, code = _one_error(run_ranks(2, lambda t, r: None, options={"use_dmabuf": True}, timeout=5))
    assert code == 2 and "not working yet" in err


@pytest.mark.parametrize("op,mode", [("write", "bw"), ("write", "lat"), ("send", "bw")])
def test_peer_killed_mid_run(op, mode):
    """Rank 1 dies during a long run: rank 0 fails in seconds with one line naming peer 1."""
    def body(t, rank):
        t.run(op, 65536, 10_000_000, 0, mode=mode, peer=1 - rank, role="src" if rank == 0 else "dst")
        return "finished?"
    start = time.monotonic()
    results = run_ranks(2, body, max_bytes=65536, timeout=8, kill=(1, 2.0), wall=120)
    err, code = _one_error(results, 0)
    assert time.monotonic() - start < 90
    assert code == 1 and err.startswith("TransportError") and "peer 1" in err, err


def test_pyverbs_and_sysfs_give_the_same_ports():
    """topo reads RDMA ports through rdma-core's pyverbs where it imports, else through sysfs:
    on the same device both readers give the same state, rate, link layer, LID and GID table."""
    from comm_bench.system import sysfs, verbs
    from comm_bench.topology import snapshot

    ok, why = verbs.available()
    assert ok, why  # tools/install.sh links the system's python3-pyverbs into the environment
    by_verbs = verbs.ports("rxe0")
    by_sysfs = sysfs.read_infiniband("/", live=False)
    by_sysfs = next(d for d in by_sysfs if d["name"] == "rxe0")["ports"]
    keys = ("port", "state", "phys_state", "rate_gbps", "link_layer", "lid", "gids")
    assert by_verbs and by_verbs[0]["gids"], by_verbs
    assert [{k: p[k] for k in keys} for p in by_verbs] == [{k: p[k] for k in keys} for p in by_sysfs]
    nic = next(n for n in snapshot()["nics"] if n["name"] == "rxe0")
    assert nic["read_with"] == "pyverbs" and nic["state"] == "ACTIVE"


def test_port_health_reads_real_rxe_counters():
    """rdma_health on the real rxe0 port (issue 40): state, rate, the error counters the
    driver has (packet counters left out), and none of them rising over clean traffic."""
    from comm_bench.system import rdma_health, rdma_sysfs

    before = rdma_health.reading("rxe0", 1)
    assert before["available"] and before["state"] == "ACTIVE" and before["rate_gbps"] == 2.5, before
    assert before["link_layer"] == "Ethernet"
    assert "link_downed" in before["hw_counters"] and "sent_pkts" not in before["hw_counters"], before
    _ok(run_ranks(2, _pair_body([("write", "bw", 65536), ("send", "bw", 65536)]), max_bytes=65536))
    time.sleep(rdma_sysfs.counter_settle_s("rxe0", 1))
    after = rdma_health.reading("rxe0", 1)
    # rxe has no PMA counters/; under emulation its completer retries do rise over clean
    # traffic (seen: completer_retry_err +2): a cause validate names, never a finding alone.
    # Its ack_deferred rises too (seen in CI under load): no error, so not read at all
    from comm_bench.validate.health import errors_between, problems
    assert set(errors_between(before, after)) <= {k for k in after["hw_counters"]
                                                  if any(w in k for w in ("retry", "seq", "timeout"))}
    doc = {"ranks": [{"rank": 0, "host": "vm", "health": {"nic": {"before": before, "after": after}}}]}
    assert [p.text for p in problems(doc) if p.finding] == []
    assert rdma_health.summary(after).startswith("ACTIVE")
