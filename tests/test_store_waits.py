"""A wait that times out names the rank it waited for: a broadcast names its root (the
1,024-rank run's message named the key, 'sendrecv#0'), a gather the ranks missing; and a
broadcast goes on waiting while its root says it makes progress."""
import threading
import time

import pytest

from comm_bench.control.rendezvous import Store
from comm_bench.errors import RunFailed
from comm_bench.system.netutil import free_port


@pytest.fixture(params=[True, False], ids=["TCPStore", "light_store"])
def stores(request):
    port = free_port()
    made = [Store("127.0.0.1", port, r, 3, 1.0, secret=b"test-secret", torch_store=request.param)
            for r in range(3)]
    yield made


def test_a_broadcast_that_never_comes_names_its_root(stores):
    with pytest.raises(RunFailed) as err:
        stores[2].broadcast(0, "confirm/sendrecv")
    msg = str(err.value)
    assert "rank(s) 0 did not reach 'confirm/sendrecv'" in msg and "#" not in msg, msg


def test_a_broadcast_that_comes_is_read(stores):
    stores[0].broadcast(0, "plan", {"rounds": [1, 2]})
    assert stores[1].broadcast(0, "plan") == {"rounds": [1, 2]}


def test_a_gather_names_the_ranks_missing(stores):
    stores[2].gather_to(0, "records", {"r": 2})
    with pytest.raises(RunFailed) as err:
        stores[0].gather_to(0, "records", {"r": 0})
    assert "rank(s) 1 did not reach 'records'" in str(err.value), str(err.value)


def _root_at_work(store, seconds, then=None):
    """The root says it makes progress for `seconds` (rank 0 writing a large first pass), then
    broadcasts `then` (None: it never does)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        store.progressing()
        time.sleep(0.05)
    if then is not None:
        store.broadcast(0, "plan", then)


def test_a_broadcast_from_a_root_still_at_work_is_waited_for(stores):
    """1,024 local ranks failed after the first pass: their 60 s wait for rank 0's confirm
    plan ran out while rank 0, alive, was still writing. Here the root works 3.5 timeouts."""
    root = threading.Thread(target=_root_at_work, args=(stores[0], 3.5, {"rounds": [3]}))
    root.start()
    t0 = time.monotonic()
    assert stores[1].broadcast(0, "plan") == {"rounds": [3]}
    root.join()
    assert time.monotonic() - t0 > 3.0


def test_a_root_that_stops_progressing_is_named_within_two_timeouts(stores):
    root = threading.Thread(target=_root_at_work, args=(stores[0], 0.5))
    root.start()
    t0 = time.monotonic()
    with pytest.raises(RunFailed) as err:
        stores[1].broadcast(0, "plan")
    root.join()
    assert "rank(s) 0 did not reach 'plan'" in str(err.value), str(err.value)
    assert time.monotonic() - t0 < 2.0 + 1.5      # two --timeout (1 s) waits, and slack
