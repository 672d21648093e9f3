"""What the store's server shares between requests (store_server.py): waits on the same keys
share one index entry, and a repeated MULTI_GET shares one reply while the store is unchanged.
Sharing must not change what each request sees. Real server, real sockets."""
import threading
import time

import pytest

from comm_bench.control.light_store import LightStore
from comm_bench.control.rendezvous import _listener
from comm_bench.system.netutil import free_port

KEY = b"0123456789abcdef-store-shared"


def serve(timeout=5.0):
    port = free_port()
    master = LightStore("127.0.0.1", port, True, timeout, _listener("127.0.0.1", port, True), secret=KEY)
    return master, port


def client(port, timeout=5.0):
    return LightStore("127.0.0.1", port, False, timeout, secret=KEY)


def waiting(store, keys, timeout):
    """Start store.wait(keys) in a thread; the result list gets 'ok' or the exception's name."""
    out = []

    def run():
        try:
            store.wait(keys, timeout)
            out.append("ok")
        except TimeoutError:
            out.append("timeout")
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)          # the server holds the wait before the test goes on
    return t, out


def test_waits_on_the_same_keys_all_wake_and_a_later_wait_sees_a_deleted_key_as_missing():
    master, port = serve()
    a, b, c = client(port), client(port), client(port)
    ta, out_a = waiting(a, ["x", "y"], 5)
    tb, out_b = waiting(b, ["x", "y"], 5)           # joins a's wait on the same keys
    master.set("x", b"1")
    master.delete_key("x")                          # x was set while a and b waited: it counts for them
    tc, out_c = waiting(c, ["x", "y"], 1.5)          # but not for c, which began after the delete
    master.set("y", b"1")
    for t in (ta, tb, tc):
        t.join(10)
    assert out_a == ["ok"] and out_b == ["ok"]
    assert out_c == ["timeout"]


def test_a_wait_that_timed_out_leaves_the_others_on_its_keys_waiting():
    master, port = serve()
    a, b = client(port), client(port)
    ta, out_a = waiting(a, ["p", "q"], 0.5)
    tb, out_b = waiting(b, ["p", "q"], 5)
    ta.join(5)
    assert out_a == ["timeout"] and not out_b
    master.multi_set(["p", "q"], [b"1", b"2"])
    tb.join(5)
    assert out_b == ["ok"]


@pytest.mark.parametrize("change", ["set", "delete"])
def test_a_repeated_multi_get_sees_every_change(change):
    master, port = serve()
    c = client(port)
    keys = [f"k/{i}" for i in range(64)]
    master.multi_set(keys, [bytes([i]) * 1024 for i in range(64)])
    first = c.multi_get(keys)
    assert c.multi_get(keys) == first               # the shared reply, unchanged store
    if change == "set":
        master.set("k/7", b"new")
        first[7] = b"new"
    else:
        master.delete_key("k/7")
        first[7] = None
    assert c.multi_get(keys) == first
