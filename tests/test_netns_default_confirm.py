"""The default workflow of issue 31 on 8 network-namespace hosts, every link shaped to
2 Gbit/s: each rank runs `comm-bench sweep --transport tcp --pattern pairwise -b 4M -e 4M
-n 10 -w 2` (no --confirm: the default confirm phase runs), then `comm-bench validate
run.json` with no flags. A host at 60% and a host toggling between 2 and 0.4 Gbit/s
every 0.3 s must each be named alone (exit 1); the no-fault fabric with a CPU hog must
pass (exit 0). Once each in CI; the 8-run repetition is in docs/benchmarks/default-confirm.md.
Needs root + iproute2; every namespace is deleted at the end (also on failure)."""
import json
import time

import pytest

from cbtest import run_cli
from test_netns_diagnose import LINK, N, cpu_hog, explain
from test_netns_validate import netns_fabric, sweep

OK, WHY = netns_fabric.available()
pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(not OK, reason=f"network namespaces: {WHY}")]

ARGS = ("sweep", "--transport", "tcp", "--pattern", "pairwise", "-b", "4M", "-e", "4M", "-n", "10", "-w", "2")


def fabric(shape=None):
    return netns_fabric.Fabric(N, prefix="d31", subnet="10.77.31", shape={i: LINK for i in range(N)} | (shape or {}))


def timed_sweep(fab, out):
    """The sweep, with what its default confirm phase cost printed (docs/benchmarks/default-confirm.md)."""
    t0 = time.monotonic()
    doc = sweep(fab, out, args=ARGS, timeout=400)
    conf = [r for r in doc["results"] if "confirm" in r]
    first = [r for r in doc["results"] if "confirm" not in r]
    print(f"\nCOST sweep {time.monotonic() - t0:.1f} s wall; first pass {len(first)} records, "
          f"{sum(r['time_us'] * (r['iters'] + r['warmup']) for r in first) / 1e6:.1f} s measuring; confirm "
          f"{len(conf)} records, {sum(r['time_us'] * (r['iters'] + r['warmup']) for r in conf) / 1e6:.1f} s measuring")
    return doc


def validate(path):
    """validate with its defaults: (exit code, the --json report of the same document)."""
    text = run_cli("validate", path)
    p = run_cli("validate", path, "--json")
    assert p.returncode == text.returncode and p.returncode in (0, 1), (p.stdout[-2000:], p.stderr[-2000:])
    return p.returncode, json.loads(p.stdout), text.stdout


def test_host_at_60_percent_fails_by_default(tmp_path):
    with fabric({2: "1200mbit"}) as fab:
        timed_sweep(fab, tmp_path / "run.json")
        addr = fab.addr(2)
    rc, rep, text = validate(tmp_path / "run.json")
    print(text)
    assert rc == 1 and "FAIL" in text, explain(rep)
    assert {tuple(f.get("ranks") or ()) for f in rep["findings"]} == {(2,)}, explain(rep)
    assert all(addr in f["host"] for f in rep["findings"]), explain(rep)
    host = [f for f in rep["findings"] if f["kind"] == "bad-host"]
    assert len(host) == 1 and host[0]["confirmed"] is True and host[0]["confidence"] >= 0.95, explain(rep)
    assert 0.45 < host[0]["measured_gbs"] / host[0]["peer_median_gbs"] < 0.75, explain(rep)


def test_flapping_host_fails_by_default(tmp_path):
    with fabric() as fab:
        with fab.toggle(5, [LINK, "400mbit"], 0.3) as tog:
            timed_sweep(fab, tmp_path / "run.json")
        addr = fab.addr(5)
    assert tog.changes > 20
    rc, rep, text = validate(tmp_path / "run.json")
    print(text)
    assert rc == 1, explain(rep)
    assert {tuple(f.get("ranks") or ()) for f in rep["findings"]} == {(5,)}, explain(rep)
    assert all(addr in f["host"] for f in rep["findings"]), explain(rep)


def test_no_fault_with_cpu_hog_passes_by_default(tmp_path):
    with fabric() as fab, cpu_hog():
        timed_sweep(fab, tmp_path / "run.json")
    rc, rep, text = validate(tmp_path / "run.json")
    print(text)
    assert rc == 0 and rep["status"] == "pass" and rep["findings"] == [], explain(rep)
    assert "UNCONFIRMED" not in text
