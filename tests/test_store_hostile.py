"""The rendezvous store against floods, replays and a stopped rank 0 (docs/reliability.md,
"The rendezvous store"): each case with real ranks and real sockets, each one that the
thread-per-connection store of earlier versions failed."""
import os
import resource
import signal
import socket
import subprocess
import threading
import time
from datetime import timedelta

import pytest
from torch.distributed import TCPStore

from comm_bench.control.join import join
from comm_bench.control.store_wire import SET, WAIT, frame
from comm_bench.system.netutil import free_port
from comm_bench.control.rendezvous import Store

from cbtest import COMM_BENCH, load_results, rank_pids
from test_failures import wait_for_records

SECRET = "0123456789abcdef0123456789abcdef-hostile"
LONG = ["-b", "8", "-e", "64M", "-n", "200", "-w", "2", "--no-progress", "--timeout", "30"]


def start_sweep(tmp_path, args, transport="tcp", nofile=None, env=None):
    """A 2-rank local sweep; nofile: (soft, hard) RLIMIT_NOFILE for it and its ranks."""
    limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile)) if nofile else None
    return subprocess.Popen([COMM_BENCH, "sweep", "-t", transport, "--nprocs", "2", "-o",
                             str(tmp_path / "r.json"), *args], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit,
                            env=dict(os.environ, COMM_BENCH_SECRET=SECRET, **(env or {})))


def store_port(parent):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pids = rank_pids(parent.pid)
        if 0 in pids:
            with open(f"/proc/{pids[0]}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            return int(env[b"MASTER_PORT"]), pids[0]
        assert parent.poll() is None, parent.communicate()
        time.sleep(0.05)
    raise AssertionError("rank 0 did not start")


def finish_ok(parent, tmp_path):
    out, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, err[-3000:]
    doc = load_results(tmp_path / "r.json")
    assert doc["status"] == "ok", doc["failure"]
    return doc, err


def peak_rss_mb(pid) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def test_a_descriptor_flood_drops_connections_not_the_store(tmp_path):
    """Rank 0 may open 1,024 files (hard limit); 1,100 connections held 3 s, then closed.
    Through the flood rank 0 keeps descriptors free for the rest of its work: a CI run had
    the store take them all, and rank 0 could not write its results."""
    parent = start_sweep(tmp_path, LONG, nofile=(1024, 1024))
    port, pid0 = store_port(parent)
    wait_for_records(tmp_path / "r.json")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    held = []
    try:
        for _ in range(1100):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                pass       # the backlog is full: the flood is on
        open_fds = []
        for _ in range(30):
            open_fds.append(len(os.listdir(f"/proc/{pid0}/fd")))
            time.sleep(0.1)
    finally:
        for s in held:
            s.close()
    # the store leaves a socket per peer and fd_limit.SPARE (64) to the rest of rank 0
    assert len(held) > 900 and 1024 - max(open_fds) >= 32, (len(held), open_fds)
    _, err = finish_ok(parent, tmp_path)
    assert "internal error" not in err


def test_memory_flood_without_the_secret_is_refused(tmp_path):
    """64 SETs of 16 MiB: the thread-per-connection store grew by a GiB; this one reads a hello."""
    parent = start_sweep(tmp_path, LONG)
    port, pid0 = store_port(parent)
    wait_for_records(tmp_path / "r.json")
    before = peak_rss_mb(pid0)
    value = b"x" * ((16 << 20) - 64)
    for _ in range(8):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                for i in range(8):
                    s.sendall(frame(SET, (f"flood/{i}".encode(), value)))
        except OSError:
            pass           # closed by the server at the first frame: what it should do
    grown = peak_rss_mb(pid0) - before
    finish_ok(parent, tmp_path)
    assert grown < 100, f"rank 0 grew by {grown:.0f} MB"


def test_huge_waits_without_the_secret_do_not_stop_a_run(tmp_path):
    """30 WAIT frames of 1.2 million keys each, all but the last one present (the old store
    rechecked them all on every SET, and the run failed blaming a healthy rank)."""
    parent = start_sweep(tmp_path, LONG[:-1] + ["5"])      # --timeout 5
    port, _ = store_port(parent)
    wait_for_records(tmp_path / "r.json")
    keys = [b"cb/hb/0"] * 1_200_000 + [b"never"]
    wait = frame(WAIT, [b"600000", *keys])

    def send():
        for _ in range(10):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(wait)
            except OSError:
                pass
    threads = [threading.Thread(target=send) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    finish_ok(parent, tmp_path)


def _meet(port, secret, torch_store, master_first=True):
    """Rank 0 and rank 1 of one run on real stores, joined (the run nonce agreed)."""
    started = time.monotonic()
    master = Store("127.0.0.1", port, 0, 2, 10.0, secret=secret, torch_store=torch_store)
    client = Store("127.0.0.1", port, 1, 2, 10.0, secret=secret, torch_store=torch_store)
    t = threading.Thread(target=join, args=(client, started))
    t.start()
    joined = join(master, started)
    t.join(20)
    assert client.nonce == master.nonce and len(master.nonce) == 16 and joined["last_rank"] in (0, 1)
    return master, client


@pytest.mark.parametrize("torch_store", [False, True], ids=["light_store", "TCPStore"])
def test_a_value_sealed_in_another_run_is_rejected_and_counted(torch_store):
    """Same secret (a COMM_BENCH_SECRET_FILE shared by runs), another run: its sealed values,
    captured on the wire, do not open in this run."""
    secret = SECRET.encode()
    _, client1 = _meet(free_port(), secret, torch_store)
    client1.set("cb/res#1/1", {"busbw": 280.7})
    captured = client1.raw.get("cb/res#1/1")
    master2, client2 = _meet(free_port(), secret, torch_store)
    master2.raw.set("cb/res#1/1", captured)
    assert not master2.check(["cb/res#1/1"])
    assert master2.payloads(["cb/res#1/1"]) == [None]
    assert "cb/res#1/1" in master2.rejected
    client2.set("cb/res#1/1", {"busbw": 2.3})     # the real value still gets through
    assert master2.get_json("cb/res#1/1") == {"busbw": 2.3}


def test_a_replayed_abort_does_not_stop_a_later_run(tmp_path):
    """gloo's store is torch's TCPStore, which anyone on the host may write: run 1 fails (a
    rank is killed) and its sealed abort is captured; written into run 2, which uses the same
    secret, it is rejected, counted, and run 2 completes."""
    args = ["-b", "8", "-e", "4M", "-n", "400", "-w", "2", "--no-progress", "--timeout", "3"]
    (tmp_path / "one").mkdir()
    run1 = start_sweep(tmp_path / "one", args, transport="gloo")
    port, _ = store_port(run1)
    wait_for_records(tmp_path / "one" / "r.json")
    spy = TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10), wait_for_workers=False)
    os.kill(rank_pids(run1.pid)[1], signal.SIGKILL)
    captured, deadline = None, time.monotonic() + 30
    while captured is None and time.monotonic() < deadline:
        try:
            captured = spy.get("cb/abort") if spy.check(["cb/abort"]) else None
        except Exception:  # noqa: BLE001 - rank 0 has left
            break
        time.sleep(0.02)
    run1.communicate(timeout=120)
    assert captured, "run 1 posted no abort"
    (tmp_path / "two").mkdir()
    run2 = start_sweep(tmp_path / "two", args, transport="gloo")
    port2, _ = store_port(run2)
    wait_for_records(tmp_path / "two" / "r.json")
    TCPStore("127.0.0.1", port2, None, False, timedelta(seconds=10), wait_for_workers=False).set(
        "cb/abort", captured)
    doc, err = finish_ok(run2, tmp_path / "two")
    assert doc["rendezvous"]["rejected_values"] >= 1
    assert "not sealed in this run" in err


def _rank(rank, port, tmp_path, *args, transport="tcp"):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), COMM_BENCH_SECRET=SECRET)
    return subprocess.Popen([COMM_BENCH, "sweep", "-t", transport, "-o", "r.json", "--no-progress",
                             *args], env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _listening(port, limit=60):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("rank 0 did not listen")


def test_a_stopped_rank_0_is_a_failed_run_within_the_timeout(tmp_path):
    """Rank 0 stopped (SIGSTOP) before rank 1 starts: rank 1 exits 1 naming the store's host,
    within --timeout and a little, not 70 after 10 s."""
    port = free_port()
    rank0 = _rank(0, port, tmp_path, "--timeout", "5")
    try:
        _listening(port)
        os.kill(rank0.pid, signal.SIGSTOP)
        t = time.monotonic()
        rank1 = _rank(1, port, tmp_path, "--timeout", "5")
        _, err = rank1.communicate(timeout=60)
        took = time.monotonic() - t
    finally:
        os.kill(rank0.pid, signal.SIGKILL)
        rank0.communicate()
    assert rank1.returncode == 1, err
    assert "127.0.0.1" in err and "rendezvous store" in err and "Traceback" not in err
    assert took < 12, f"{took:.1f} s"


def test_a_claim_key_written_by_another_process_is_a_clear_failure(tmp_path):
    """torch's TCPStore (gloo) takes writes from anyone: a non-number under rank 1's claim
    makes rank 1 fail with one line (exit 1), never an internal error."""
    port = free_port()
    rank0 = _rank(0, port, tmp_path, "--timeout", "10", transport="gloo")
    try:
        _listening(port)
        TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10), wait_for_workers=False).set(
            "cb/claim/1", "x")
        rank1 = _rank(1, port, tmp_path, "--timeout", "10", transport="gloo")
        _, err = rank1.communicate(timeout=90)
    finally:
        rank0.kill()
        rank0.communicate()
    assert rank1.returncode == 1, err
    assert "cb/claim/1" in err and "rendezvous store" in err and "Traceback" not in err


def test_a_low_descriptor_limit_is_raised_or_named(tmp_path):
    """ulimit -Sn 64 with a high hard limit: 40 ranks run (the limit is raised to the hard
    one); a hard limit too low for the ranks asked for: exit 2 up front, naming it."""
    proc = subprocess.run([COMM_BENCH, "sweep", "-t", "tcp", "--nprocs", "40", "--oversubscribe",
                           "--pattern", "matchings", "--matchings", "1", "-b", "64K", "-e", "64K",
                           "-n", "2", "-w", "1", "--no-progress", "-o", "r.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=dict(os.environ),
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 4096)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert load_results(tmp_path / "r.json")["world_size"] == 40
    t = time.monotonic()
    proc = subprocess.run([COMM_BENCH, "sweep", "-t", "tcp", "--nprocs", "200", "--oversubscribe",
                           "-o", "r2.json"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 128)))
    assert proc.returncode == 2, proc.stderr
    assert "open files" in proc.stderr and "128" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert time.monotonic() - t < 10
