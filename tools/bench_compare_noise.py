#!/usr/bin/env python3
"""Does `comm-bench compare` tell noise from a regression? (#39, docs/benchmarks/compare-noise.md)

1. identical local runs: the README's first command (`sweep --nprocs 2 -c`, 2 local tcp
   ranks) run twice back to back, --pairs times; each pair compared (goal: exit 0 in at
   least 19 of 20). Also printed: what the old fixed-10% rule said of the same pairs, and
   the noise itself per judged size (between-run spread against one run's own).
2. a 20% slower link: two network-namespace hosts (tools/netns_fabric.py), their link at a
   base rate (tc tbf, --rate), a tcp pair sweep; the same again (identical: goal PASS);
   then the link shaped to 80% of the busbw the base run measured (goal: FAIL), --trials times.
3. --unshaped: the same with the link unshaped for the base runs (CPU-bound tcp here).
4. --repeats R: in 2 and 3 each side is R runs, compared with `compare --repeats R`
   (the row test then sees the between-run spread); --local-repeats R the same in 1.

    python tools/bench_compare_noise.py [--pairs 20] [--trials 5] [--rate 2gbit] [--unshaped]
        [--repeats R] [--local-repeats R] [--skip-local] [--skip-shaped] [--nice N] [--json out.json] [--keep DIR]

Needs root + iproute2 for 2 and 3 (skipped with a line otherwise). Only the namespaces it
makes are used; they are deleted at the end, also on failure.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import netns_fabric  # noqa: E402

CB = str(Path(sys.executable).parent / "comm-bench")
WIRE = 1514 / 1448      # tc tbf counts whole frames: wire bytes per TCP payload byte at MTU 1500
JUDGED = 1 << 20        # compare's default --min-size
NICE = []               # --nice N: the ranks' command prefix (nice -n N), ahead of other work on the host


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


PAIRED = []             # --paired: the link trials' repeats are judged in their turns (compare --paired)


def compare(a, b, repeats=1):
    """(exit code, compare's JSON, what the old fixed-tolerance rule said: any judged row
    more than 10% worse = FAIL). a, b: a file each, or lists of repeats."""
    files = [str(f) for side in (a, b) for f in (side if isinstance(side, list) else [side])]
    p = sh([CB, "compare", *files, "--json", "--repeats", str(repeats), *(PAIRED if repeats > 1 else [])],
           timeout=120)
    out = json.loads(p.stdout)
    old_fail = any(c and c["busbw"] is not None and c["busbw"] < -out["tolerance"] and r["size"] >= JUDGED
                   for r in out["rows"] for c in r["change"][:1])
    return p.returncode, out, old_fail


def judged(doc):
    return sorted((r for r in doc["results"] if r.get("mode", "bw") == "bw" and r["size"] >= JUDGED),
                  key=lambda r: r["size"])


def noise_figures(docs):
    """Per judged size: busbw median, between-run sd of log busbw, one run's mean
    per-iteration cv and the standard error it implies (cv/sqrt(iters)); and the run
    effect (mean log deviation over sizes) against what is left per size."""
    by_size = {}
    for d in docs:
        for r in judged(d):
            by_size.setdefault(r["size"], []).append(r)
    rows, dev = [], {}
    for size, recs in sorted(by_size.items()):
        logs = [math.log(r["busbw"]) for r in recs]
        m = statistics.fmean(logs)
        dev[size] = [x - m for x in logs]
        cv = statistics.fmean(r["latency_us"]["stdev"] / r["latency_us"]["avg"] for r in recs)
        rows.append({"size": size, "busbw_median": statistics.median(r["busbw"] for r in recs),
                     "between_sd_log": statistics.stdev(logs), "within_cv": cv,
                     "within_se": cv / math.sqrt(recs[0]["iters"]),
                     "min": min(r["busbw"] for r in recs), "max": max(r["busbw"] for r in recs)})
    n = min(len(v) for v in dev.values())
    effect = [statistics.fmean(dev[s][j] for s in dev) for j in range(n)]
    resid = [dev[s][j] - effect[j] for s in dev for j in range(n)]
    return {"sizes": rows, "run_effect_sd": statistics.stdev(effect), "residual_sd": statistics.stdev(resid),
            "runs_shifted_20pct": sum(e < math.log(0.8) for e in effect), "runs": n}


def local_pairs(n, work, repeats=1):
    """n pairs of identical quick-start runs (each side `repeats` runs), each compared."""
    runs, pairs = [], []
    for i in range(n):
        files = [[work / f"local{i}{x}{k}.json" for k in range(repeats)] for x in "ab"]
        for f in files[0] + files[1]:
            p = sh([CB, "sweep", "--nprocs", "2", "-c", "-o", str(f), "--force", "--no-progress"], timeout=300)
            if p.returncode != 0:
                raise SystemExit(f"sweep failed: {p.stdout[-500:]}{p.stderr[-500:]}")
            runs.append(json.loads(f.read_text()))
        rc, out, old = compare(*files, repeats=repeats)
        s = out["summary"][0]
        pairs.append({"rc": rc, "old_fail": old, "worse": s["worse"], "noise": s["noise"],
                      "worst": s["worst"] and {k: s["worst"][k] for k in ("size", "change", "verdict", "confidence")}})
        w = s["worst"]
        print(f"  pair {i + 1:2}: exit {rc}  (old rule: {'FAIL' if old else 'pass'})  {s['worse']} worse, "
              f"{s['noise']} within noise; worst {w['size'] >> 20}M {w['change'] * 100:+.1f}% "
              f"({w['verdict']}, confidence {w['confidence']:.2f})", flush=True)
    return pairs, noise_figures(runs)


def tbf(fab, rate):
    """Host 0's link (both directions) at `rate` with tc tbf, or unshaped (rate None)."""
    for ns, dev in ((fab.netns(0), "eth0"), (fab.bridge_ns, "p0")):
        sh(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"])
        if rate:
            burst = f"{max(64, min(4096, int(netns_fabric.rate_bits(rate) / 8 / 100 / 1024)))}kb"   # ~10 ms
            p = sh(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate, "burst", burst,
                    "latency", "50ms"])
            if p.returncode:
                raise SystemExit(f"tc: {p.stderr.strip()}")


def ns_sweep(fab, out, extra=()):
    """A tcp pair sweep, one rank per namespace host: default sizes and iterations, or
    `extra` sweep options (tests/test_compare_noise.py sweeps 1M-16M)."""
    port = 29700 + os.getpid() % 200
    procs = []
    for i in range(2):
        env = dict(os.environ, RANK=str(i), WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR=fab.addr(0), MASTER_PORT=str(port))
        env.pop("COMM_BENCH_DEBUG", None)
        procs.append(subprocess.Popen([*fab.exec_prefix(i), *NICE, CB, "sweep", "-t", "tcp", *extra, "-o", str(out), "--force",
                                       "--addr", fab.addr(i), "--no-progress", "--timeout", "60"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(out.parent)))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"namespace sweep failed: {outs[0][-800:]}")
    return json.loads(out.read_text())


def link_trials(trials, rate, work, label, repeats=1, calibrate="probe"):
    """Per trial: base run(s), the same again, then 80% of what the base run measured.
    With repeats the three sides interleave so that a change of load on the machine falls
    on every side alike; the slow rate comes from the median of 3 probe runs before them
    (calibrate "probe"), or, before each slow run, from the base run just before it
    (calibrate "each": an unshaped, CPU-bound link moves 1-3 GB/s from run to run, and a
    cap set from earlier runs then often does nothing)."""
    out = []
    with netns_fabric.Fabric(2, prefix="cbnoise", subnet="10.77.139") as fab:
        for t in range(trials):
            files = {k: [work / f"{label}{t}{k}{i}.json" for i in range(repeats)] for k in ("base", "again", "slow")}
            tbf(fab, rate)
            if repeats > 1 and calibrate == "probe":     # one run's luck would set the change
                probes = [ns_sweep(fab, work / f"{label}{t}probe{i}.json") for i in range(3)]
                measured = statistics.median(r["busbw"] for d in probes for r in judged(d))
            rates = []
            for i in range(repeats):
                tbf(fab, rate)
                if calibrate == "each":
                    ns_sweep(fab, files["again"][i])
                base = ns_sweep(fab, files["base"][i])
                if calibrate != "each":
                    ns_sweep(fab, files["again"][i])
                if calibrate == "each" or (i == 0 and repeats == 1):
                    measured = statistics.median(r["busbw"] for r in judged(base))       # GB/s of TCP payload
                slow_rate = f"{int(measured * 0.8 * 8e3 * WIRE)}mbit"
                rates.append(slow_rate)
                tbf(fab, slow_rate)
                ns_sweep(fab, files["slow"][i])
            slow_rate = rates[0] if len(set(rates)) == 1 else f"{rates[0]}..{rates[-1]}"
            rc_slow, cmp_slow, old_slow = compare(files["base"], files["slow"], repeats)
            rc_same, cmp_same, old_same = compare(files["base"], files["again"], repeats)
            ratio = statistics.median(1 + r["change"][0]["busbw"] for r in cmp_slow["rows"] if r["size"] >= JUDGED)
            s, a = cmp_slow["summary"][0], cmp_same["summary"][0]
            out.append({"base_gbs": measured, "slow_rate": slow_rate, "slow_ratio": ratio, "slow_rc": rc_slow,
                        "slow_worse": s["worse"], "slow_noise": s["noise"], "same_rc": rc_same,
                        "same_noise": a["noise"], "old_rule_same_fail": old_same, "old_rule_slow_fail": old_slow})
            print(f"  trial {t + 1}: base {measured:.3f} GB/s ({rate or 'unshaped'}), shaped {slow_rate}: "
                  f"busbw x{ratio:.2f}, compare exit {rc_slow} ({s['worse']} worse, {s['noise']} within noise); "
                  f"same again: exit {rc_same} ({a['noise']} within noise)", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--rate", default="2gbit", help="the namespace link's base rate (tc tbf)")
    ap.add_argument("--unshaped", action="store_true", help="also trials with the base runs unshaped")
    ap.add_argument("--repeats", type=int, default=1, help="runs per side in the link trials (compare --repeats)")
    ap.add_argument("--calibrate", choices=("probe", "each"), default="probe",
                    help="the slow rate with repeats: 80%% of 3 probe runs, or of the base run just before each slow run")
    ap.add_argument("--paired", action="store_true",
                    help="judge the repeats in their turns (compare --paired): the link trials interleave their sides")
    ap.add_argument("--skip-local", action="store_true", help="skip 1 (the identical local pairs)")
    ap.add_argument("--skip-shaped", action="store_true", help="skip 2 (the link shaped for the base runs)")
    ap.add_argument("--local-repeats", type=int, default=1, help="runs per side in 1 (compare --repeats)")
    ap.add_argument("--nice", type=int, default=None,
                    help="run the namespace ranks at this niceness (negative: ahead of other work on a shared host)")
    ap.add_argument("--json", dest="json_out", help="write every figure here")
    ap.add_argument("--keep", help="keep the results documents in this folder")
    a = ap.parse_args()
    if a.paired:
        PAIRED[:] = ["--paired"]
    if a.nice is not None:
        NICE[:] = ["nice", "-n", str(a.nice)]
    work = Path(a.keep or tempfile.mkdtemp(prefix="cbnoise-"))
    work.mkdir(parents=True, exist_ok=True)
    report = {"command": sys.argv}
    if not a.skip_local:
        print(f"# 1. identical local runs: {a.pairs} pairs of `comm-bench sweep --nprocs 2 -c`, "
              f"{a.local_repeats} run(s) a side")
        pairs, noise = local_pairs(a.pairs, work, a.local_repeats)
        report.update(local_pairs=pairs, noise=noise)
        print(f"  compare exit 0: {sum(p['rc'] == 0 for p in pairs)} of {len(pairs)} "
              f"(old fixed-10% rule: {sum(not p['old_fail'] for p in pairs)} of {len(pairs)})")
        print("  size  busbw(median, min-max GB/s)  between-run sd(log)  per-iteration cv  its standard error")
        for r in noise["sizes"]:
            print(f"  {r['size'] >> 20:3}M  {r['busbw_median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"
                  f"  {r['between_sd_log']:.3f}  {r['within_cv']:.3f}  {r['within_se']:.3f}")
        print(f"  run effect sd {noise['run_effect_sd']:.3f}, per-size residual sd {noise['residual_sd']:.3f}, "
              f"runs >20% slow overall: {noise['runs_shifted_20pct']} of {noise['runs']}")
    ok, why = netns_fabric.available()
    if not ok:
        print(f"# 2. namespace link: skipped ({why})")
    else:
        if not a.skip_shaped:
            print(f"# 2. a namespace link at {a.rate}, then at 80% of what it measured: {a.trials} trials, "
                  f"{a.repeats} run(s) a side")
            report["link"] = t = link_trials(a.trials, a.rate, work, "shaped", a.repeats, a.calibrate)
            print(f"  FAIL (exit 1) at 80%: {sum(x['slow_rc'] == 1 for x in t)} of {len(t)}; "
                  f"the same rate again PASS (exit 0): {sum(x['same_rc'] == 0 for x in t)} of {len(t)}")
        if a.unshaped:
            print(f"# 3. the namespace link unshaped, then at 80% of what it measured: {a.trials} trials, "
                  f"{a.repeats} run(s) a side")
            report["unshaped"] = t = link_trials(a.trials, None, work, "unshaped", a.repeats, a.calibrate)
            print(f"  FAIL at 80%: {sum(x['slow_rc'] == 1 for x in t)} of {len(t)}; unshaped again PASS: "
                  f"{sum(x['same_rc'] == 0 for x in t)} of {len(t)}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
