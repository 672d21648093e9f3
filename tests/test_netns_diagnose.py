"""Diagnosis on 8 network-namespace hosts whose links are all shaped to 2 Gbit/s (a
uniform fabric, as a cluster's NICs are): real tcp sweeps with the confirm phase, then
`comm-bench validate`. Each fault must be named exactly, with nothing else blamed, and
the no-fault control must pass, with and without a CPU hog (docs/validate-rules.md).
Needs root + iproute2; every namespace is deleted at the end (also on failure)."""
import contextlib
import json
import subprocess
import sys

import pytest

from cbtest import run_cli
from test_netns_validate import netns_fabric, sweep

OK, WHY = netns_fabric.available()
pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(not OK, reason=f"network namespaces: {WHY}")]

N = 8
LINK = "2gbit"
ARGS = ("sweep", "--transport", "tcp", "--pattern", "pairwise", "-b", "2M", "-e", "4M", "-n", "8", "-w", "2",
        "--confirm", "8")


def fabric(shape=None, **kw):
    return netns_fabric.Fabric(N, prefix="d17", subnet="10.77.17", shape={i: LINK for i in range(N)} | (shape or {}),
                               **kw)


def validate(path):
    p = run_cli("validate", path, "--json")
    assert p.returncode in (0, 1), (p.stdout[-2000:], p.stderr[-2000:])
    report = json.loads(p.stdout)
    assert p.returncode == (1 if report["findings"] else 0)
    return report


def explain(report):
    return json.dumps({"findings": [(f["kind"], f["message"], f.get("confidence")) for f in report["findings"]],
                       "diagnosis": report["checked"].get("diagnosis")}, indent=1)


@contextlib.contextmanager
def cpu_hog():
    """A busy process for the whole sweep (the control must pass with it)."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        p.kill()
        p.wait()


def test_intermittent_host_is_unstable(tmp_path):
    with fabric() as fab:
        with fab.toggle(3, [LINK, "400mbit"], 0.3) as tog:
            sweep(fab, tmp_path / "r.json", args=ARGS)
        addr = fab.addr(3)
    assert tog.changes > 20
    rep = validate(tmp_path / "r.json")
    print(explain(rep))
    unstable = [f for f in rep["findings"] if f["kind"] == "unstable-host"]
    assert len(unstable) == 1 and unstable[0]["ranks"] == [3] and addr in unstable[0]["host"], explain(rep)
    u = unstable[0]
    assert u["confidence"] >= 0.95 and u["unsteadiness_ratio"] >= 1.4
    assert "per-iteration max/median" in u["message"] and "repeats range" in u["message"]
    # whatever else is said is about that host only
    assert all(f.get("ranks") == [3] for f in rep["findings"]), explain(rep)


def test_no_fault_control_passes(tmp_path):
    """(With a CPU hog: test_netns_default_confirm.py, as is a host at 60%.)"""
    with fabric() as fab:
        sweep(fab, tmp_path / "r.json", args=ARGS)
    rep = validate(tmp_path / "r.json")
    print(explain(rep))
    assert rep["findings"] == [], explain(rep)


def test_slow_host_and_one_direction_pair_named_exactly(tmp_path):
    """The faults the first pass already caught: a host at 6% and one direction of one
    pair at 10%, on the same fabric; the confirm phase re-measures and keeps them."""
    args = ("sweep", "--transport", "tcp", "--pattern", "pairwise", "-b", "1M", "-e", "2M", "-n", "6", "-w", "1",
            "--confirm", "8")          # smaller: the slow links take long to fill
    with fabric({2: "120mbit"}, pair_shape={(4, 6): "200mbit"}) as fab:
        sweep(fab, tmp_path / "r.json", args=args)
        addr = fab.addr(2)
    rep = validate(tmp_path / "r.json")
    print(explain(rep))
    kinds = sorted(f["kind"] for f in rep["findings"])
    assert kinds == ["bad-host", "bad-pair"], explain(rep)
    host = next(f for f in rep["findings"] if f["kind"] == "bad-host")
    pair = next(f for f in rep["findings"] if f["kind"] == "bad-pair")
    assert host["ranks"] == [2] and addr in host["host"] and host["confidence"] >= 0.95
    assert (pair["src"], pair["dst"]) == (4, 6) and pair["confidence"] >= 0.95


def test_pair_shape_and_toggle_are_real():
    """The fabric's faults are what the tests say: one direction of one pair shaped, and a
    host whose rate toggles."""
    with netns_fabric.Fabric(3, prefix="d17", subnet="10.77.18", shape={i: LINK for i in range(3)},
                             pair_shape={(0, 2): "200mbit"}) as fab:
        one_way = netns_fabric.measure(fab, 0, 2, seconds=0.5, port=5302)
        back = netns_fabric.measure(fab, 2, 0, seconds=0.5, port=5320)
        fab.set_rate(1, "400mbit")
        slow = netns_fabric.measure(fab, 1, 0, seconds=0.5, port=5310)
    assert one_way < 0.35e9 / 8 and back > 1e9 / 8
    assert slow < 0.6e9 / 8


def test_check_collective_then_localize(tmp_path):
    """`comm-bench check` under a torchrun-style launch: the all_reduce runs below what the
    fabric gives, so it localizes with pairwise-concurrent rounds + the confirm phase, and
    the report (printed by rank 0, exit 1) names the host."""
    args = ("check", "-t", "gloo", "-b", "2M", "-e", "2M", "-n", "6", "-w", "1", "--expect-busbw", "0.08", "--json")
    with fabric({6: "400mbit"}) as fab:
        sweep(fab, tmp_path / "c.json", args=args, timeout=400, rank0_rc=1)
        out = sweep.last_output
        addr = fab.addr(6)
    doc = json.loads((tmp_path / "c.json").read_text())
    coll = [r for r in doc["results"] if r["pattern"] == "collective"]
    pairs = [r for r in doc["results"] if r["pattern"] == "pairwise-concurrent" and "confirm" not in r]
    assert len(coll) == 1 and coll[0]["busbw"] < 0.08
    assert len(pairs) == N * (N - 1)        # n-1 rounds of n/2 pairs, both directions
    assert any("confirm" in r for r in doc["results"])
    # rank 0's output, stderr joined: the report, then the run's last line (# results: ...)
    rep = json.JSONDecoder().raw_decode(out[out.index("{\n"):])[0]
    assert [f["kind"] for f in rep["findings"]] == ["bad-host"], explain(rep)
    assert rep["findings"][0]["ranks"] == [6] and addr in rep["findings"][0]["host"]
    assert rep["findings"][0]["confidence"] >= 0.95
