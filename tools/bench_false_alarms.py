#!/usr/bin/env python3
"""False alarms and detection of the default workflow on network-namespace hosts.

Each run: N namespace hosts on one bridge, every link shaped to the same rate (tc tbf),
one rank per host launched torchrun-style, `comm-bench sweep --transport tcp --pattern
pairwise ARGS` (the default confirm phase), then `comm-bench validate run.json` with no
flags. Per run it records validate's exit code and findings, and the sweep's own closing
verdict line (rank 0's `# verdict:`), and whether the two agree.

    python tools/bench_false_alarms.py --case clean-lat --runs 20 --hosts 8 --out fa.jsonl
    python tools/bench_false_alarms.py --case clean-bw,slow-host,flap-host,slow-pair-lat --runs 5

Cases (what a run is expected to end with):
  clean-bw, clean-lat   no fault: exit 0, no finding
  clean-bw-cpu          no fault and no link shaped (CPU-bound links): exit 0, no finding
  slow-host             host 2 shaped to 60% of the others (bw): its host alone named, exit 1
  flap-host             host 5 toggling between the rate and 20% of it every 0.3 s (bw): host 5 alone
  slow-pair-lat         one direction of pair 4->6 behind a small token bucket (lat), 3x its
                        peers' one-way latency at 8 B and more above: that pair (both ordered
                        pairs: a ping-pong crosses both directions) alone named, exit 1
Needs root and iproute2; every namespace is deleted at the end (also on failure). Prints one
JSON line per run and a summary table (docs/benchmarks/false-alarms.md).

    python tools/bench_false_alarms.py --simulate --nodes 1024 --runs 20

The same at scale on the SIMULATED fabric (`comm-bench simulate`, lognormal noise per
measurement, --noise): per seed, a no-fault run (expected: exit 0) and one with a host at
60% and a host toggling to 20% every 0.3 s (expected: those two hosts named, exit 1).
"""
import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import netns_fabric

BIN = Path(sys.executable).parent
COMM_BENCH = str(BIN / "comm-bench")
LINK = "2gbit"
BW_ARGS = ("-b", "4M", "-e", "4M", "-n", "10", "-w", "2")
LAT_ARGS = ("--mode", "lat", "-b", "8", "-e", "1K", "-n", "2000", "-w", "100")
# one direction of one pair behind a 3 Mbit/s bucket of 4 kB (the kernel here has no netem to
# add a delay): a ping-pong then runs at the bucket's packet rate, ~100 us one-way for an 8 B
# message (3x the fabric's ~30 us) and ~1.5 ms for 1 KiB; a ping-pong crosses both directions,
# so both ordered pairs of the two hosts read it
SLOW_PAIR = {"rate": "3mbit", "burst": "4kb"}

CASES = {
    "clean-bw": dict(args=BW_ARGS, expect=()),
    "clean-lat": dict(args=LAT_ARGS, expect=()),
    # no link shaped: the veths run as fast as the CPU lets them, so the CPU's noise is the
    # links' (every rank competes for this machine's cores): the hardest clean case
    "clean-bw-cpu": dict(args=BW_ARGS, unshaped=True, expect=()),
    "slow-host": dict(args=BW_ARGS, shape={2: "1200mbit"}, expect=(("rank", 2),)),
    "flap-host": dict(args=BW_ARGS, toggle=(5, [LINK, "400mbit"], 0.3), expect=(("rank", 5),)),
    "slow-pair-lat": dict(args=LAT_ARGS, pair_shape={(4, 6): SLOW_PAIR}, expect=(("pair", 4, 6), ("pair", 6, 4))),
}


def sweep(fab, out, args, timeout):
    """One rank per namespace host; returns (rank 0's output, the ranks' exit codes)."""
    port = 29400 + (os.getpid() + int(time.time())) % 500
    procs = []
    try:
        for i in range(fab.n_hosts):
            env = dict(os.environ, RANK=str(i), WORLD_SIZE=str(fab.n_hosts), LOCAL_RANK="0",
                       LOCAL_WORLD_SIZE="1", MASTER_ADDR=fab.addr(0), MASTER_PORT=str(port))
            cmd = [*fab.exec_prefix(i), COMM_BENCH, "sweep", "--transport", "tcp", "--pattern", "pairwise",
                   *args, "-o", str(out), "--force", "--addr", fab.addr(i), "--no-progress", "--timeout", "60"]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, cwd=str(Path(out).parent)))
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs[0], [p.returncode for p in procs]


def named(findings):
    """What the findings name: ("rank", r) for host/rank/device findings, ("pair", s, d) for pairs."""
    out = set()
    for f in findings:
        if f.get("ranks"):
            out |= {("rank", r) for r in f["ranks"]}
        elif f.get("src") is not None:
            out.add(("pair", f["src"], f["dst"]))
        else:
            out.add((f["kind"],))
    return out


@contextlib.contextmanager
def cpu_hogs(n):
    """n busy processes for the whole run (the load of a shared CI machine)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def one_run(case, hosts, tmp, timeout, hogs=0):
    c = CASES[case]
    out = Path(tmp) / f"{case}.json"
    shape = {} if c.get("unshaped") else {i: LINK for i in range(hosts)} | c.get("shape", {})
    fab = netns_fabric.Fabric(hosts, prefix="fa", subnet="10.77.61", shape=shape, pair_shape=c.get("pair_shape"))
    t0 = time.monotonic()
    with fab, cpu_hogs(hogs):
        if "toggle" in c:
            with fab.toggle(*c["toggle"]):
                text, rcs = sweep(fab, out, c["args"], timeout)
        else:
            text, rcs = sweep(fab, out, c["args"], timeout)
    wall = time.monotonic() - t0
    p = subprocess.run([COMM_BENCH, "validate", str(out), "--json"], capture_output=True, text=True, timeout=600)
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        rep = {"findings": [], "status": f"unreadable: {p.stderr.strip()[-300:]}"}
    verdict = [ln for ln in text.splitlines() if ln.startswith("# verdict:")]
    found = named(rep.get("findings") or [])
    want = set(c["expect"])
    sweep_status = re.match(r"# verdict: (\w+)", verdict[-1]).group(1).lower() if verdict else None
    return {"case": case, "hosts": hosts, "hogs": hogs, "ranks_rc": rcs, "validate_rc": p.returncode,
            "status": rep.get("status"),
            "sweep_verdict": verdict[-1] if verdict else None,
            "agree": sweep_status == rep.get("status"),
            "findings": [(f["kind"], f["message"], f.get("confidence")) for f in rep.get("findings") or []],
            "named": sorted(map(list, found)), "as_expected": found == want and p.returncode == (1 if want else 0),
            "wall_s": round(wall, 1)}


SIM_FAULTS = {"clean-sim": ((), ()), "faults-sim": (("slow-host:5:0.6", "flap:{flap}:0.2:0.3"), (5, "flap"))}


def one_sim(case, nodes, seed, noise, tmp):
    """One simulated run and its validate: (row)."""
    out = Path(tmp) / f"{case}-{seed}.json"
    flap = nodes // 2 + 7
    faults = [f.format(flap=flap) for f in SIM_FAULTS[case][0]]
    cmd = [COMM_BENCH, "simulate", "--nodes", str(nodes), "--noise", str(noise), "--seed", str(seed), "-o", str(out)]
    for f in faults:
        cmd += ["--fault", f]
    t0 = time.monotonic()
    subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=True)
    p = subprocess.run([COMM_BENCH, "validate", str(out), "--json"], capture_output=True, text=True, timeout=3600)
    rep = json.loads(p.stdout)
    # each finding is about a faulty host (its ranks, or a pair with it at one end: with k = 4
    # matchings a flapping host has 8 pairs, and 2 caught slow are named as pairs), every
    # faulty host is in one, and nothing else is named
    want = {5 if w == 5 else flap for w in SIM_FAULTS[case][1]}
    about = [set(f.get("ranks") or [f.get("src"), f.get("dst")]) for f in rep["findings"]]
    ok = all(a & want for a in about) and want <= set().union(*about) and p.returncode == (1 if want else 0)
    return {"case": case, "nodes": nodes, "seed": seed, "noise": noise, "validate_rc": p.returncode,
            "status": rep["status"], "findings": [(f["kind"], f["message"], f.get("confidence"))
                                                   for f in rep["findings"]],
            "as_expected": ok, "wall_s": round(time.monotonic() - t0, 1)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="clean-lat", help=f"comma-separated, of: {', '.join(CASES)}")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per sweep")
    ap.add_argument("--hogs", type=int, default=0, help="busy processes running beside each sweep (a loaded machine)")
    ap.add_argument("--out", default=None, help="append each run's JSON line to this file")
    ap.add_argument("--keep", default=None, help="keep each run's results document in this folder")
    ap.add_argument("--simulate", action="store_true", help="the simulated fabric instead (cases clean-sim, faults-sim)")
    ap.add_argument("--nodes", type=int, default=1024, help="--simulate: nodes")
    ap.add_argument("--noise", type=float, default=0.05, help="--simulate: lognormal sigma per measurement")
    a = ap.parse_args(argv)
    if a.simulate:
        return simulated(a)
    ok, why = netns_fabric.available()
    if not ok:
        print(f"bench_false_alarms: network namespaces: {why}", file=sys.stderr)
        return 2
    cases = a.case.split(",")
    bad = [c for c in cases if c not in CASES]
    if bad:
        print(f"bench_false_alarms: unknown case {bad[0]!r} (one of {', '.join(CASES)})", file=sys.stderr)
        return 2
    tally = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.runs):
            for case in cases:
                row = one_run(case, a.hosts, tmp, a.timeout, a.hogs)
                if a.keep:
                    os.makedirs(a.keep, exist_ok=True)
                    keep = os.path.join(a.keep, f"{case}-{a.hosts}-{k}-{int(time.time())}.json")
                    os.replace(os.path.join(tmp, f"{case}.json"), keep)
                    row["document"] = keep
                row["rep"] = k
                line = json.dumps(row)
                print(line, flush=True)
                if a.out:
                    with open(a.out, "a") as f:
                        f.write(line + "\n")
                t = tally.setdefault(case, [0, 0, 0])
                t[0] += 1
                t[1] += row["as_expected"]
                t[2] += row["agree"]
    print(f"\n{'case':<16} {'hosts':>5} {'hogs':>5} {'runs':>5} {'as expected':>12} {'sweep = validate':>17}")
    for case, (n, good, agree) in tally.items():
        print(f"{case:<16} {a.hosts:>5} {a.hogs:>5} {n:>5} {good:>12} {agree:>17}")
    return 0


def simulated(a):
    tally = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(a.runs):
            for case in SIM_FAULTS:
                row = one_sim(case, a.nodes, seed, a.noise, tmp)
                print(json.dumps(row), flush=True)
                if a.out:
                    with open(a.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
                t = tally.setdefault(case, [0, 0])
                t[0] += 1
                t[1] += row["as_expected"]
    print(f"\n{'case':<12} {'nodes':>6} {'noise':>6} {'seeds':>6} {'as expected':>12}")
    for case, (n, good) in tally.items():
        print(f"{case:<12} {a.nodes:>6} {a.noise:>6} {n:>6} {good:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
