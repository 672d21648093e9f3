"""The run's rendezvous store, hosted by rank 0: torch.distributed's TCPStore where torch
gets it (gloo, torch-nccl, torchrun's agent store), else light_store.LightStore.

Transports exchange connection data through it (addresses, QP numbers, NCCL
ids), and the sweep uses it for barriers, heartbeats, aborts and to gather
results on rank 0. Under mpirun the store's address is agreed through MPI;
otherwise it comes from MASTER_ADDR/MASTER_PORT (torchrun, srun recipes, or the
local spawner).

Rank 0 hosts the store on the address the ranks use only (loopback for local runs);
light_store admits only connections that prove they hold the run's secret (torch's
TCPStore admits anyone). On either, every value goes in sealed with an HMAC of the run
nonce (join.py), its key and content under the run's secret (secret.py): a value that
does not verify, forged or replayed from another run or attempt, is treated as absent
and counted (docs/reliability.md). Every failure of a store call ends the rank as a
failed run (RunFailed) naming the store's host.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import socket
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from ..errors import RunFailed
from . import fd_limit
from .light_store import LightStore, StoreRefused


class Store:
    """Thin wrapper over a TCPStore with collective helpers keyed by call order.

    Every rank calls the helpers in the same order, so a per-tag sequence number
    makes keys unique without any coordination.
    """

    def __init__(self, host: str, port: int, rank: int, world_size: int, timeout: float,
                 is_master: bool | None = None, *, secret: bytes, all_local: bool = True,
                 torch_store: bool = True, nonce: bytes = b"", rejected: set[str] | None = None) -> None:
        """torch_store: torch's TCPStore (needed where torch.distributed gets the store, and
        to reach torchrun's agent store); False: light_store.LightStore, without torch."""
        self.host, self.port = host, port
        self.rank, self.world_size, self.timeout = rank, world_size, timeout
        self.secret, self._torch = secret, torch_store
        self.nonce = nonce            # b"" until join.join agrees the run's
        self.rejected = set() if rejected is None else rejected   # keys whose value failed authentication
        self.joined: dict[str, Any] | None = None  # rank 0: how the ranks met (join.join)
        master = (rank == 0) if is_master is None else is_master
        try:
            fd = _listener(host, port, all_local) if master else None
            self._s = _torch_store(host, port, world_size, master, timeout, fd) if torch_store else \
                LightStore(host, port, master, timeout, fd, secret=secret,
                           keep_free=fd_limit.needed(world_size, "rank"))
        except Exception as exc:  # noqa: BLE001 - torch raises several types here
            where = "host the rendezvous store on" if master else "reach the rendezvous store at"
            raise RunFailed(f"rank {rank} could not {where} {host}:{port}: {_one_line(exc)}") from None
        self._seq: dict[str, int] = {}
        self._beats: dict[str, int] = {}
        self._progress_at = float("-inf")

    @property
    def raw(self) -> Any:
        """The underlying store (torch's TCPStore for torch.distributed process groups; what
        they exchange through it is not sealed)."""
        return self._s

    def client(self, timeout: float) -> Store:
        """A second connection (for another thread) with its own timeout."""
        return Store(self.host, self.port, self.rank, self.world_size, timeout, is_master=False,
                     secret=self.secret, torch_store=self._torch, nonce=self.nonce, rejected=self.rejected)

    def raw_call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) on the underlying store; any failure ends this rank as a failed run,
        naming the store's host (never an internal error)."""
        try:
            return fn(*args)
        except RunFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - each store raises its own types
            raise RunFailed(f"rank {self.rank}: could not {what} through the rendezvous store on "
                            f"rank 0 at {self.host}:{self.port} ({_one_line(exc)})") from None

    def values_raw(self, keys: Iterable[str]) -> list[Any]:
        """Each key's raw value or None where absent, without waiting, in as few calls as the
        store allows (a gather of 4,096 ranks is one call, not 4,096)."""
        keys = list(keys)
        if not self._torch:
            return self._s.multi_get(keys)
        present = [k for k in keys if self._s.check([k])]
        found = dict(zip(present, self._s.multi_get(present))) if present else {}
        return [found.get(k) for k in keys]

    def multi_set_raw(self, keys: Iterable[str], values: Iterable[bytes]) -> None:
        self._s.multi_set(list(keys), list(values))

    # -- sealed values -----------------------------------------------------------
    def _mac(self, key: str, payload: bytes) -> bytes:
        msg = self.nonce + b"\0" + key.encode() + b"\0" + payload
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest().encode()

    def _open(self, key: str, sealed: bytes | None) -> bytes | None:
        """The payload of a sealed value, or None (counted) if it was not sealed in this run
        with its secret: forged, or replayed from another run or attempt."""
        if sealed is None:
            return None
        mac, payload = sealed[:64], sealed[64:]
        if hmac.compare_digest(mac, self._mac(key, payload)):
            return payload
        self.rejected.add(key)
        return None

    # -- plain key/value -------------------------------------------------
    def set(self, key: str, value: str | bytes, confirmed: bool = False) -> None:
        """confirmed: return only once the store holds it. A set is not answered (neither
        store answers one), so a process that exits right after it could be seen gone by
        another before its value is there; a request with an answer on the same connection,
        served in order, proves it arrived."""
        if not isinstance(value, (bytes, str)):
            value = json.dumps(value)
        payload = value.encode() if isinstance(value, str) else value
        self.raw_call(f"set '{key}'", self._s.set, key, self._mac(key, payload) + payload)
        if confirmed:
            self.raw_call(f"set '{key}'", self._s.check, [key])

    def get(self, key: str) -> bytes:
        """The value of `key` (waiting for it); values another process forged are
        waited past until the real one arrives, up to the timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                payload = self._open(key, self._s.get(key))
            except StoreRefused as exc:     # an earlier set's refusal, read ahead of this answer
                raise RunFailed(f"rank {self.rank}: {_one_line(exc)} (rank 0 at {self.host}:{self.port})") from None
            except Exception as exc:  # noqa: BLE001
                raise RunFailed(f"rank {self.rank}: timed out after {self.timeout:.0f} s waiting for "
                                f"'{key}' in the rendezvous store ({_one_line(exc)})") from None
            if payload is not None:
                return payload
            if time.monotonic() > deadline:
                raise RunFailed(f"rank {self.rank}: '{key}' in the rendezvous store at {self.host}:"
                                f"{self.port} fails authentication: a process without this run's "
                                "secret is writing to the store (see docs/reliability.md)")
            time.sleep(0.05)

    def get_json(self, key: str) -> Any:
        return json.loads(self.get(key))

    def add(self, key: str, amount: int) -> int:
        """A raw counter: NOT authenticated, so nothing a rank acts on (use beat/beats)."""
        return int(self.raw_call(f"count '{key}'", self._s.add, key, amount))

    def check(self, keys: Iterable[str]) -> bool:
        """Whether every key holds a value sealed with this run's secret (a forged one
        counts as absent)."""
        return all(p is not None for p in self.payloads(keys))   # absent keys read as None

    def payloads(self, keys: Iterable[str]) -> list[bytes | None]:
        """Each key's sealed payload, None where absent, forged or replayed; never waits."""
        keys = list(keys)
        raw = self.raw_call("read keys", self.values_raw, keys)
        return [self._open(k, v) for k, v in zip(keys, raw)]

    def beat(self, key: str) -> None:
        """Bump this process's own authenticated counter `key` (a heartbeat)."""
        self._beats[key] = self._beats.get(key, 0) + 1
        self.set(key, str(self._beats[key]))

    def progressing(self) -> None:
        """This rank is at work on something the others wait for (rank 0 writing a 1,024-rank
        first pass): a beat, at most every quarter --timeout, that keeps their waits for a
        broadcast from it going (_wait's progress_of)."""
        now = time.monotonic()
        if now - self._progress_at >= min(1.0, self.timeout / 4):
            self._progress_at = now
            self.beat(f"{PROGRESS_KEY}/{self.rank}")

    def beats(self, key: str) -> int | None:
        """Another process's counter made by beat(), or None if absent or forged."""
        payload = self.payloads([key])[0]
        return None if payload is None else int(payload)

    # -- collectives over the store -----------------------------------------
    def _key(self, tag: str) -> str:
        n = self._seq.get(tag, 0)
        self._seq[tag] = n + 1
        return f"{tag}#{n}"

    # The store refuses messages over 8 MB: larger values travel as parts, and the
    # key itself, set last, says how many (so waiting on the key waits for them all).
    def _put(self, key: str, obj: object) -> None:
        data = json.dumps(obj).encode()
        if len(data) <= _PART_BYTES:
            self.set(key, data)
            return
        parts = range(0, len(data), _PART_BYTES)
        for i, at in enumerate(parts):
            self.set(f"{key}/part{i}", data[at:at + _PART_BYTES])
        self.set(key, _PARTS + str(len(parts)).encode())

    def _take_all(self, keys: list[str], delete: bool = False) -> list[Any]:
        """The JSON objects at `keys` (all set already), read in one call; a forged or replayed
        value is waited past as get() does; parts of large values are joined."""
        out, used = [], list(keys)
        for key, data in zip(keys, self.payloads(keys)):
            data = self.get(key) if data is None else data
            if data.startswith(_PARTS):
                names = [f"{key}/part{i}" for i in range(int(data[len(_PARTS):]))]
                data = b"".join(self.get(k) for k in names)
                used += names
            out.append(json.loads(data))
        if delete:
            self.raw_call("delete keys", self.delete_raw, used)
        return out

    def delete_raw(self, keys: Iterable[str]) -> None:
        if self._torch:
            for k in keys:
                self._s.delete_key(k)
        else:
            self._s.delete_keys(keys)

    def all_gather(self, tag: str, obj: object) -> list[Any]:
        """Every rank's JSON-serialisable `obj`, ordered by rank."""
        base = self._key(tag)
        self._put(f"{base}/{self.rank}", obj)
        keys = [f"{base}/{r}" for r in range(self.world_size)]
        self._wait(keys, what=tag)
        return self._take_all(keys)

    def gather_to(self, root: int, tag: str, obj: object) -> list[Any] | None:
        """On `root` the list of every rank's obj; None elsewhere."""
        base = self._key(tag)
        self._put(f"{base}/{self.rank}", obj)
        if self.rank != root:
            return None
        keys = [f"{base}/{r}" for r in range(self.world_size)]
        self._wait(keys, what=tag)
        return self._take_all(keys, delete=True)

    def broadcast(self, root: int, tag: str, obj: Any = None) -> Any:
        key = self._key(tag)
        if self.rank == root:
            self.set(key, json.dumps(obj))
            return obj
        # a timeout names the root, not the key; a root that still makes progress is waited for
        self._wait([key], what=tag, names=[str(root)], progress_of=root)
        return self.get_json(key)

    def barrier(self, tag: str = "barrier") -> None:
        """Rank 0 reads every arrival back sealed (a forged one cannot release it), then
        releases the others: 2N messages, not the N^2 of an all-gather."""
        base = self._key(tag)
        arrivals = [f"{base}/{r}" for r in range(self.world_size)]
        self.set(arrivals[self.rank], b"1")
        if self.rank == 0:
            self._wait(arrivals, what=tag)
            self._take_all(arrivals, delete=True)
            self.set(f"{base}/go", b"1")
        else:
            self._wait([f"{base}/go"], what=tag, arrivals=arrivals)
            self.get(f"{base}/go")

    def _wait(self, keys: list[str], what: str, arrivals: list[str] | None = None, names: list[str] | None = None,
              progress_of: int | None = None) -> None:
        """Wait for `keys`; on timeout name the ranks whose `arrivals` (default: keys) are
        missing: `names`, one per arrival, or else each arrival key's last part. With
        `progress_of` (a rank): wait on for another --timeout each time that rank said it
        made progress (progressing()) since the last look; fail once it said nothing for one."""
        start, seen = time.monotonic(), None
        while True:
            try:
                self._s.wait(keys, timedelta(seconds=self.timeout))
                return
            except StoreRefused as exc:     # not a wait that ran out: an earlier set failed
                raise RunFailed(f"rank {self.rank}: {_one_line(exc)} (rank 0 at {self.host}:{self.port})") from None
            except Exception:  # noqa: BLE001 - name the ranks that did not arrive
                pass
            if progress_of is None:
                break
            try:
                now = self.beats(f"{PROGRESS_KEY}/{progress_of}")
            except RunFailed:
                break           # the store is gone: said below
            if now is None or now == seen:
                break
            seen = now
        arrivals = keys if arrivals is None else arrivals
        try:
            present = self.values_raw(arrivals)
        except Exception:  # noqa: BLE001 - the store is gone as well
            raise RunFailed(f"rank {self.rank}: the rendezvous store on rank 0 at {self.host}:"
                            f"{self.port} stopped answering while waiting for '{what}'") from None
        names = names or [k.rsplit("/", 1)[-1] for k in arrivals]
        missing = [n for n, v in zip(names, present) if v is None]
        waited = time.monotonic() - start
        raise RunFailed(f"rank {self.rank}: rank(s) {rank_list(missing)} did not reach "
                        f"'{what}' within {waited:.0f} s")


def _torch_store(host: str, port: int, world_size: int, master: bool, timeout: float, listen_fd: int | None) -> Any:
    # torch's C++ logs (with stack frames) would bury our one-line errors,
    # which already say what failed; --debug keeps them
    if not os.environ.get("COMM_BENCH_DEBUG"):
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")
    from torch.distributed import TCPStore  # torch is imported only when ranks meet

    listen: dict[str, Any] = {"master_listen_fd": listen_fd} if master else {}
    return TCPStore(host, port, world_size if master else None, master, timedelta(seconds=timeout),
                    wait_for_workers=False, **listen)


def _listener(host: str, port: int, all_local: bool) -> int:
    """A socket listening on the address the ranks reach the store on (torch binds
    every interface otherwise). When ranks on other hosts use another name for a
    host whose own name resolves to loopback (/etc/hosts' 127.0.1.1), every interface."""
    family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    if ipaddress.ip_address(str(addr[0]).split("%")[0]).is_loopback and not all_local:
        addr = ("::" if family == socket.AF_INET6 else "0.0.0.0", port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr[:2] if family == socket.AF_INET else addr)
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock.detach()  # the store's server owns it from here


PROGRESS_KEY = "cb/progress"   # + "/<rank>": that rank's progressing() beats
_PART_BYTES = 4 << 20
_PARTS = b"\x00parts:"  # no JSON text starts with a NUL byte


def rank_list(names: Iterable[str | int]) -> str:
    """'3, 5-9, 12': a thousand missing ranks in one short line (names that are not
    numbers stand as they are)."""
    nums = sorted(int(n) for n in names if str(n).isdigit())
    out, i = [str(n) for n in names if not str(n).isdigit()], 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(out) or "?"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
