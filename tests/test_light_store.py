"""The standard-library rendezvous store (comm_bench/control/light_store.py): what rendezvous.Store
relies on, on real sockets, against a server in a thread and in another process."""
import multiprocessing
import os
import socket
import threading
import time

import pytest

from comm_bench.control.light_store import LightStore, _read_frame
from comm_bench.control.store_wire import AUTH, MAX_HELLO, MAX_MESSAGE, OK, frame, proof
from comm_bench.system.netutil import free_port
from comm_bench.control.rendezvous import _listener

KEY = b"0123456789abcdef-light-store"


def serve(timeout=5.0):
    port = free_port()
    return LightStore("127.0.0.1", port, True, timeout, _listener("127.0.0.1", port, True), secret=KEY), port


def test_set_get_check_add_delete():
    master, port = serve()
    client = LightStore("127.0.0.1", port, False, 5.0, secret=KEY)
    master.set("a", b"1")
    assert client.get("a") == b"1" and client.check(["a"]) and not client.check(["a", "b"])
    assert [client.add("n", 2), master.add("n", 3)] == [2, 5]
    assert client.delete_key("a") and not client.delete_key("a") and not master.check(["a"])
    big = os.urandom(4 << 20)            # rendezvous.Store's part size
    client.set("big", big)
    assert master.get("big") == big


def test_get_and_wait_block_until_the_key_is_set():
    master, port = serve()
    client = LightStore("127.0.0.1", port, False, 5.0, secret=KEY)
    threading.Timer(0.3, master.set, args=("late", b"x")).start()
    t = time.monotonic()
    assert client.get("late") == b"x"
    assert 0.2 < time.monotonic() - t < 3
    threading.Timer(0.3, master.set, args=("w2", b"y")).start()
    master.set("w1", b"y")
    client.wait(["w1", "w2"])
    assert client.check(["w1", "w2"])


def test_a_missing_key_times_out_after_the_timeout():
    _, port = serve()
    client = LightStore("127.0.0.1", port, False, 0.5, secret=KEY)
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        client.get("never")
    with pytest.raises(TimeoutError):
        client.wait(["never"], 0.3)
    assert time.monotonic() - t < 3


def _host(port, ready):
    store = LightStore("127.0.0.1", port, True, 30.0, _listener("127.0.0.1", port, True), secret=KEY)
    store.set("up", b"1")
    ready.set()
    time.sleep(60)


def test_a_client_started_first_waits_for_the_server_and_sees_it_die():
    """Ranks may start before rank 0 listens; a rank 0 that dies is a ConnectionError."""
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    host = ctx.Process(target=_host, args=(port, ready))
    found = []
    t = threading.Thread(target=lambda: found.append(LightStore("127.0.0.1", port, False, 30.0, secret=KEY)))
    t.start()                            # connecting before anything listens
    time.sleep(0.3)
    host.start()
    t.join(30)
    client = found[0]
    assert client.get("up") == b"1"
    host.kill()
    host.join(10)
    with pytest.raises(ConnectionError):
        client.get("up")


def test_nothing_listening_is_a_timeout_with_the_address():
    port = free_port()
    with pytest.raises(TimeoutError, match=f"127.0.0.1:{port}"):
        LightStore("127.0.0.1", port, False, 0.5, secret=KEY)


def greeted(port):
    """A raw connection and the challenge the server greeted it with."""
    raw = socket.create_connection(("127.0.0.1", port))
    _, (challenge,) = _read_frame(raw)
    return raw, challenge


def authenticated_raw(port):
    raw, challenge = greeted(port)
    raw.sendall(frame(AUTH, (proof(KEY, challenge),)))
    assert _read_frame(raw)[0] == OK
    return raw


@pytest.mark.parametrize("authenticated", [False, True])
def test_an_oversized_message_ends_that_connection_only(authenticated):
    """Before it has proved the secret a connection may send a hello's worth; after, a message."""
    master, port = serve()
    with (authenticated_raw(port) if authenticated else greeted(port)[0]) as raw:
        raw.sendall(((MAX_MESSAGE if authenticated else MAX_HELLO) + 1).to_bytes(4, "big"))
        assert raw.recv(1) == b""              # closed by the server
    master.set("still", b"ok")
    assert LightStore("127.0.0.1", port, False, 5.0, secret=KEY).get("still") == b"ok"
