"""The validation cost per schedule on the SIMULATED fabric (docs/large-clusters.md):
rounds, predicted wall time and pairs measured beside n(n-1), with four faults injected
(40% slow host, flapping link, bad leaf uplink port, slow link between two measured
nodes), and whether validate named exactly them. Also times `validate` and `heatmap`
of the largest run under /usr/bin/time -v.

    python tools/sim_cost.py OUTDIR [--nodes 1024 4096]
"""
import argparse
import json
import os
import subprocess
import sys

from comm_bench.fabric_sim.fabric import Fabric, ecmp_port, parse_fault
from comm_bench.fabric_sim.run import SimConfig, simulate
from comm_bench.schedule import schedule

LEAF = 32


def faults(n, pattern, k, groups):
    rounds = schedule(pattern, n, k=k, groups=groups)
    slow, flap, leaf = 100, n // 2 + 7, n // LEAF - 3
    a, b = next(p for p in rounds[0] if not set(p) & {slow, flap} and leaf not in (p[0] // LEAF, p[1] // LEAF))
    crossed = {}
    for r in rounds:
        for p in r:
            if leaf in (p[0] // LEAF, p[1] // LEAF) and p[0] // LEAF != p[1] // LEAF and not set(p) & {slow, flap}:
                crossed.setdefault(ecmp_port(*p, LEAF), set()).add(frozenset(p))
    # the first port from 5 on that >= 2 measured node pairs cross (one alone reads as a slow link)
    port = next(p % LEAF for p in range(5, 5 + LEAF) if len(crossed.get(p % LEAF, ())) >= 2)
    expected = {("host", f"node{slow:04d}"), ("host", f"node{flap:04d}"), ("port", f"leaf{leaf}", port),
                ("pair", a, b), ("pair", b, a)}
    return [f"slow-host:{slow}:0.6", f"flap:{flap}:0.2:0.3", f"bad-port:{leaf}:{port}:0.25",
            f"slow-link:{a}:{b}:0.3"], expected


def named(report):
    """What the findings name: hosts, pairs, switch ports (the test checks the same)."""
    out = set()
    for f in report["findings"]:
        if f["kind"] == "bad-switch-port":
            out.add(("port", f["switch"], f["port"]))
        elif f["kind"] == "bad-pair":
            out.add(("pair", f["src"], f["dst"]))
        else:
            out.add(("host", f.get("host")))
    return out


def timed(args):
    p = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "comm_bench", *args],
                       capture_output=True, text=True)
    stats = dict(line.strip().rsplit(": ", 1) for line in p.stderr.splitlines() if ": " in line and line.startswith("\t"))
    return p, stats.get("Elapsed (wall clock) time (h:mm:ss or m:ss)"), int(stats.get("Maximum resident set size (kbytes)", 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1024, 4096])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print("| nodes | schedule | rounds (first pass + confirm) | predicted time (first pass + confirm) | pairs measured | n(n-1) | "
          "pairwise-concurrent rounds / predicted | pairwise predicted | validate |")
    print("|---|---|---|---|---|---|---|---|---|")
    last = None
    for n in a.nodes:
        for pattern, k, pod in (("matchings", 4, 0), ("matchings", 8, 0), ("topology", 2, 8)):
            fab0 = Fabric(n, leaf=LEAF, pod=pod)
            specs, expected = faults(n, pattern, k, fab0.groups())
            fab = Fabric(n, leaf=LEAF, pod=pod, faults=[parse_fault(s) for s in specs])
            path = os.path.join(a.out, f"sim{n}-{pattern}{k}.json")
            doc = simulate(fab, SimConfig(pattern=pattern, k=k), path, force=True, echo=lambda *_: None)
            s = doc["simulation"]
            p = subprocess.run([sys.executable, "-m", "comm_bench", "validate", "--json", path],
                               capture_output=True, text=True)
            rep = json.loads(p.stdout)
            kinds = sorted(f["kind"] for f in rep["findings"])
            kinds = sorted(set(kinds), key=kinds.index)
            got = named(rep)
            exact = "all 4 named, nothing else" if got <= expected and {e for e in expected if e[0] != "pair"} <= got \
                and any(e[0] == "pair" for e in got) else f"MISSED {sorted(map(str, expected - got))} EXTRA {sorted(map(str, got - expected))}"
            print(f"| {n} | {pattern} k={k}{' (pods of 8 leaves)' if pod else ''} | {s['rounds']} "
                  f"({s['first_pass']['rounds']} + {s['confirm']['rounds']}) | {s['predicted_wall_s']:.1f} s "
                  f"({s['first_pass']['predicted_s']:.1f} + {s['confirm']['predicted_s']:.1f}) | "
                  f"{s['first_pass']['pairs'] + s['confirm']['pairs']:,} | {s['all_pairs']:,} | "
                  f"{s['pairwise_concurrent_rounds']:,} / {s['pairwise_concurrent_predicted_s']:,.0f} s | "
                  f"{s['pairwise_predicted_s'] / 3600:,.0f} h | exit {p.returncode}: {exact} ({', '.join(kinds)}) |")
            last = path
    v, vt, vm = timed(["validate", last])
    h, ht, hm = timed(["heatmap", last, "-o", os.path.join(a.out, "heatmap.png")])
    print(f"\nvalidate {last}: exit {v.returncode}, {vt} wall, {vm / 1024:.0f} MiB max RSS")
    print(f"heatmap  {last}: exit {h.returncode}, {ht} wall, {hm / 1024:.0f} MiB max RSS")


if __name__ == "__main__":
    main()
