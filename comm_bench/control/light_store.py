"""A key/value rendezvous store of comm-bench's own (no torch), for the transports that do not
hand the store to torch.distributed (tcp, rdma, grpc, mpi, cuda, nccl): importing torch
only to meet costs a rank 1-3 s before its first measurement (docs/benchmarks/startup.md).

It offers what rendezvous.Store uses of torch's TCPStore, with the same behaviour: `get`
and `wait` block until the keys exist or the timeout passes (TimeoutError), a lost server
is a ConnectionError, `add` keeps a decimal counter; plus `multi_get` (what is there,
without waiting) and `multi_set`. Rank 0 serves it from one thread running an event loop
(store_server.py, in C++): thousands of clients cost a socket each, not a thread each. A
call's socket work is one native call (_C.store_exchange, csrc/core/store_client.cpp) that
gives the GIL up once: a rank's client may share its interpreter with other threads.

Every connection proves first that it holds the run's secret (an HMAC of a challenge the
server draws), so a process without it can neither write nor make the server hold memory
or wait for it. Values are opaque bytes (rendezvous.Store seals them as well).

The wire format is store_wire.py's. `set` is TCPStore's: it does not wait for an answer
(the server answers a SET_QUIET only to refuse it); a refusal is raised, naming the key, by
this client's next call that it reaches before that call's own answer, or by a later `set`
that finds it already arrived. Calls on one connection are served in order, so a `get`
after a `set` sees it.
"""
from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from ..system import native
from .store_server import StoreServer
from .store_wire import (ABSENT, ADD, AUTH, CHECK, DELETE, GET, LATER, MAX_MESSAGE, MULTI_GET, MULTI_SET,
                         OK, SET_QUIET, SET_REFUSED, TIMED_OUT, WAIT, _LEN, fields_of, frame, join_keys,
                         pack_values, proof, unpack_values)


_MAX_MS = (1 << 31) - 1       # the longest wait one native call takes (poll's int)


class StoreRefused(ConnectionError):
    """The store refused a request (a quiet SET's refusal names its key)."""


def _holds_frame(buf: bytearray) -> bool:
    """buf begins with a whole frame (or a length _read_frame refuses without reading)."""
    if len(buf) < 4:
        return False
    (size,) = _LEN.unpack_from(buf)
    return len(buf) >= 4 + size or not 1 <= size <= MAX_MESSAGE


def _read_frame(sock: socket.socket, views: bool = False, extra: bytearray | None = None) -> tuple[int, list[Any]]:
    """One frame: a small one in a single recv; a large one into a buffer of its size.
    extra: bytes already read past the last frame, and where this call leaves what it reads
    past its own (a quiet SET's refusal and the next answer can arrive in one recv); without
    it, a frame must come alone."""
    head = b""
    if extra:
        head = bytes(extra)
        extra.clear()
    if not head:
        head = sock.recv(1 << 16)
    while 0 < len(head) < 4:
        more = sock.recv(4 - len(head))
        head += more
        if not more:
            break
    if len(head) < 4:
        raise ConnectionError("the rendezvous store closed the connection")
    (size,) = _LEN.unpack_from(head)
    if not 1 <= size <= MAX_MESSAGE:
        raise ConnectionError(f"a store message of {size} B (at most {MAX_MESSAGE})")
    if len(head) > 4 + size:
        if extra is None:
            raise ConnectionError("the rendezvous store sent a frame nobody asked for")
        extra += head[4 + size:]
    body = bytearray(size)
    got = min(size, len(head) - 4)
    body[:got] = head[4:4 + got]
    view = memoryview(body)
    while got < size:
        k = sock.recv_into(view[got:], min(size - got, 1 << 22))
        if not k:
            raise ConnectionError("the rendezvous store closed the connection")
        got += k
    return body[0], fields_of(body, views)


class LightStore:
    """A client (and, on the master, the server) with TCPStore's methods."""

    def __init__(self, host: str, port: int, is_master: bool, timeout: float, listen_fd: int | None = None,
                 *, secret: bytes, keep_free: int = 0) -> None:
        """keep_free: on the master, descriptors its server leaves to the rest of the process."""
        self.timeout = timeout
        self._server = StoreServer(listen_fd, secret, keep_free) if is_master and listen_fd is not None else None
        self._lock = threading.Lock()
        deadline = time.monotonic() + timeout
        while True:     # rank 0 may not be listening yet: retry, as TCPStore's clients do
            try:
                self._sock = socket.create_connection((host, port), timeout=max(1.0, timeout))
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no rendezvous store answered at {host}:{port} within "
                                       f"{timeout:.0f} s ({exc.strerror or exc})") from None
                time.sleep(0.05)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._fd = self._sock.fileno()
        self._exchange = native.require("_C").store_exchange
        self._timeout_now: float | None = None
        self._extra = bytearray()         # bytes read past the last frame
        try:
            self._sock.settimeout(max(1.0, timeout))
            self._timeout_now = max(1.0, timeout)
            _, (challenge,) = _read_frame(self._sock)
        except socket.timeout:
            self._sock.close()
            raise TimeoutError(f"the rendezvous store at {host}:{port} accepted the connection "
                               f"but said nothing within {max(1.0, timeout):.0f} s") from None
        except (OSError, ValueError, struct.error) as exc:
            self._sock.close()
            raise ConnectionError(f"the rendezvous store at {host}:{port} did not greet "
                                  f"({exc})") from None
        self._call(AUTH, (proof(secret, challenge),))

    def _call(self, op: int, fields: Iterable[str | bytes], wait_s: float = 0.0, views: bool = False,
              answered: bool = True) -> list[Any]:
        """answered=False: a SET_QUIET, sent without waiting (only a refusal comes back)."""
        limit = wait_s + max(1.0, self.timeout)      # the server answers a wait itself
        request = frame(op, [f.encode() if isinstance(f, str) else f for f in fields])
        refused, status, out = None, None, None
        with self._lock:
            try:
                # one native call sends the request and reads the start of its answer, giving the
                # GIL up once (csrc/core/store_client.cpp); a large answer's rest is read below
                reply = self._exchange(self._fd, request, answered, min(int(limit * 1e3), _MAX_MS))
                if reply.__class__ is int:      # -errno
                    raise socket.timeout() if reply == -errno.ETIMEDOUT else OSError(-reply, os.strerror(-reply))
                if not answered and not reply and not self._extra:
                    return []                   # a quiet SET, nothing back: the usual case
                unread = answered
                if answered and not self._extra and len(reply) >= 5 and reply[4] != SET_REFUSED and \
                        _LEN.unpack_from(reply)[0] + 4 == len(reply):
                    status, out = reply[4], fields_of(reply[4:], views)    # the usual answer: whole, alone
                    unread = False
                else:
                    self._extra += reply
                # refusals of earlier quiet SETs come first, in order; then this call's answer
                while unread or self._extra:
                    if not _holds_frame(self._extra) and limit != self._timeout_now:
                        self._sock.settimeout(limit)        # the socket's own reads wait as long
                        self._timeout_now = limit
                    status, out = _read_frame(self._sock, views, self._extra)
                    if status != SET_REFUSED:
                        break
                    refused = refused or out
                    status = None
            except socket.timeout:
                if refused is None:     # else the refusal read first is the cause: said below
                    raise TimeoutError(f"the rendezvous store did not answer within {limit:.0f} s") from None
            except OSError as exc:
                if refused is None:
                    raise ConnectionError(f"the rendezvous store is gone ({exc.strerror or exc})") from None
        if refused is not None:
            key, why = (bytes(f).decode(errors="replace") for f in (list(refused) + [b"?", b"?"])[:2])
            raise StoreRefused(f"the rendezvous store refused to set '{key}' ({why})")
        if not answered:
            if status is not None:
                raise ConnectionError(f"the rendezvous store answered a quiet SET (status {status})")
            return []
        if status == TIMED_OUT:
            raise TimeoutError(f"timed out after {wait_s:.0f} s waiting for the rendezvous store's keys")
        if status != OK:
            why = bytes(out[0]).decode(errors="replace") if out else "no reason given"
            raise StoreRefused(f"the rendezvous store refused a request ({why})")
        return out or []

    @staticmethod
    def _ms(seconds: float) -> str:
        return str(max(0, int(seconds * 1e3)))

    def set(self, key: str, value: str | bytes) -> None:
        self._call(SET_QUIET, (key, value), answered=False)

    def get(self, key: str) -> bytes:
        return bytes(self._call(GET, (key, self._ms(self.timeout)), self.timeout)[0])

    def add(self, key: str, amount: int) -> int:
        return int(self._call(ADD, (key, str(int(amount))))[0])

    def check(self, keys: Iterable[str]) -> bool:
        return bool(self._call(CHECK, (join_keys(list(keys)),))[0] == b"1")

    def delete_key(self, key: str) -> bool:
        return bool(self._call(DELETE, (key,))[0] == b"1")

    def delete_keys(self, keys: Iterable[str]) -> int:
        """How many of `keys` existed (and are gone now)."""
        keys, gone = list(keys), 0
        for at in range(0, len(keys), 4096):
            gone += int(self._call(DELETE, (join_keys(keys[at:at + 4096]),))[0])
        return gone

    def wait(self, keys: Iterable[str], timeout: float | timedelta | None = None) -> None:
        """timeout: a datetime.timedelta, as TCPStore takes it, or seconds."""
        seconds = self.timeout if timeout is None else \
            timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        self._call(WAIT, (self._ms(seconds), join_keys(list(keys))), seconds)

    def multi_get(self, keys: Iterable[str]) -> list[Any]:
        """Each key's value, or None where it is absent; never waits. The server answers as
        many as fit one message; the rest are asked again."""
        keys = list(keys)
        found: list[Any] = [None] * len(keys)
        todo = list(range(len(keys)))
        while todo:
            lengths, blob = self._call(MULTI_GET, (join_keys([keys[i] for i in todo]),), views=True)
            values = unpack_values(lengths, blob)
            if len(todo) == len(keys) and all(map(bytes.__instancecheck__, values)):
                return values           # all there in one reply: no loop in Python
            later = []
            for i, v in zip(todo, values):
                if v == LATER:
                    later.append(i)
                elif v != ABSENT:
                    found[i] = v
            if len(later) == len(todo):
                raise ConnectionError(f"the rendezvous store holds a value too large to return "
                                      f"(at most {MAX_MESSAGE} B)")
            todo = later
        return found

    def multi_set(self, keys: Iterable[str], values: Iterable[bytes]) -> None:
        batch: list[tuple[str, bytes]] = []
        size = 0
        for k, v in zip(keys, values):
            if batch and size + len(k) + len(v) > MAX_MESSAGE // 2:
                self._multi_set(batch)
                batch, size = [], 0
            batch.append((k, v))
            size += len(k) + len(v) + 8
        if batch:
            self._multi_set(batch)

    def _multi_set(self, pairs: list[tuple[str, bytes]]) -> None:
        values = [v for _, v in pairs]
        self._call(MULTI_SET, (join_keys([k for k, _ in pairs]), *pack_values([len(v) for v in values], values)))
