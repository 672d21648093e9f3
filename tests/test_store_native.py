"""The store's loop in C++ (csrc/core/store_*.cpp) against the Python side of its wire
(store_wire.py): the handshake's digest is store_wire.proof's for keys and challenges of
any length, frames split or run together on the wire are read alike, values of every size
up to a message come back whole, and the counters Python reads say what happened."""
import random
import socket
import time

import pytest

from comm_bench.control.light_store import LightStore, _read_frame
from comm_bench.control.rendezvous import _listener
from comm_bench.control.store_server import StoreServer
from comm_bench.control.store_wire import (AUTH, GET, MAX_MESSAGE, MULTI_GET, OK, SET, SET_QUIET, frame,
                                           join_keys, proof, unpack_values)
from comm_bench.system.netutil import free_port


def serve(secret):
    port = free_port()
    return StoreServer(_listener("127.0.0.1", port, True), secret), port


def hello(port, secret):
    s = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    _, (challenge,) = _read_frame(s)
    s.sendall(frame(AUTH, (proof(secret, challenge),)))
    return s


@pytest.mark.parametrize("secret_len", [1, 32, 63, 64, 65, 200])
def test_the_handshake_digest_is_store_wire_proof(secret_len):
    """HMAC-SHA256 in C++: keys shorter and longer than a block (64 B) are hashed alike."""
    secret = random.Random(secret_len).randbytes(secret_len)
    server, port = serve(secret)
    with hello(port, secret) as s:
        assert _read_frame(s)[0] == OK
    with hello(port, secret + b"x") as s:
        assert _read_frame(s)[0] != OK
        assert s.recv(1) == b""                  # and closed
    deadline = time.monotonic() + 5
    while server.refused_hellos < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.refused_hellos == 1


def test_frames_split_byte_by_byte_or_run_together_are_read_alike():
    secret = b"native-secret"
    _, port = serve(secret)
    with hello(port, secret) as s:
        assert _read_frame(s)[0] == OK
        wire = frame(SET, (b"a", b"1")) + frame(SET_QUIET, (b"b", b"2")) + frame(GET, (b"b", b"1000"))
        for i in range(len(wire)):
            s.sendall(wire[i:i + 1])
            time.sleep(0.001)
        extra = bytearray()
        assert _read_frame(s, extra=extra) == (OK, [])
        status, fields = _read_frame(s, extra=extra)
        assert status == OK and bytes(fields[0]) == b"2"
        s.sendall(wire * 50)                      # 150 frames at once: 100 answers, in order
        got = [_read_frame(s, extra=extra) for _ in range(100)]
        assert [st for st, _ in got] == [OK] * 100 and [bytes(f[0]) for _, f in got[1::2]] == [b"2"] * 50


def test_values_of_every_size_come_back_whole():
    secret = b"native-secret"
    port = free_port()
    master = LightStore("127.0.0.1", port, True, 10.0, _listener("127.0.0.1", port, True), secret=secret)
    rng = random.Random(7)
    sizes = [0, 1, 4095, 65536, 65537, (1 << 20) + 3, MAX_MESSAGE - 128]
    values = [rng.randbytes(n) for n in sizes]
    for n, v in zip(sizes, values):
        master.set(f"v/{n}", v)
        assert master.get(f"v/{n}") == v
    keys = [f"v/{n}" for n in sizes]
    with hello(port, secret) as s:
        assert _read_frame(s)[0] == OK
        s.sendall(frame(MULTI_GET, (join_keys(keys),)))
        status, (lengths, blob) = _read_frame(s)
        got = unpack_values(bytes(lengths), bytes(blob))
    assert status == OK
    assert got[:-1] == values[:-1] and got[-1] == -2     # the last one did not fit beside the rest
    assert master.multi_get(keys) == values              # the client asks again for it


def test_the_wait_index_is_emptied_when_waits_end():
    secret = b"native-secret"
    port = free_port()
    master = LightStore("127.0.0.1", port, True, 10.0, _listener("127.0.0.1", port, True), secret=secret)
    waiters = [hello(port, secret) for _ in range(8)]
    for s in waiters:
        assert _read_frame(s)[0] == OK
        s.sendall(frame(GET, (b"late", b"10000")))
    deadline = time.monotonic() + 5
    while master._server.indexed != (1, 1) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert master._server.indexed == (1, 1)              # 8 waits on one key: one group
    master.set("late", b"v")
    for s in waiters:
        status, fields = _read_frame(s)
        assert status == OK and bytes(fields[0]) == b"v"
        s.close()
    deadline = time.monotonic() + 5
    while master._server.indexed != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert master._server.indexed == (0, 0)


@pytest.mark.parametrize("helpers", ["0", "3"])
def test_a_release_of_many_waiters_reaches_each_once(monkeypatch, helpers):
    """A SET that ends 300 waits sends their replies from the send pool's threads
    (COMM_BENCH_STORE_SEND_THREADS; by default a quarter of the cores): every waiter gets
    its own answer, once, and its connection goes on in step."""
    monkeypatch.setenv("COMM_BENCH_STORE_SEND_THREADS", helpers)
    secret = b"native-secret"
    port = free_port()
    master = LightStore("127.0.0.1", port, True, 10.0, _listener("127.0.0.1", port, True), secret=secret)
    waiters = [hello(port, secret) for _ in range(300)]
    for i, s in enumerate(waiters):
        assert _read_frame(s)[0] == OK
        s.sendall(frame(GET, (b"go", b"10000")) + frame(SET_QUIET, (b"after/%d" % i, b"x")) +
                  frame(GET, (b"after/%d" % i, b"10000")))
    time.sleep(0.2)
    master.set("go", b"now")
    for i, s in enumerate(waiters):
        extra = bytearray()
        status, fields = _read_frame(s, extra=extra)
        assert status == OK and bytes(fields[0]) == b"now"
        status, fields = _read_frame(s, extra=extra)
        assert status == OK and bytes(fields[0]) == b"x" and not extra
        s.close()
