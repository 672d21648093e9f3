"""The run's rendezvous store: torch.distributed's TCPStore, hosted by rank 0.

Transports exchange connection data through it (addresses, QP numbers, NCCL
ids), and the sweep uses it for barriers and to gather results on rank 0.
Under mpirun the store's address is agreed through MPI; otherwise it comes from
MASTER_ADDR/MASTER_PORT (torchrun, srun recipes, or the local spawner).
"""
from __future__ import annotations

import json
import os
import time
from datetime import timedelta

from .errors import RunFailed


class Store:
    """Thin wrapper over a TCPStore with collective helpers keyed by call order.

    Every rank calls the helpers in the same order, so a per-tag sequence number
    makes keys unique without any coordination.
    """

    def __init__(self, host: str, port: int, rank: int, world_size: int, timeout: float,
                 is_master: bool | None = None):
        # torch's C++ logs (with stack frames) would bury our one-line errors,
        # which already say what failed; --debug keeps them
        if not os.environ.get("COMM_BENCH_DEBUG"):
            os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
        from torch.distributed import TCPStore  # torch is imported only when ranks meet

        self.host, self.port = host, port
        self.rank, self.world_size, self.timeout = rank, world_size, timeout
        master = (rank == 0) if is_master is None else is_master
        try:
            self._s = TCPStore(host, port, world_size if master else None, master,
                               timedelta(seconds=timeout), wait_for_workers=False)
        except Exception as exc:  # noqa: BLE001 - torch raises several types here
            where = "host the rendezvous store on" if master else "reach the rendezvous store at"
            raise RunFailed(f"rank {rank} could not {where} {host}:{port}: {_one_line(exc)}") from None
        self._seq: dict = {}

    @property
    def raw(self):
        """The underlying torch TCPStore (for torch.distributed process groups)."""
        return self._s

    def client(self, timeout: float) -> "Store":
        """A second connection (for another thread) with its own timeout."""
        return Store(self.host, self.port, self.rank, self.world_size, timeout, is_master=False)

    # -- plain key/value -------------------------------------------------
    def set(self, key: str, value) -> None:
        self._s.set(key, value if isinstance(value, (bytes, str)) else json.dumps(value))

    def get(self, key: str) -> bytes:
        try:
            return self._s.get(key)
        except Exception as exc:  # noqa: BLE001
            raise RunFailed(f"rank {self.rank}: timed out after {self.timeout:.0f} s waiting for "
                            f"'{key}' in the rendezvous store ({_one_line(exc)})") from None

    def get_json(self, key: str):
        return json.loads(self.get(key))

    def add(self, key: str, amount: int) -> int:
        return self._s.add(key, amount)

    def check(self, keys) -> bool:
        return self._s.check(list(keys))

    # -- collectives over the store -----------------------------------------
    def _key(self, tag: str) -> str:
        n = self._seq.get(tag, 0)
        self._seq[tag] = n + 1
        return f"{tag}#{n}"

    # The store refuses messages over 8 MB: larger values travel as parts, and the
    # key itself, set last, says how many (so waiting on the key waits for them all).
    def _put(self, key: str, obj) -> None:
        data = json.dumps(obj).encode()
        if len(data) <= _PART_BYTES:
            self._s.set(key, data)
            return
        parts = range(0, len(data), _PART_BYTES)
        for i, at in enumerate(parts):
            self._s.set(f"{key}/part{i}", data[at:at + _PART_BYTES])
        self._s.set(key, _PARTS + str(len(parts)).encode())

    def _take(self, key: str, delete: bool = False):
        data = self._s.get(key)
        if data.startswith(_PARTS):
            names = [f"{key}/part{i}" for i in range(int(data[len(_PARTS):]))]
            data = b"".join(self._s.get(k) for k in names)
            for k in names if delete else ():
                self._s.delete_key(k)
        if delete:
            self._s.delete_key(key)
        return json.loads(data)

    def all_gather(self, tag: str, obj) -> list:
        """Every rank's JSON-serialisable `obj`, ordered by rank."""
        base = self._key(tag)
        self._put(f"{base}/{self.rank}", obj)
        keys = [f"{base}/{r}" for r in range(self.world_size)]
        self._wait(keys, what=tag)
        return [self._take(k) for k in keys]

    def gather_to(self, root: int, tag: str, obj):
        """On `root` the list of every rank's obj; None elsewhere."""
        base = self._key(tag)
        self._put(f"{base}/{self.rank}", obj)
        if self.rank != root:
            return None
        keys = [f"{base}/{r}" for r in range(self.world_size)]
        self._wait(keys, what=tag)
        return [self._take(k, delete=True) for k in keys]

    def broadcast(self, root: int, tag: str, obj=None):
        key = self._key(tag)
        if self.rank == root:
            self._s.set(key, json.dumps(obj))
            return obj
        self._wait([key], what=tag)
        return json.loads(self._s.get(key))

    def barrier(self, tag: str = "barrier") -> None:
        base = self._key(tag)
        self._s.set(f"{base}/{self.rank}", b"1")
        self._wait([f"{base}/{r}" for r in range(self.world_size)], what=tag)

    def _wait(self, keys, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            self._s.wait(keys, timedelta(seconds=self.timeout))
            return
        except Exception:  # noqa: BLE001 - name the ranks that did not arrive
            pass
        missing = [k.rsplit("/", 1)[-1] for k in keys if not self._safe_check(k)]
        waited = self.timeout - max(0.0, deadline - time.monotonic())
        raise RunFailed(f"rank {self.rank}: rank(s) {', '.join(missing) or '?'} did not reach "
                        f"'{what}' within {waited:.0f} s")

    def _safe_check(self, key: str) -> bool:
        try:
            return self._s.check([key])
        except Exception:  # noqa: BLE001
            return False


_PART_BYTES = 4 << 20
_PARTS = b"\x00parts:"  # no JSON text starts with a NUL byte


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
