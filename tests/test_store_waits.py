"""A wait that times out names the rank it waited for: a broadcast names its root (the
1,024-rank run's message named the key, 'sendrecv#0'), a gather the ranks missing."""
import pytest

from comm_bench.control.rendezvous import Store
from comm_bench.errors import RunFailed
from comm_bench.system.netutil import free_port


@pytest.fixture
def stores():
    port = free_port()
    made = [Store("127.0.0.1", port, r, 3, 1.0, secret=b"test-secret") for r in range(3)]
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
