"""Each transport declares what its data crosses (link_kind); the topology reads it
from the transport registry, so a GPU transport's cross-host pairs get their NIC."""
import pytest

from comm_bench import registry
from comm_bench.topology.linkmap import LinkMap
from comm_bench.transports.base import LINK_KINDS
from test_heatmap import make_doc


def test_every_registered_transport_declares_a_link_kind():
    for name, cls in registry.transports().items():
        assert cls.link_kind in LINK_KINDS, name


@pytest.mark.parametrize("transport", ["nccl", "torch-nccl"])
def test_gpu_transports_cross_hosts_through_the_gpus_nic(transport):
    lm = LinkMap(make_doc(nodes=2, gpn=8, transport=transport, pairs=[(0, 8)]))
    cls, rate = lm.classify(0, 8)
    assert cls == "ib" and rate and rate > 0  # the fixture's IB NIC next to GPU0, its rate


def test_an_unknown_transport_has_no_nic_for_a_gpu():
    lm = LinkMap(make_doc(nodes=2, gpn=8, transport="nvshmem", pairs=[(0, 8)]))
    assert lm.classify(0, 8) == ("network", None)
