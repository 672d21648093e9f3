"""The store's SET is answered only when refused (issue 43): a set does not wait for the
server, a refusal still reaches the client naming its key, the connection stays in step
after one, and a dead store is still found by the next call that has an answer. Real
sockets on loopback, the server in this process's thread or in a process of its own."""
import multiprocessing
import socket
import time

import pytest

from comm_bench.control import store_server
from comm_bench.control.light_store import LightStore, StoreRefused, _read_frame
from comm_bench.control.rendezvous import Store, _listener
from comm_bench.control.store_wire import (AUTH, GET, OK, SET_QUIET, SET_REFUSED, TIMED_OUT, frame, proof)
from comm_bench.errors import RunFailed
from comm_bench.system.netutil import free_port

KEY = b"0123456789abcdef-quiet-set"


def serve(timeout=5.0):
    port = free_port()
    return LightStore("127.0.0.1", port, True, timeout, _listener("127.0.0.1", port, True), secret=KEY), port


def raw_client(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5.0)
    _, (challenge,) = _read_frame(s)
    s.sendall(frame(AUTH, (proof(KEY, challenge),)))
    assert _read_frame(s)[0] == OK
    return s


def test_a_quiet_set_has_no_answer_and_keeps_its_order():
    """Three SET_QUIETs and a GET sent at once: the first frame back is the GET's answer,
    holding the last value set (a connection's requests are served in order)."""
    _, port = serve()
    with raw_client(port) as s:
        s.sendall(b"".join(frame(SET_QUIET, (b"k", v)) for v in (b"1", b"2", b"3")) +
                  frame(GET, (b"k", b"1000")))
        assert [bytes(f) for f in _read_frame(s)[1]] == [b"3"]
        s.settimeout(0.3)
        with pytest.raises(socket.timeout):      # and nothing else came
            s.recv(1)


def test_a_malformed_quiet_set_is_refused_naming_its_key():
    _, port = serve()
    with raw_client(port) as s:
        s.sendall(frame(SET_QUIET, (b"lonely",)) + frame(GET, (b"lonely", b"0")))
        extra = bytearray()                       # both frames may come in one recv
        status, fields = _read_frame(s, extra=extra)
        assert status == SET_REFUSED and bytes(fields[0]) == b"lonely"
        assert b"fields" in bytes(fields[1])
        assert _read_frame(s, extra=extra)[0] == TIMED_OUT     # then the GET's own answer


def test_a_refused_set_is_raised_by_the_next_call_with_an_answer(monkeypatch):
    monkeypatch.setattr(store_server, "MAX_STORED", 4096)
    master, port = serve()
    client = LightStore("127.0.0.1", port, False, 5.0, secret=KEY)
    with pytest.raises(StoreRefused, match=r"refused to set 'too-big' \(the store holds .*at most 4096\)"):
        client.set("too-big", b"x" * 8192)       # raised here if the refusal is back already
        client.check(["anything"])
    # in step again: the next answers are this connection's own
    client.set("small", b"v")
    assert client.get("small") == b"v" and client.add("n", 2) == 2


def test_a_refusal_already_back_is_raised_by_the_next_set(monkeypatch):
    monkeypatch.setattr(store_server, "MAX_STORED", 4096)
    _, port = serve()
    client = LightStore("127.0.0.1", port, False, 5.0, secret=KEY)
    with pytest.raises(StoreRefused, match="'too-big'"):   # no call with an answer made
        client.set("too-big", b"x" * 8192)
        time.sleep(0.3)                           # the refusal has arrived by now
        client.set("next", b"1")
    client.set("after", b"1")
    assert client.get("after") == b"1"


def test_a_barrier_after_a_refused_set_names_the_key(monkeypatch):
    """rendezvous.Store: the refusal is the failure, not a wait for ranks that did arrive."""
    monkeypatch.setattr(store_server, "MAX_STORED", 1 << 16)
    port = free_port()
    ranks = [Store("127.0.0.1", port, r, 2, 2.0, secret=b"quiet-secret", torch_store=False) for r in range(2)]
    with pytest.raises(RunFailed, match=r"rank 1: .*refused to set 'huge'"):
        ranks[1].set("huge", b"x" * (1 << 17))   # raised here if the refusal is back already
        ranks[1].barrier("b")


def test_a_waiting_client_that_leaves_is_forgotten_at_once():
    """A connection blocked in a WAIT stays watched: its close ends its wait now, not at its
    deadline (600 s here)."""
    master, port = serve()
    s = raw_client(port)
    s.sendall(frame(GET, (b"never", b"600000")))
    time.sleep(0.2)
    server = master._server
    assert server.indexed == (1, 1)
    s.close()
    deadline = time.monotonic() + 5
    while server.indexed != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.indexed == (0, 0)


def _host(port, ready):
    LightStore("127.0.0.1", port, True, 30.0, _listener("127.0.0.1", port, True), secret=KEY)
    ready.set()
    time.sleep(60)


def test_a_dead_store_is_found_by_the_next_answered_call():
    """A set into a socket whose server died may still go out (the kernel takes it); the
    call after it that waits for an answer fails within the timeout."""
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    host = ctx.Process(target=_host, args=(port, ready))
    host.start()
    assert ready.wait(30)
    client = LightStore("127.0.0.1", port, False, 2.0, secret=KEY)
    client.set("a", b"1")
    host.kill()
    host.join(10)
    t = time.monotonic()
    with pytest.raises(ConnectionError):
        for _ in range(3):                # the first set after the death may be taken by the kernel
            client.set("b", b"2")
            client.check(["a"])
    assert time.monotonic() - t < 5
