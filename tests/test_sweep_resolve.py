"""How a sweep's configuration is completed and checked before any rank starts."""
import pytest

from comm_bench import registry
from comm_bench.errors import UsageError
from comm_bench.sweep import SweepConfig, resolve


def cfg(transport, ops, **kw):
    return SweepConfig(transport=transport, ops=ops, sizes=[8, 1024], **kw)


@pytest.fixture
def gpu_probes_pass(monkeypatch):
    """The GPU transports' planning, on a machine without a GPU: only probe() is faked."""
    for name in ("cuda", "nccl"):
        monkeypatch.setattr(registry.get(name), "probe", classmethod(lambda cls: (True, "")))


@pytest.mark.parametrize("transport,ops,n,pattern", [
    ("tcp", ["sendrecv"], 2, "pair"), ("tcp", ["sendrecv"], 4, "pairwise"),
    ("gloo", ["all_reduce", "alltoall"], 4, "collective"), ("gloo", ["sendrecv"], 3, "collective"),
    ("cuda", ["h2d", "d2h", "bidir", "d2d"], 1, "collective"), ("cuda", ["peer"], 2, "pair"),
    ("cuda", ["peer", "peer_read"], 8, "pairwise"), ("nccl", ["all_gather"], 8, "collective"),
])
def test_default_pattern(gpu_probes_pass, transport, ops, n, pattern):
    c = cfg(transport, ops)
    resolve(c, n)
    assert c.pattern == pattern


def test_rejections(gpu_probes_pass):
    with pytest.raises(UsageError, match="does not run --pattern collective"):
        resolve(cfg("tcp", ["sendrecv"], pattern="collective"), 2)
    with pytest.raises(UsageError, match="has no op 'write'"):
        resolve(cfg("cuda", ["write"]), 1)
    with pytest.raises(UsageError, match="needs at least 2 ranks"):
        resolve(cfg("cuda", ["peer"]), 1)


def test_gpu_transports_default_to_one_rank_per_gpu_and_others_to_two():
    assert registry.get("tcp").default_ranks() == 2
    for name in ("cuda", "nccl", "torch-nccl"):
        assert registry.get(name).default_ranks() >= 1  # every GPU here; 1 without one
