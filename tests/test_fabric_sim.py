"""The SIMULATED fabric (comm-bench simulate) at 1,024 and 4,096 nodes: each injected
fault named by the same validate that reads real runs, nothing else named; validate +
heatmap of 4,096 nodes timed and their peak memory read (separate processes)."""
import json
import os
import subprocess
import sys
import time

import pytest

from cbtest import COMM_BENCH, assert_no_traceback, run_cli

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from sim_cost import named
from comm_bench.fabric_sim.fabric import ecmp_port
from comm_bench.schedule import schedule

LEAF = 32
K = 8     # k = 4 leaves 11% of a 32-uplink leaf's ports crossed by < 2 measured pairs; k = 8: 0.3%


def faults_for(n, seed=0):
    """A 40% slow host, a flapping link, a bad leaf uplink port and a slow link between two
    nodes. A pair-only fault is visible only where the schedule measures that pair, and a
    port only where >= 2 measured pairs cross it: both are checked here, not assumed."""
    rounds = schedule("matchings", n, k=K, seed=seed)
    slow, flap, leaf = 100, n // 2 + 7, n // LEAF - 3
    avoid = {slow, flap}
    a, b = next(p for p in rounds[0] if not set(p) & avoid and leaf not in (p[0] // LEAF, p[1] // LEAF))

    def crossing(port):
        return {frozenset(p) for r in rounds for p in r
                if leaf in (p[0] // LEAF, p[1] // LEAF) and p[0] // LEAF != p[1] // LEAF
                and ecmp_port(*p, LEAF) == port and not set(p) & avoid}
    # the first port from 5 on that >= 2 measured node pairs cross (one pair alone reads as
    # a slow link): at k = 8, 99.3% of the ports of a 1,024-node run are (docs/large-clusters.md)
    port = next(p % LEAF for p in range(5, 5 + LEAF) if len(crossing(p % LEAF)) >= 2)
    specs = [f"slow-host:{slow}:0.6", f"flap:{flap}:0.2:0.3", f"bad-port:{leaf}:{port}:0.25",
             f"slow-link:{a}:{b}:0.3"]
    expected = {("host", f"node{slow:04d}"), ("host", f"node{flap:04d}"), ("port", f"leaf{leaf}", port),
                ("pair", a, b), ("pair", b, a)}
    return specs, expected


def child_run(args):
    """(CompletedProcess, seconds, peak RSS in bytes) of one `comm-bench` process."""
    t0 = time.monotonic()
    proc = subprocess.Popen([COMM_BENCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return subprocess.CompletedProcess(args, proc.returncode, out, err), time.monotonic() - t0, usage.ru_maxrss * 1024


@pytest.mark.parametrize("n", [1024, 4096])
def test_simulated_faults_each_named_and_nothing_else(tmp_path, n):
    specs, expected = faults_for(n)
    doc = tmp_path / "sim.json"
    args = ["simulate", "--nodes", n, "--leaf", LEAF, "-k", K, "-o", doc]
    for s in specs:
        args += ["--fault", s]
    sim = run_cli(*args, timeout=600, check_rc=0)
    print(sim.stdout.splitlines()[-2])     # rounds used and predicted wall time
    assert "SIMULATED" in sim.stdout and "predicted wall time" in sim.stdout
    head = json.loads(doc.read_text())
    assert head["simulated"] is True and head["results"] == [] and head["records_file"] == "sim.records.jsonl"
    s = head["simulation"]
    assert s["first_pass"]["rounds"] == 2 * K and s["rounds"] < 200 and s["all_pairs"] == n * (n - 1)
    proc, seconds, rss = child_run(["validate", "--json", str(doc)])
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    got = named(report)
    # a flapping pair seen in both directions may be named either way round; a pair fault is
    # named in the directions measured
    assert got - expected == set(), report["findings"]
    hosts_ports = {e for e in expected if e[0] != "pair"}
    assert hosts_ports <= got
    assert any(e[0] == "pair" for e in got), report["findings"]
    heat, hseconds, hrss = child_run(["heatmap", str(doc), "-o", str(tmp_path / "h.png")])
    assert heat.returncode == 0 and "worst:" in heat.stdout, heat.stderr
    print(f"{n} nodes: validate {seconds:.1f} s {rss / 2**20:.0f} MiB; heatmap {hseconds:.1f} s {hrss / 2**20:.0f} MiB")
    if n == 4096:
        assert seconds + hseconds < 60 and max(rss, hrss) < 4 << 30


def test_no_fault_control_passes(tmp_path):
    doc = tmp_path / "c.json"
    run_cli("simulate", "--nodes", 1024, "-o", doc, "--seed", 3, timeout=300, check_rc=0)
    proc = run_cli("validate", doc, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_records_file_damage_is_refused(tmp_path):
    doc = tmp_path / "d.json"
    run_cli("simulate", "--nodes", 16, "--leaf", 4, "--confirm", 0, "-o", doc, check_rc=0)
    jl = tmp_path / "d.records.jsonl"
    lines = jl.read_text().splitlines(keepends=True)
    assert run_cli("validate", doc).returncode == 0
    jl.write_text("".join(lines) + '{"op": "write", "si')          # torn last line: dropped
    assert run_cli("validate", doc).returncode == 0
    bad = lines[:]
    bad[3] = bad[3].replace('"busbw":', '"busbw":-')                 # a negative rate: schema refuses
    jl.write_text("".join(bad))
    proc = run_cli("validate", doc)
    assert proc.returncode == 2 and "record 3" in proc.stderr, proc.stderr
    assert_no_traceback(proc)
    head = json.loads(doc.read_text())
    head["records_file"] = "../etc/passwd"
    doc.write_text(json.dumps(head))
    proc = run_cli("validate", doc)
    assert proc.returncode == 2 and "records_file" in proc.stderr
    assert_no_traceback(proc)


def test_simulate_bad_input_one_line(tmp_path):
    for spec in ("slow-host:5", "bad-port:99:0:0.5", "flap:1:2:0.3", "nope:1:1"):
        proc = run_cli("simulate", "--nodes", 64, "--fault", spec, "-o", tmp_path / "x.json")
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (spec, proc.stderr)
        assert_no_traceback(proc)
