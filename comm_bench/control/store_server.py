"""The server side of the rendezvous store (light_store.py is the client): one thread, one event loop (selectors), every
connection non-blocking, so rank 0 serves thousands of ranks with a socket each.

What it promises (docs/reliability.md, "The rendezvous store"):
- A connection must answer the server's challenge with the run's secret in its first
  frame (at most MAX_HELLO bytes) within AUTH_WINDOW seconds, or it is closed: a process
  without the secret can neither write, wait, nor make the server hold more than a hello.
- Memory is bounded: a connection's request is read only while it has no reply pending
  (so it holds at most one message in and one out); while replies not yet sent exceed
  MAX_OUTBOUND in total (4,096 ranks reading a 4 MB gather at once), further requests
  wait their turn; stored values are capped at MAX_STORED bytes in total (a SET beyond it
  is refused, naming the cap).
- A SET_QUIET is answered only when refused (SET_REFUSED, naming the key and why), as
  TCPStore answers no SET: a 256-rank barrier spent a third of this loop's time sending
  256 `OK`s nobody needed (docs/benchmarks/store.md). Everything else is answered in order.
- A blocked GET or WAIT is indexed by the keys it waits for: a SET wakes only its own
  waiters. Waits on the same keys share one entry per key (4,096 ranks waiting for the
  same 4,096 keys are indexed once, not 4,096 times). A WAIT names at most MAX_WAIT_KEYS keys.
- A MULTI_GET asked again for the same keys with the store unchanged gets the same reply
  object: the 4,096 readers of a gather share one reply, built and counted once.
- An accept that fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
  ENOMEM) drops that connection, never the server: the oldest unauthenticated connection
  is closed first, then a descriptor kept in reserve lets one pending connection be
  accepted and closed, so the backlog never wedges. The same happens before the store's
  connections would take the descriptors the rest of rank 0 needs (keep_free: a socket
  per peer and fd_limit.SPARE): a CI run's flood of 1,100 connections at a 1,024 limit
  left none, and rank 0 failed to write its results.
- Every field of every request is checked before use (issue 44): the number of fields of
  each op; a timeout or an ADD amount is a decimal whole number of at most 19 digits (a
  timeout is then clamped to 0..MAX_WAIT_MS); a counter stays within 64 bits; a CHECK,
  DELETE, MULTI_GET or MULTI_SET names at most MAX_LIST_KEYS keys. Anything else is
  refused with a reason, and the connection goes on.
- No request stops the loop: an exception while serving one connection (a bug) drops that
  connection, named in one line on stderr (the peer's address and the error), and every
  other connection goes on.
"""
from __future__ import annotations

import errno
import heapq
import hmac
import itertools
import os
import re
import resource
import selectors
import socket
import struct
import sys
import threading
import time
from itertools import filterfalse
from typing import Any

from .store_wire import (ABSENT, ADD, AUTH, CHECK, DELETE, GET, LATER, MAX_HELLO, MAX_MESSAGE,
                          MULTI_GET, MULTI_SET, OK, REFUSED, SET, SET_QUIET, SET_REFUSED, TIMED_OUT, WAIT,
                          _LEN, fields_of,
                          frame, proof, split_keys, unpack_values, values_frame)

AUTH_WINDOW = 10.0            # seconds a connection has to prove it holds the secret
MAX_STORED = 1 << 30          # bytes of keys and values held in total
MAX_WAIT_KEYS = 1 << 16       # keys one WAIT may name (a 4,096-rank gather names 4,096)
MAX_OUTBOUND = 256 << 20      # bytes of replies not wholly sent, in total: past it, requests wait
MAX_WAIT_MS = 1_000_000_000   # the longest a GET or WAIT waits (--timeout's own maximum, 1,000,000 s)
MAX_LIST_KEYS = 1 << 20       # keys one CHECK, DELETE, MULTI_GET or MULTI_SET may name
MAX_LOGGED = 20               # dropped connections named on stderr; later ones are counted only
_FIELDS = {SET: 2, SET_QUIET: 2, GET: 2, ADD: 2, CHECK: 1, DELETE: 1, WAIT: 2, MULTI_GET: 1, MULTI_SET: 3}
_WHOLE = re.compile(rb"-?[0-9]{1,19}")     # ASCII digits only: int() would take " 5", "1_0", "٣"
_COUNTER = 1 << 63


class _Refused(Exception):
    """A request whose fields are not what its op takes: refused with this reason."""


def _whole(field: bytes, what: str) -> int:
    if _WHOLE.fullmatch(field) is None:
        raise _Refused(f"a malformed request: its {what} must be a whole number of at most 19 digits")
    return int(field)


def _timeout_ms(field: bytes) -> int:
    return min(max(_whole(field, "timeout (ms)"), 0), MAX_WAIT_MS)
_SCARCE = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class _Conn:
    __slots__ = ("sock", "fd", "events", "inbox", "outbox", "retained", "authed", "challenge", "born", "waiter",
                 "peer")

    def __init__(self, sock: socket.socket, peer: str = "?") -> None:
        self.sock, self.fd, self.events, self.peer = sock, sock.fileno(), 0, peer
        self.inbox, self.outbox = bytearray(), memoryview(b"")  # a reply is sent from a view
        self.retained: bytes | None = None          # the reply object the view keeps alive, sent or not
        self.authed, self.challenge, self.born = False, os.urandom(32), time.monotonic()
        self.waiter: _Waiter | None = None

    @property
    def limit(self) -> int:
        """The largest frame (with its length) this connection may send now."""
        return MAX_MESSAGE + 4 if self.authed else MAX_HELLO + 4


class _Waiter:
    """A GET or WAIT blocked on keys not yet set."""
    __slots__ = ("conn", "group", "reply_key", "done")

    def __init__(self, conn: _Conn, group: _Group, reply_key: bytes | None) -> None:
        self.conn, self.group, self.reply_key, self.done = conn, group, reply_key, False


class _Group:
    """The waiters on one list of keys, and which of them are not yet set since the first of
    them began waiting. A later wait on the same list joins it while no key was deleted in
    between (then 'not set since' and 'absent now' are the same keys)."""
    __slots__ = ("name", "missing", "members", "deletes")

    def __init__(self, name: bytes, missing: set[bytes], deletes: int) -> None:
        self.members: set[_Waiter] = set()
        self.name, self.missing, self.deletes = name, missing, deletes


class StoreServer:
    def __init__(self, listen_fd: int, secret: bytes, keep_free: int = 0) -> None:
        """keep_free: descriptors of this process the store's connections leave to the rest."""
        self._listener = socket.socket(fileno=listen_fd)
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self._max_conns = None if soft == resource.RLIM_INFINITY else max(1, soft - keep_free)
        self._listener.setblocking(False)
        self._secret = secret
        self.data: dict[bytes, bytes] = {}
        self.stored = 0
        self._waiting: dict[bytes, set[_Group]] = {}        # key -> {_Group}
        self._groups: dict[bytes, _Group] = {}              # joined keys -> the _Group new waits on them join
        self._deletes = 0                         # keys deleted so far
        self._version = 0                         # changes with every SET and DELETE
        # (joined keys, version, reply) of the last MULTI_GET
        self._gather: tuple[bytes | None, int, bytes | None] = (None, -1, None)
        self._buffers: dict[int, list[Any]] = {}            # id -> [reply, connections sending it]
        self._deadlines: list[tuple[float, int, _Waiter]] = []  # heap of (deadline, n, _Waiter)
        self._order = itertools.count()
        self._conns: dict[int, _Conn] = {}                  # fd -> _Conn
        self._hellos: dict[int, _Conn] = {}                 # fd -> _Conn not yet authenticated, oldest first
        self._woken: list[_Conn] = []                  # connections whose wait ended: serve them again
        self.outbound = 0                         # bytes of replies not yet sent
        self._held: dict[int, _Conn] = {}                   # fd -> _Conn whose request waits for outbound room
        self._reserve = self._open_reserve()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self.refused_hellos = 0                   # connections closed for a wrong or missing proof
        self.dropped = 0                          # connections dropped because serving them raised
        threading.Thread(target=self._loop, name="comm-bench store", daemon=True).start()

    # -- the loop ------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            try:
                ready = self._sel.select(self._next_timeout())
            except InterruptedError:
                continue
            for key, events in ready:
                conn = key.data
                try:
                    if conn is None:
                        self._accept()
                    elif events & selectors.EVENT_WRITE:
                        self._write(conn)
                        self._serve(conn)
                    else:
                        self._read(conn)
                except Exception as exc:  # noqa: BLE001 - one connection's failure is not the store's
                    self._drop(conn, exc)
            self._expire()
            while self._woken:
                woken, self._woken = self._woken, []
                for conn in woken:
                    try:
                        self._serve(conn)
                    except Exception as exc:  # noqa: BLE001
                        self._drop(conn, exc)

    def _drop(self, conn: _Conn, exc: BaseException) -> None:
        """Serving `conn` raised (a bug): that connection goes, named in one line; the loop goes on."""
        self.dropped += 1
        what = f"{type(exc).__name__}: {exc}".encode("ascii", "backslashreplace").decode()
        what = what.replace("\n", " ")[:200]
        if conn is None:
            line = f"comm-bench store: accepting a connection failed ({what}); the store goes on"
        else:
            line = (f"comm-bench store: dropped the connection from {conn.peer} (a request failed: "
                    f"{what}); the store goes on")
            try:
                self._close(conn)
            except Exception:  # noqa: BLE001 - half-closed state: forget it, keep serving the rest
                self._conns.pop(conn.fd, None)
                self._hellos.pop(conn.fd, None)
                self._held.pop(conn.fd, None)
        if self.dropped <= MAX_LOGGED:
            if self.dropped == MAX_LOGGED:
                line += " (further dropped connections are counted, not named)"
            try:
                print(line, file=sys.stderr, flush=True)
            except Exception:  # noqa: BLE001 - stderr closed or full: the store still goes on
                pass

    def _next_timeout(self) -> float:
        due = time.monotonic() + 1.0
        if self._deadlines:
            due = min(due, self._deadlines[0][0])
        if self._hellos:
            due = min(due, next(iter(self._hellos.values())).born + AUTH_WINDOW)
        return max(0.0, due - time.monotonic())

    def _accept(self) -> None:
        for _ in range(64):   # a burst of arrivals, then the loop serves the others again
            if self._max_conns is not None and len(self._conns) >= self._max_conns:
                self._make_room()
                if len(self._conns) >= self._max_conns:
                    return    # every connection proved itself: the rest wait in the backlog
                continue
            try:
                sock, addr = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in _SCARCE:
                    self._make_room()
                    continue
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EINTR):
                    continue
                return        # anything else: try again on the next readiness
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = f"[{addr[0]}]:{addr[1]}" if sock.family == socket.AF_INET6 else f"{addr[0]}:{addr[1]}"
            conn = _Conn(sock, peer)
            self._conns[conn.fd] = self._hellos[conn.fd] = conn
            self._send(conn, frame(OK, (conn.challenge,)))
            self._update(conn)

    def _make_room(self) -> None:
        """Out of descriptors: drop the oldest connection that has not proved itself; if there
        is none, accept one pending connection on the reserve descriptor and close it."""
        if self._hellos:
            self.refused_hellos += 1
            self._close(next(iter(self._hellos.values())))
            return
        if self._reserve is not None:
            os.close(self._reserve)
            try:
                self._listener.accept()[0].close()
            except OSError:
                pass
            self._reserve = self._open_reserve()

    @staticmethod
    def _open_reserve() -> int | None:
        try:
            return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None

    def _close(self, conn: _Conn) -> None:
        if self._conns.pop(conn.fd, None) is None:
            return
        self._hellos.pop(conn.fd, None)
        self._held.pop(conn.fd, None)
        self._release(conn)
        if conn.waiter is not None:
            self._forget(conn.waiter)
        if conn.events:
            self._sel.unregister(conn.sock)
        conn.sock.close()

    # -- reading and writing ----------------------------------------------------------
    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(self._wanted(conn))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(conn)
            return
        conn.inbox += chunk
        self._serve(conn)

    @staticmethod
    def _wanted(conn: _Conn) -> int:
        """At most what completes the frame being read, so the inbox never holds much more."""
        if not conn.inbox:
            return min(conn.limit, 1 << 16)
        if len(conn.inbox) < 4:
            return 4 - len(conn.inbox)
        (size,) = _LEN.unpack_from(conn.inbox)
        return int(max(1, min(4 + size - len(conn.inbox), 1 << 20)))

    @staticmethod
    def _frame_in_hand(conn: _Conn) -> bool:
        """The inbox holds a whole frame, or a length _serve will refuse: read no further."""
        if len(conn.inbox) < 4:
            return False
        (size,) = _LEN.unpack_from(conn.inbox)
        return not 1 <= size <= conn.limit - 4 or len(conn.inbox) >= 4 + size

    def _serve(self, conn: _Conn) -> None:
        """Answer the inbox's whole frames in turn until one must wait or a reply is still
        being sent: a connection has one request in hand at a time."""
        while conn.fd in self._conns and conn.waiter is None and not conn.outbox and len(conn.inbox) >= 4:
            if self.outbound > MAX_OUTBOUND and conn.authed:
                self._held[conn.fd] = conn      # served again once replies have drained
                break
            (size,) = _LEN.unpack_from(conn.inbox)
            if not 1 <= size <= conn.limit - 4:
                self._close(conn)           # a bad or oversized frame ends that connection only
                return
            if len(conn.inbox) < 4 + size:
                break
            body = bytes(conn.inbox[4:4 + size])
            del conn.inbox[:4 + size]
            try:
                reply = self._answer(conn, body[0], fields_of(body))
            except _Refused as why:
                reply = _refusal(body, str(why))
            except (ValueError, IndexError, struct.error):
                reply = _refusal(body, "a malformed request")
            if reply is not None:
                self._send(conn, reply)
        self._update(conn)

    def _send(self, conn: _Conn, data: bytes) -> None:
        sent = 0
        if conn.outbox:
            data = bytes(conn.outbox) + data
            self._release(conn)
        else:
            # the usual reply goes whole into the socket at once: then nothing is held or
            # counted (a barrier's N wake-ups are N such sends)
            try:
                sent = conn.sock.send(data)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._close(conn)
                return
            if sent == len(data):
                return
        conn.outbox, conn.retained = memoryview(data)[sent:], data
        # one reply object sent on many connections (a shared gather) is memory held once
        entry = self._buffers.get(id(data))
        if entry is None:
            self._buffers[id(data)] = [data, 1]
            self.outbound += len(data)
        else:
            entry[1] += 1
        self._write(conn)

    def _release(self, conn: _Conn) -> None:
        data, conn.retained = conn.retained, None
        if data is None:
            return
        entry = self._buffers[id(data)]
        entry[1] -= 1
        if not entry[1]:
            del self._buffers[id(data)]
            self.outbound -= len(data)

    def _write(self, conn: _Conn) -> None:
        if not conn.outbox or conn.fd not in self._conns:
            return
        try:
            sent = conn.sock.send(conn.outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if sent < len(conn.outbox):
            conn.outbox = conn.outbox[sent:]
            return
        # a view keeps its whole reply alive until the last byte is sent: only then is it freed
        # (and counted as freed: 4,096 replies each a byte short of sent hold 16 GB)
        conn.outbox = memoryview(b"")
        self._release(conn)
        if self._held and self.outbound <= MAX_OUTBOUND // 2:
            held, self._held = list(self._held.values()), {}
            self._woken += held

    def _update(self, conn: _Conn) -> None:
        """Wait to write while a reply is unsent; else to read, unless the connection waits (a
        GET, a WAIT, room for replies) with a whole frame in hand already. A waiting connection
        stays registered: unregistering and registering it again cost two epoll calls per wait
        (a barrier is N waits), and its peer closing is seen at once, not at its deadline."""
        if conn.fd not in self._conns:
            return
        if conn.outbox:
            events = selectors.EVENT_WRITE
        elif conn.waiter is None and conn.fd not in self._held:
            events = selectors.EVENT_READ
        else:
            events = 0 if self._frame_in_hand(conn) else selectors.EVENT_READ
        if events == conn.events:
            return
        if not conn.events:
            self._sel.register(conn.sock, events, conn)
        elif not events:
            self._sel.unregister(conn.sock)
        else:
            self._sel.modify(conn.sock, events, conn)
        conn.events = events

    # -- the requests -------------------------------------------------------------------
    def _answer(self, conn: _Conn, op: int, f: list[Any]) -> bytes | None:
        if not conn.authed:
            if op != AUTH or len(f) != 1 or not hmac.compare_digest(f[0], proof(self._secret, conn.challenge)):
                self.refused_hellos += 1
                self._send(conn, _NOT_OURS)     # a small reply: the socket takes it at once
                self._close(conn)
                return None
            conn.authed = True
            del self._hellos[conn.fd]
            return frame(OK, ())
        if op not in _FIELDS:
            return frame(REFUSED, (b"an unknown request",))
        if len(f) != _FIELDS[op]:
            raise _Refused(f"a malformed request: {len(f)} fields where op {op} takes {_FIELDS[op]}")
        named = f[0].count(b"\0") + 1 if op in (CHECK, DELETE, MULTI_GET, MULTI_SET) else 0
        if named > MAX_LIST_KEYS:
            raise _Refused(f"a request naming {named} keys (at most {MAX_LIST_KEYS})")
        if op == SET_QUIET:
            why = self._set(f[0], f[1])
            return None if why is None else frame(SET_REFUSED, (f[0], why.encode()))
        if op == SET:
            why = self._set(f[0], f[1])
            return _SET_OK if why is None else frame(REFUSED, (why.encode(),))
        if op == GET:
            return self._block(conn, f[0], [f[0]], _timeout_ms(f[1]), reply_key=f[0])
        if op == ADD:
            amount, held = _whole(f[1], "amount"), self.data.get(f[0], b"0")
            if _WHOLE.fullmatch(held) is None:
                raise _Refused("an ADD to a key that does not hold a whole number of at most 19 digits")
            total = int(held) + amount
            if not -_COUNTER <= total < _COUNTER:
                raise _Refused(f"an ADD past a 64-bit counter ({int(held)} + {amount})")
            value = str(total).encode()
            why = self._set(f[0], value)
            return frame(OK, (value,)) if why is None else frame(REFUSED, (why.encode(),))
        if op == CHECK:
            return frame(OK, (b"1" if all(k in self.data for k in split_keys(f[0])) else b"0",))
        if op == DELETE:
            gone = 0
            for k in split_keys(f[0]):
                old = self.data.pop(k, None)
                if old is not None:
                    self.stored -= len(k) + len(old)
                    gone += 1
            self._deletes += gone
            self._version += 1
            return frame(OK, (str(gone).encode(),))
        if op == WAIT:
            keys = split_keys(f[1])
            if len(keys) > MAX_WAIT_KEYS:
                return frame(REFUSED, (f"a wait on {len(keys)} keys (at most {MAX_WAIT_KEYS})".encode(),))
            return self._block(conn, f[1], keys, _timeout_ms(f[0]))
        if op == MULTI_GET:
            name, version, reply = self._gather
            if version == self._version and name == f[0]:
                return reply
            reply = self._multi_get(split_keys(f[0]))
            self._gather = (f[0], self._version, reply)
            return reply
        if op == MULTI_SET:
            keys, values = split_keys(f[0]), unpack_values(f[1], f[2])
            if len(keys) != len(values) or any(isinstance(v, int) for v in values):
                return frame(REFUSED, (b"a malformed request",))
            for k, v in zip(keys, values):
                why = self._set(k, v)
                if why is not None:
                    return frame(REFUSED, (why.encode(),))
            return _SET_OK
        return frame(REFUSED, (b"an unknown request",))      # not reached: _FIELDS names every op

    def _set(self, key: bytes, value: bytes) -> str | None:
        """Store and wake the key's waiters; None, or why the SET is refused."""
        old = self.data.get(key)
        grown = len(key) + len(value) - (0 if old is None else len(key) + len(old))
        if self.stored + grown > MAX_STORED:
            return f"the store holds {self.stored} B already (at most {MAX_STORED})"
        self.data[key] = value
        self.stored += grown
        self._version += 1
        for g in self._waiting.pop(key, ()):
            g.missing.discard(key)
            if not g.missing:
                if self._groups.get(g.name) is g:
                    del self._groups[g.name]
                for w in list(g.members):
                    self._wake(w, OK)
        return None

    def _multi_get(self, keys: list[bytes]) -> bytes:
        room = MAX_MESSAGE - 64 - 4 * len(keys)
        values = list(map(self.data.get, keys))     # the common case without a loop in Python
        if None not in values:
            lengths = list(map(len, values))  # type: ignore[arg-type]  # None is not among them
            if sum(lengths) <= room:
                return values_frame(OK, lengths, values)  # type: ignore[arg-type]
        lengths, blobs = [], []
        get = self.data.get
        for k in keys:
            value = get(k)
            if value is None:
                lengths.append(ABSENT)
            elif len(value) <= room:
                lengths.append(len(value))
                blobs.append(value)
                room -= len(value)
            else:
                lengths.append(LATER)
        return values_frame(OK, lengths, blobs)

    def _block(self, conn: _Conn, name: bytes, keys: list[bytes], timeout_ms: int,
               reply_key: bytes | None = None) -> bytes | None:
        """name: the keys joined, as they came (a wait on the same list has the same name)."""
        g = self._groups.get(name)
        if g is None or g.deletes != self._deletes:
            missing = set(filterfalse(self.data.__contains__, keys))
            if not missing:
                return self._reply(reply_key)
            g = self._groups[name] = _Group(name, missing, self._deletes)
            for k in missing:
                self._waiting.setdefault(k, set()).add(g)
        w = _Waiter(conn, g, reply_key)
        g.members.add(w)
        conn.waiter = w
        heapq.heappush(self._deadlines, (time.monotonic() + timeout_ms / 1e3, next(self._order), w))
        return None

    def _reply(self, reply_key: bytes | None) -> bytes:
        # a WAIT's answer is one shared object: 4,096 waiters woken at once add no 4,096 replies
        return _SET_OK if reply_key is None else frame(OK, (self.data[reply_key],))

    def _forget(self, w: _Waiter) -> None:
        """A waiter answered, timed out or closed: out of the index."""
        w.done = True
        w.conn.waiter = None
        g = w.group
        g.members.discard(w)
        if g.members or not g.missing:
            return
        if self._groups.get(g.name) is g:     # its last waiter left: out of the index
            del self._groups[g.name]
        for k in g.missing:
            waiting = self._waiting.get(k)
            if waiting is not None:
                waiting.discard(g)
                if not waiting:
                    del self._waiting[k]

    def _wake(self, w: _Waiter, status: int) -> None:
        self._forget(w)
        conn = w.conn
        if conn.fd not in self._conns:
            return
        ready = status == OK and (w.reply_key is None or w.reply_key in self.data)
        self._send(conn, self._reply(w.reply_key) if ready else frame(TIMED_OUT, ()))
        if conn.inbox or conn.outbox or conn.events != selectors.EVENT_READ:
            self._woken.append(conn)  # served again by the loop: no recursion through _serve

    def _expire(self) -> None:
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, _, w = heapq.heappop(self._deadlines)
            if not w.done:
                try:
                    self._wake(w, TIMED_OUT)
                except Exception as exc:  # noqa: BLE001
                    self._drop(w.conn, exc)
        if self._deadlines and len(self._deadlines) > 4 * (len(self._conns) + 16):
            # finished waiters stay in the heap until their deadline: drop them in bulk
            self._deadlines = [d for d in self._deadlines if not d[2].done]
            heapq.heapify(self._deadlines)
        while self._hellos:
            oldest = next(iter(self._hellos.values()))
            if now - oldest.born <= AUTH_WINDOW:
                break
            self.refused_hellos += 1
            self._close(oldest)


def _refusal(body: bytes, why: str) -> bytes:
    """The answer to a request refused before it was served: a SET_QUIET's names its key,
    so that the client, which reads it ahead of a later reply, can say which SET failed."""
    if body[:1] != bytes([SET_QUIET]):
        return frame(REFUSED, (why.encode(),))
    try:
        key = fields_of(body)[0]
    except (IndexError, struct.error):
        key = b"?"
    return frame(SET_REFUSED, (key, why.encode()))


_SET_OK = frame(OK, ())
_NOT_OURS = frame(REFUSED, (b"this process does not hold the run's secret: its COMM_BENCH_SECRET or "
                            b"COMM_BENCH_SECRET_FILE, or (without them) its launcher, MASTER_ADDR, "
                            b"MASTER_PORT or job ids, differ from rank 0's",))
