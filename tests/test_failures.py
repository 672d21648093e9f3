"""A rank that dies or hangs: the others stop within a few seconds of --timeout, naming it, and
what was measured before stays in the results file."""
import os
import signal
import subprocess
import time

import pytest

from comm_bench.system.netutil import free_port

from cbtest import COMM_BENCH, load_results, rank_pids

TIMEOUT = 10
LONG_SWEEP = ["-b", "1K", "-e", "256M", "-f", "2", "-n", "50", "-w", "1", "--no-progress",
              "--timeout", str(TIMEOUT)]


def wait_for_records(path, n=1, limit=90):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if len(load_results(path)["results"]) >= n:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"no {n} record(s) in {path} within {limit} s")


def start_ranks(n, args, tmp_path):
    """Start n ranks the way torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, ...)."""
    port = free_port()
    procs = []
    for rank in range(n):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([COMM_BENCH, "sweep", *args], env=env, cwd=tmp_path, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    return procs


def finish(procs, limit):
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f"a rank did not stop within {limit} s: {err[-2000:]}") from None
        outs.append((p.returncode, out, err))
    return outs


@pytest.mark.slow
def test_killed_local_rank_is_named_and_records_kept(tmp_path):
    out = tmp_path / "r.json"
    parent = subprocess.Popen([COMM_BENCH, "sweep", "-t", "tcp", "--nprocs", "3", "--pattern", "pairwise",
                               "-o", out, *LONG_SWEEP], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    wait_for_records(out, 3)
    pids = rank_pids(parent.pid)
    assert set(pids) == {0, 1, 2}
    os.kill(pids[1], signal.SIGKILL)
    killed_at = time.monotonic()
    out_text, err = parent.communicate(timeout=TIMEOUT + 20)
    assert time.monotonic() - killed_at < TIMEOUT
    assert parent.returncode == 1
    assert "Traceback" not in err and "Traceback" not in out_text, err
    assert "rank 1" in err and "signal 9" in err
    doc = load_results(out)
    assert doc["status"] == "failed" and doc["failure"]["rank"] == 1
    assert len(doc["results"]) >= 3
    assert all(pid_gone(p) for p in pids.values())


def pid_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[1].split()[0] == "Z"


@pytest.mark.slow
def test_hung_rank_is_named_by_the_others(tmp_path):
    """SIGSTOP: the rank is alive but answers nothing (a hang). Launched torchrun-style."""
    procs = start_ranks(3, ["-t", "gloo", "-o", "r.json", *LONG_SWEEP], tmp_path)
    try:
        wait_for_records(tmp_path / "r.json", 2)
        os.kill(procs[2].pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        outs = finish(procs[:2], TIMEOUT + 20)
        assert time.monotonic() - stopped_at < TIMEOUT + 5   # silent for --timeout, then a few seconds to stop
    finally:
        procs[2].kill()
        procs[2].communicate()
    for rc, _, err in outs:
        assert rc == 1, err
        assert "rank 2" in err and "Traceback" not in err
    doc = load_results(tmp_path / "r.json")
    assert doc["status"] == "failed" and doc["failure"]["rank"] == 2
    assert "stopped answering" in doc["failure"]["reason"]
    assert len(doc["results"]) >= 2


@pytest.mark.slow
def test_killed_rank_under_a_launcher(tmp_path):
    procs = start_ranks(3, ["-t", "tcp", "--pattern", "pairwise", "-o", "r.json", *LONG_SWEEP], tmp_path)
    wait_for_records(tmp_path / "r.json", 2)
    procs[1].kill()
    killed_at = time.monotonic()
    outs = finish([procs[0], procs[2]], TIMEOUT + 20)
    assert time.monotonic() - killed_at < TIMEOUT + 5
    procs[1].communicate()
    for rc, _, err in outs:
        assert rc == 1 and "rank 1" in err and "Traceback" not in err, err
    doc = load_results(tmp_path / "r.json")
    assert doc["status"] == "failed" and len(doc["results"]) >= 2


def test_unreachable_store_fails_within_timeout(tmp_path):
    """A rank whose rendezvous host never comes up: one line, exit 1, bounded time."""
    env = dict(os.environ, RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()))
    start = time.monotonic()
    proc = subprocess.run([COMM_BENCH, "sweep", "--timeout", "3", "-o", "r.json"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 20
    assert proc.returncode == 1, proc.stderr
    assert "rendezvous store" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
