"""Process lifetime: local ranks die with their parent (SIGTERM as timeout, systemd and
Slurm send it; SIGKILL through PR_SET_PDEATHSIG), a stopped rank (SIGSTOP: a hang that
answers nothing, the store's host included) is named as the cause within --timeout, and
the results document stays valid with what was measured."""
import os
import signal
import subprocess
import time

import pytest

from cbtest import COMM_BENCH, load_results, rank_pids
from test_failures import finish, pid_gone, start_ranks, wait_for_records

TIMEOUT = 6
# many small sizes: a record every fraction of a second for minutes, and no pair waits
# on a busy peer anywhere near TIMEOUT (large sizes with a short timeout fail by themselves);
# uint8, so every size of the 1.05 steps is a whole number of elements
SWEEP = ["sweep", "-t", "tcp", "--nprocs", "3", "--pattern", "pairwise", "-d", "uint8", "-b", "1K", "-e", "4M",
         "-f", "1.05", "-n", "200", "-w", "1", "--no-progress", "--timeout", str(TIMEOUT)]


def start_sweep(out, *more):
    parent = subprocess.Popen([COMM_BENCH, *SWEEP, *more, "-o", out], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    wait_for_records(out, 3)
    pids = rank_pids(parent.pid)
    assert set(pids) == {0, 1, 2}
    return parent, pids


def all_gone(pids, limit=15):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if all(pid_gone(p) for p in pids):
            return True
        time.sleep(0.1)
    for p in pids:  # do not leave them behind for the next test
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return False


def master_port(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return env[b"MASTER_PORT"].decode()


def one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.slow
def test_sigterm_of_the_parent_stops_the_ranks_and_marks_the_document(tmp_path):
    out = tmp_path / "r.json"
    parent, pids = start_sweep(out)
    parent.send_signal(signal.SIGTERM)
    _, err = parent.communicate(timeout=30)
    assert parent.returncode == 128 + signal.SIGTERM
    assert all_gone(pids.values(), 10)
    assert "SIGTERM" in one_line(err)
    doc = load_results(out)
    assert doc["status"] == "failed" and "SIGTERM" in doc["failure"]["reason"]
    assert len(doc["results"]) >= 3


@pytest.mark.slow
def test_sigkill_of_the_parent_kills_the_ranks(tmp_path):
    out = tmp_path / "r.json"
    parent, pids = start_sweep(out, "--timeout", "60")  # orphans would run on for a minute
    parent.kill()
    parent.wait(timeout=30)
    assert all_gone(pids.values(), 15)
    assert len(load_results(out)["results"]) >= 3  # still a valid document


@pytest.mark.slow
@pytest.mark.parametrize("victim", [0, 1])
def test_stopped_rank_is_the_cause(tmp_path, victim):
    """Rank 0 hosts the store: the others must not wait on it for ever. Rank 1 stopped
    must not be blamed on rank 0, which only noticed it."""
    out = tmp_path / "r.json"
    parent, pids = start_sweep(out)
    os.kill(pids[victim], signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        _, err = parent.communicate(timeout=TIMEOUT + 40)
    finally:
        os.kill(pids[victim], signal.SIGCONT) if not pid_gone(pids[victim]) else None
    assert time.monotonic() - stopped_at < TIMEOUT + 30
    assert parent.returncode == 1
    assert f"rank {victim}" in one_line(err) and "Traceback" not in err
    assert all_gone(pids.values(), 10)
    doc = load_results(out)
    assert doc["status"] == "failed" and doc["failure"]["rank"] == victim
    assert len(doc["results"]) >= 3


@pytest.mark.slow
def test_stopped_store_host_under_a_launcher(tmp_path):
    """No parent sees the ranks: each of them must stop by itself, naming rank 0."""
    procs = start_ranks(3, ["-t", "tcp", "--pattern", "pairwise", "-o", "r.json", *SWEEP[5:]],
                        tmp_path)
    try:
        wait_for_records(tmp_path / "r.json", 2)
        procs[0].send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        for p in procs[1:]:
            _, err = p.communicate(timeout=TIMEOUT + 40)
            assert p.returncode == 1 and "rank 0" in one_line(err), err
        assert time.monotonic() - stopped_at < TIMEOUT + 30
    finally:
        for p in procs:
            p.kill()
            p.communicate()


@pytest.mark.slow
def test_two_processes_with_one_rank(tmp_path):
    """RANK=1 twice: the second is refused with exit 2 at once, not run alongside."""
    procs = start_ranks(2, ["-t", "tcp", "-o", "r.json", *SWEEP[5:]], tmp_path)
    try:
        wait_for_records(tmp_path / "r.json", 2)
        env = dict(os.environ, RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=master_port(procs[0].pid))
        env.pop("COMM_BENCH_DEBUG", None)
        dup = subprocess.run([COMM_BENCH, "sweep", "-e", "1K", "--timeout", "20", "--no-progress",
                              "-o", "d.json"], env=env, cwd=tmp_path, text=True, capture_output=True,
                             timeout=60)
        assert dup.returncode == 2, dup.stderr
        assert "already runs as rank 1" in one_line(dup.stderr)
    finally:
        for p in procs:
            p.kill()
            p.communicate()


def mpi_rank_pids(limit=60):
    """{rank: pid} of this test's mpi ranks (children of mpirun's daemons, not ours)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = {}
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            except (OSError, ValueError):
                continue
            if env.get(b"COMM_BENCH_TEST_RUN") == TEST_RUN and b"OMPI_COMM_WORLD_RANK" in env:
                found[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(entry)
        if len(found) == 3:
            return found
        time.sleep(0.2)
    raise AssertionError(f"mpi ranks not found: {found}")


TEST_RUN = str(os.getpid()).encode()


@pytest.mark.slow
def test_killed_mpi_rank_is_the_cause(tmp_path):
    """Only mpirun is our child: the cause is read from its notice, not blamed on rank 0."""
    from comm_bench.registry import get

    ok, why = get("mpi").probe()
    if not ok:
        pytest.skip(why)
    out = tmp_path / "r.json"
    parent = subprocess.Popen([COMM_BENCH, *SWEEP[:2], "mpi", *SWEEP[3:], "-o", out],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, COMM_BENCH_TEST_RUN=TEST_RUN.decode()))
    wait_for_records(out, 3)
    pids = mpi_rank_pids()
    os.kill(pids[1], signal.SIGKILL)
    _, err = parent.communicate(timeout=TIMEOUT + 40)
    assert parent.returncode == 1
    line = one_line(err)
    assert "rank 1" in line and "signal 9" in line, err
    assert all_gone(pids.values(), 10)
    doc = load_results(out)
    assert doc["status"] == "failed" and doc["failure"]["rank"] == 1, doc["failure"]
    assert len(doc["results"]) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("victim", [0, 1])
def test_sigterm_under_a_launcher_ends_the_run_as_failed(tmp_path, victim):
    """scancel, a time limit or torchrun stopping its group send SIGTERM to the ranks
    themselves (no comm-bench parent): the signalled rank exits 143 saying so, the others
    stop too, and the document keeps what was measured, marked failed with the reason
    (rank 0 used to die with it still "running")."""
    procs = start_ranks(3, ["-t", "tcp", "--pattern", "pairwise", "-o", "r.json", *SWEEP[5:]], tmp_path)
    try:
        wait_for_records(tmp_path / "r.json", 3)
        procs[victim].send_signal(signal.SIGTERM)
        outs = finish(procs, TIMEOUT + 40)
    finally:
        for p in procs:
            p.kill()
    code, _, err = outs[victim]
    assert code == 143 and "interrupted by SIGTERM" in one_line(err), (code, err)
    assert all(c != 0 for c, _, _ in outs), [c for c, _, _ in outs]
    doc = load_results(tmp_path / "r.json")
    assert doc["status"] == "failed", doc["status"]
    assert doc["failure"]["rank"] == victim and "SIGTERM" in doc["failure"]["reason"], doc["failure"]
    assert len(doc["results"]) >= 3
