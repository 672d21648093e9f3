"""A real pairwise TCP sweep across 4 hosts in network namespaces, one host's link shaped
(tc tbf) to a small fraction of the others': `comm-bench validate` must name exactly
that host, every time, and nothing on an unshaped fabric. Needs root + iproute2.

The fabric is tools/netns_fabric.py; only addresses of namespaces made here are used,
and every namespace is deleted at the end (also on failure)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cbtest import COMM_BENCH, run_cli

TOOLS = Path(__file__).resolve().parent.parent / "tools"
sys.path.insert(0, str(TOOLS))
import netns_fabric  # noqa: E402

OK, WHY = netns_fabric.available()
pytestmark = [pytest.mark.netns, pytest.mark.skipif(not OK, reason=f"network namespaces: {WHY}")]

SHAPE = "500mbit"       # ~0.06 GB/s; unshaped veth pairs run at 1-3 GB/s here


SWEEP_ARGS = ("sweep", "--transport", "tcp", "--pattern", "pairwise", "-b", "1M", "-e", "4M", "-n", "10", "-w", "2")


def sweep(fab, out, timeout=240, args=SWEEP_ARGS, rank0_rc=0, hostnames=False):
    """torchrun-style launch: one rank per namespace host; rank 0 writes `out` (and exits
    rank0_rc: check's rank 0 exits 1 on findings). hostnames: host i is named h<i> (its own
    UTS namespace), as a --groups file names hosts."""
    port = 29400 + os.getpid() % 500
    procs = []
    try:
        for i in range(fab.n_hosts):
            env = dict(os.environ, RANK=str(i), WORLD_SIZE=str(fab.n_hosts), LOCAL_RANK="0",
                       LOCAL_WORLD_SIZE="1", MASTER_ADDR=fab.addr(0), MASTER_PORT=str(port))
            env.pop("COMM_BENCH_DEBUG", None)
            named = ["unshare", "--uts", "sh", "-c", f'hostname h{i} && exec "$0" "$@"'] if hostnames else []
            cmd = [*fab.exec_prefix(i), *named, COMM_BENCH, *args, "-o", str(out), "--addr", fab.addr(i),
                   "--no-progress", "--timeout", "60"]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, cwd=str(Path(out).parent)))
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
        sweep.last_output = outs[0]   # rank 0's output (check prints its report there)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for i, p in enumerate(procs):
        want = rank0_rc if i == 0 else 0
        assert p.returncode == want, f"rank {i} exited {p.returncode}: {outs[i][-2000:]}"
    return json.loads(Path(out).read_text())


def test_fabric_basics():
    with netns_fabric.Fabric(3, subnet="10.77.41") as a, netns_fabric.Fabric(2, subnet="10.77.41") as b:
        assert a.addr(0) == "10.77.41.1" and a.addr(2) == "10.77.41.3"
        assert a.netns(0) != b.netns(0) and set(a.namespaces).isdisjoint(b.namespaces)
        assert a.exec_prefix(1) == ["ip", "netns", "exec", a.netns(1)]
        names = set(netns_fabric.list_namespaces())
        assert set(a.namespaces) <= names and set(b.namespaces) <= names
        lo = a.run(1, ["ip", "-br", "link", "show", "lo"], capture_output=True, text=True).stdout
        assert "UP" in lo or "UNKNOWN" in lo
        addrs = a.run(2, ["ip", "-br", "addr"], capture_output=True, text=True).stdout
        assert "10.77.41.3/24" in addrs and "127.0.0.1" in addrs
        bw = netns_fabric.measure(a, 1, 0, seconds=0.3)
        assert bw > 1e6
    left = set(netns_fabric.list_namespaces())
    assert not (set(a.namespaces) | set(b.namespaces)) & left
    with pytest.raises(RuntimeError):
        with netns_fabric.Fabric(2, subnet="10.77.42") as c:
            made = c.namespaces
            raise RuntimeError("boom")
    assert not set(made) & set(netns_fabric.list_namespaces())


@pytest.mark.slow
def test_shaping_is_real():
    with netns_fabric.Fabric(3, subnet="10.77.43", shape={2: SHAPE}) as fab:
        fast = netns_fabric.measure(fab, 1, 0, seconds=0.5)
        slow = netns_fabric.measure(fab, 2, 0, seconds=1.0)
    assert slow < netns_fabric.rate_bits(SHAPE) / 8 * 1.3
    assert slow < fast / 4


@pytest.mark.slow
@pytest.mark.parametrize("shaped", [2, 1, 3])
def test_validate_names_the_shaped_host(tmp_path, shaped):
    with netns_fabric.Fabric(4, subnet="10.77.44", shape={shaped: SHAPE}) as fab:
        doc = sweep(fab, tmp_path / "results.json")
        addr = fab.addr(shaped)
    assert doc["status"] == "ok" and doc["world_size"] == 4
    # the first pass; the default confirm phase adds its re-measurements of the suspects
    assert len([r for r in doc["results"] if r.get("src") is not None and "confirm" not in r]) == 12 * 3
    p = run_cli("validate", tmp_path / "results.json", "--json", "--junit", tmp_path / "j.xml")
    assert p.returncode == 1, (p.stdout[-3000:], p.stderr[-2000:])
    report = json.loads(p.stdout)
    findings = report["findings"]
    assert len(findings) == 1, json.dumps(findings, indent=1)
    f = findings[0]
    assert f["kind"] == "bad-host" and f["rank"] == shaped and addr in f["host"], f
    # two failing cases: the bad-host check and the host's own case (one per host of the run)
    assert (tmp_path / "j.xml").read_text().count("<failure") == 2
    # the heatmaps of this run, PNG and HTML
    run_cli("heatmap", tmp_path / "results.json", "-o", tmp_path / "ns.png", check_rc=0)
    run_cli("heatmap", tmp_path / "results.json", "-o", tmp_path / "ns.html", check_rc=0)
    assert (tmp_path / "ns.png").stat().st_size > 10000
    assert "data:image/png;base64," in (tmp_path / "ns.html").read_text()


@pytest.mark.slow
def test_no_false_positive_unshaped(tmp_path):
    with netns_fabric.Fabric(4, subnet="10.77.45") as fab:
        sweep(fab, tmp_path / "results.json")
    p = run_cli("validate", tmp_path / "results.json", "--json")
    assert p.returncode == 0, p.stdout[-3000:]
    assert json.loads(p.stdout)["findings"] == []
