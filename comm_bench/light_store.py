"""A key/value rendezvous store in the standard library, for the transports that do not
hand the store to torch.distributed (tcp, rdma, grpc, mpi, cuda, nccl): importing torch
only to meet costs a rank 1-3 s before its first measurement (docs/benchmarks/startup.md).

It offers what rendezvous.Store uses of torch's TCPStore, with the same behaviour: rank 0
serves it (one thread per connection), `get` and `wait` block until the keys exist or the
timeout passes (TimeoutError), a lost server is a ConnectionError, `add` keeps a decimal
counter. Values are opaque bytes (rendezvous.Store seals them with the run's secret); a
message over MAX_MESSAGE bytes ends the connection that sent it. Unlike TCPStore's C++
server, this one needs rank 0's GIL: a transport whose start blocks on the other ranks with
the GIL held (MPI_Init) starts before the store (Transport.before_rendezvous).

Frames: a 4-byte length, then the op (one byte) and its fields, each a 4-byte length and
bytes. Replies: a status byte (0 ok, 1 timed out, 2 refused) and fields.
"""
from __future__ import annotations

import socket
import struct
import threading
import time

MAX_MESSAGE = 16 << 20        # rendezvous.Store sends values in parts of 4 MB
SET, GET, ADD, CHECK, DELETE, WAIT = range(6)
OK, TIMED_OUT, REFUSED = range(3)
_LEN = struct.Struct("!I")


def _frame(head: int, fields) -> bytes:
    body = bytes([head]) + b"".join(_LEN.pack(len(f)) + f for f in fields)
    return _LEN.pack(len(body)) + body


def _recv_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the rendezvous store closed the connection")
        buf += chunk
    return bytes(buf)


def _read_frame(sock):
    (size,) = _LEN.unpack(_recv_exact(sock, 4))
    if not 1 <= size <= MAX_MESSAGE:
        raise ConnectionError(f"a store message of {size} B (at most {MAX_MESSAGE})")
    body = _recv_exact(sock, size)
    fields, at = [], 1
    while at < len(body):
        (n,) = _LEN.unpack_from(body, at)
        fields.append(body[at + 4:at + 4 + n])
        at += 4 + n
    return body[0], fields


class _Server:
    def __init__(self, listen_fd: int):
        self.sock = socket.socket(fileno=listen_fd)
        self.data: dict = {}
        self.cond = threading.Condition()
        threading.Thread(target=self._accept, name="comm-bench store", daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with conn:
            try:
                while True:
                    op, f = _read_frame(conn)
                    conn.sendall(self._answer(op, f))
            except (OSError, ConnectionError, struct.error, IndexError, ValueError):
                return

    def _until(self, keys, timeout_ms: int) -> bool:
        """Wait (holding the condition) until every key exists; False on timeout."""
        return self.cond.wait_for(lambda: all(k in self.data for k in keys), timeout_ms / 1e3)

    def _answer(self, op, f) -> bytes:
        with self.cond:
            if op == SET:
                self.data[f[0]] = f[1]
                self.cond.notify_all()
                return _frame(OK, ())
            if op == GET:
                ok = self._until(f[:1], int(f[1]))
                return _frame(OK, (self.data[f[0]],)) if ok else _frame(TIMED_OUT, ())
            if op == ADD:
                value = int(self.data.get(f[0], b"0")) + int(f[1])
                self.data[f[0]] = str(value).encode()
                self.cond.notify_all()
                return _frame(OK, (str(value).encode(),))
            if op == CHECK:
                return _frame(OK, (b"1" if all(k in self.data for k in f) else b"0",))
            if op == DELETE:
                return _frame(OK, (b"1" if self.data.pop(f[0], None) is not None else b"0",))
            if op == WAIT:
                return _frame(OK if self._until(f[1:], int(f[0])) else TIMED_OUT, ())
        return _frame(REFUSED, ())


class LightStore:
    """A client (and, on the master, the server) with TCPStore's methods."""

    def __init__(self, host: str, port: int, is_master: bool, timeout: float, listen_fd: int | None = None):
        self.timeout = timeout
        self._server = _Server(listen_fd) if is_master else None
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

    def _call(self, op: int, fields, wait_s: float = 0.0):
        with self._lock:
            self._sock.settimeout(wait_s + max(10.0, self.timeout))   # the server answers a wait itself
            try:
                self._sock.sendall(_frame(op, [f.encode() if isinstance(f, str) else f for f in fields]))
                status, out = _read_frame(self._sock)
            except socket.timeout:
                raise TimeoutError("the rendezvous store did not answer") from None
            except OSError as exc:
                raise ConnectionError(f"the rendezvous store is gone ({exc.strerror or exc})") from None
        if status == TIMED_OUT:
            raise TimeoutError(f"timed out after {wait_s:.0f} s waiting for the rendezvous store's keys")
        if status != OK:
            raise ConnectionError("the rendezvous store refused a request")
        return out

    @staticmethod
    def _ms(seconds: float) -> str:
        return str(max(0, int(seconds * 1e3)))

    def set(self, key: str, value) -> None:
        self._call(SET, (key, value))

    def get(self, key: str) -> bytes:
        return self._call(GET, (key, self._ms(self.timeout)), self.timeout)[0]

    def add(self, key: str, amount: int) -> int:
        return int(self._call(ADD, (key, str(int(amount))))[0])

    def check(self, keys) -> bool:
        return self._call(CHECK, list(keys))[0] == b"1"

    def delete_key(self, key: str) -> bool:
        return self._call(DELETE, (key,))[0] == b"1"

    def wait(self, keys, timeout=None) -> None:
        """timeout: a datetime.timedelta, as TCPStore takes it, or seconds."""
        seconds = self.timeout if timeout is None else getattr(timeout, "total_seconds", lambda: timeout)()
        self._call(WAIT, [self._ms(seconds), *keys], seconds)
