"""Shared test helpers: run the real CLI in subprocesses, find rank processes.

A plain module (not conftest.py): tests import it by name, and tests/rdma_vm has a
conftest.py of its own, so a module called conftest would be ambiguous."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
COMM_BENCH = str(BIN / "comm-bench")


def run_cli(*args, timeout=120, env=None, check_rc=None, cwd=None):
    """Run `comm-bench ARGS` as a user would; returns CompletedProcess (text)."""
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("COMM_BENCH_DEBUG", None)
    proc = subprocess.run([COMM_BENCH, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd)
    if check_rc is not None:
        assert proc.returncode == check_rc, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


def load_results(path):
    with open(path) as f:
        return json.load(f)


def assert_no_traceback(proc):
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


def rank_pids(parent_pid: int) -> dict:
    """{rank: pid} of the processes started (directly) by `parent_pid` with a RANK variable."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != parent_pid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except (OSError, ValueError, IndexError):
            continue
        if b"RANK" in env:
            out[int(env[b"RANK"])] = int(entry)
    return out
