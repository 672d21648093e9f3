"""Run the rdma transport across forked ranks, without torch (for the Soft-RoCE VM).

Under QEMU software emulation a Python process that imports torch takes minutes
to start, so the in-VM tests fork ranks from one already-started interpreter and
give them a file-backed store with the same calls as comm_bench.control.rendezvous.Store
(set/get/all_gather/barrier). The transport code under test is the real one;
only the rendezvous is a stand-in. `comm-bench sweep` itself (with the torch
store) is exercised by test_sweep_cli.py.
"""
from __future__ import annotations

import json
import os
import signal
import tempfile
import time
import traceback

from comm_bench.transports.base import RankContext


class FileStore:
    """Keys are files in a shared folder; get() waits for a key (tmpfs: cheap)."""

    def __init__(self, folder: str, rank: int, world_size: int, timeout: float):
        self.folder, self.rank, self.world_size, self.timeout = folder, rank, world_size, timeout
        self._seq: dict = {}

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, key.replace("/", "%"))

    def set(self, key, value) -> None:
        data = value if isinstance(value, bytes) else (value.encode() if isinstance(value, str)
                                                        else json.dumps(value).encode())
        tmp = self._path(key) + f".tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, self._path(key))

    def get(self, key) -> bytes:
        deadline = time.monotonic() + self.timeout
        path = self._path(key)
        pause = 0.0005
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                from comm_bench.errors import RunFailed
                raise RunFailed(f"rank {self.rank}: timed out waiting for '{key}' in the store")
            # back off to 10 ms: a rank waiting out its peer's bandwidth run must not take
            # the (emulated) CPUs from it; torch's store blocks in the kernel instead
            time.sleep(pause)
            pause = min(pause * 1.5, 0.01)
        with open(path, "rb") as f:
            return f.read()

    def _key(self, tag):
        n = self._seq.get(tag, 0)
        self._seq[tag] = n + 1
        return f"{tag}#{n}"

    def all_gather(self, tag, obj) -> list:
        base = self._key(tag)
        self.set(f"{base}/{self.rank}", json.dumps(obj))
        return [json.loads(self.get(f"{base}/{r}")) for r in range(self.world_size)]

    def barrier(self, tag="barrier") -> None:
        self.all_gather(tag, 1)


def run_ranks(n: int, body, *, timeout: float = 30.0, options=None, max_bytes=1 << 20,
              ops=("write", "read", "send", "write_imm"), kill=None, wall=300.0) -> list:
    """Fork n ranks; each sets up the transport and returns body(transport, rank) (JSON-able).

    Returns per rank {"ok": result} or {"error": "Type: message", "exit": code}.
    kill=(rank, seconds): SIGKILL that rank that long after it set up (peer-death tests).
    """
    from comm_bench.transports.rdma import RdmaTransport

    folder = tempfile.mkdtemp(prefix="cb-rdma-")
    pids = []
    for rank in range(n):
        pid = os.fork()
        if pid == 0:  # the rank
            code = 0
            try:
                store = FileStore(folder, rank, n, timeout)
                ctx = RankContext(rank=rank, world_size=n, local_rank=rank, local_world_size=n,
                                  host="vm", addr="127.0.0.1", store=store, timeout=timeout,
                                  options=dict(options or {}), max_bytes=max_bytes, ops=tuple(ops))
                t = RdmaTransport()
                t.setup(ctx)
                store.set(f"up/{rank}", b"1")
                out = {"ok": body(t, rank)}
                t.teardown()
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                out = {"error": f"{type(exc).__name__}: {exc}", "exit": getattr(exc, "exit_code", 1),
                       "trace": traceback.format_exc()}
                code = 1
            with open(os.path.join(folder, f"result{rank}.json"), "w") as f:
                json.dump(out, f)
            os._exit(code)
        pids.append(pid)
    if kill:
        victim, after = kill
        FileStore(folder, -1, n, wall).get(f"up/{victim}")
        time.sleep(after)
        os.kill(pids[victim], signal.SIGKILL)
    deadline = time.monotonic() + wall
    for pid in pids:
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.01)
    results = []
    for rank in range(n):
        path = os.path.join(folder, f"result{rank}.json")
        if os.path.exists(path):
            with open(path) as f:
                results.append(json.load(f))
        else:
            results.append({"error": "killed", "exit": -9})
    return results
