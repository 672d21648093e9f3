"""validate's latency check on a live fabric: 8 network-namespace hosts, real tcp
`--mode lat` sweeps, one host's link trained far below its peers' (tc tbf at 4 Mbit/s
with a 4 KiB bucket, both directions: this kernel has no netem, and a ping-pong's
packets queue behind the rate as they would behind a delay); the host is named and
nothing else, and the no-fault fabric passes, with and without a CPU hog.
Needs root + iproute2; every namespace is deleted at the end (also on failure)."""
import contextlib

import pytest

from test_netns_diagnose import cpu_hog, validate
from test_netns_validate import netns_fabric, sweep

OK, WHY = netns_fabric.available()
pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(not OK, reason=f"network namespaces: {WHY}")]

N = 8
ARGS = ("sweep", "--transport", "tcp", "--pattern", "pairwise", "--mode", "lat", "-b", "8", "-e", "1K", "-f", "8",
        "-n", "200", "-w", "20")


def test_slow_answering_host_named(tmp_path):
    """Host 6's packets wait for tokens of a 4 Mbit/s bucket (~0.15 ms per small packet
    each way: a link that trained at a fraction of its rate, a congested port): its pairs'
    one-way latency reads several times its peers' on the veth fabric."""
    with netns_fabric.Fabric(N, prefix="t28", subnet="10.77.28", shape={6: {"rate": "4mbit", "burst": "4kb"}}) as fab:
        sweep(fab, tmp_path / "r.json", args=ARGS)
        addr = fab.addr(6)
    rep = validate(tmp_path / "r.json")
    f = rep["findings"]
    assert [x["kind"] for x in f] == ["high-latency-host"], f
    assert f[0]["ranks"] == [6] and addr in f[0]["host"] and f[0]["confidence"] >= 0.95, f
    assert f[0]["measured_us"] / f[0]["peer_median_us"] > 3, f


@pytest.mark.parametrize("hog", [False, True])
def test_no_fault_latency_passes(tmp_path, hog):
    with netns_fabric.Fabric(N, prefix="t28", subnet="10.77.28") as fab, \
            (cpu_hog() if hog else contextlib.nullcontext()):
        sweep(fab, tmp_path / "r.json", args=ARGS)
    rep = validate(tmp_path / "r.json")
    assert rep["findings"] == [], rep["findings"]
    assert rep["checked"]["latency"]["ranks_compared"] == N
