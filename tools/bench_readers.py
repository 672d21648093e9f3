"""How long `validate` and `heatmap` take, and how much memory, on the two large documents
of issue 31 (figures in docs/benchmarks/readers.md):

- full pairwise, 1,024 nodes x 2 sizes (every ordered pair: 2,095,104 records), rdma,
  node0517 at 60% of the others;
- 4,096 nodes x 1 size by k random matchings (--matchings K, default 4), node0517 at 60%;
- full1024lat (not run by default): full1024 with each record's latency_us, 1,158 MB.

The documents are written line by line in the sweep's own layout (results.render: the
header, then one record per line), by tests/test_heatmap.py's make_doc for the header and
record fields. Each command runs under /usr/bin/time -v (wall time, maximum RSS).

    python tools/bench_readers.py OUTDIR [--cases full1024 matchings4096] [--matchings 4]
        [--reuse] [--trees old=/path/to/checkout new=.]

--reuse: documents already in OUTDIR are read again, not written again. --trees: each
command runs once per named checkout (PYTHONPATH=that tree), alternating, so two versions
are measured on the same documents at the same load; the table's "tree" column names it.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_heatmap import make_doc  # noqa: E402

from comm_bench.schedule import schedule  # noqa: E402

SLOW, SLOW_SHARE = 517, 0.6


def write_doc(path, nodes, sizes, pairs, pattern, latency=False):
    """Header from make_doc, then one record per (size, pair), streamed to the file;
    latency: each record with its per-iteration latency_us, as the sweep writes it."""
    template = make_doc(nodes=nodes, gpn=1, transport="rdma", sizes=sizes[:1], pairs=[(0, 1)], topo=False,
                        pattern=pattern)
    rec0 = template.pop("results")[0]
    head = json.dumps(template, indent=1)[:-1].rstrip()
    rnd = random.Random(0)
    count = 0
    with open(path, "w") as f:
        f.write(head + ',\n "results": [')
        for size in sizes:
            for s, d in pairs:
                bw = 45.0 * rnd.uniform(0.97, 1.03) * (SLOW_SHARE if SLOW in (s, d) else 1.0)
                t = size / bw / 1e3
                # make_doc's fields (757 MB at 1,024 x 2; with latency_us, as the sweep writes
                # it, 1,158 MB: past the 1 GiB that load reads)
                rec = dict(rec0, size=size, count=size // 4, src=s, dst=d, src_host=f"node{s:03d}",
                           dst_host=f"node{d:03d}", src_device="cuda:0", dst_device="cuda:0", algbw=bw, busbw=bw,
                           time_us=t)
                if latency:
                    rec["latency_us"] = {"min": t * 0.95, "max": t * 1.1, "avg": t, "stdev": t * 0.02,
                                         "median": t, "p99": t * 1.08, "p999": t * 1.1}
                f.write(("\n  " if count == 0 else ",\n  ") + json.dumps(rec, separators=(",", ":")))
                count += 1
        f.write("\n]}\n")
    return count


def timed(args, cwd, tree=None):
    """(process, wall, CPU s, peak RSS MiB): CPU from /usr/bin/time -v (the forked reader of a
    document's second half included); the peak RSS is that of the process tree, sampled
    every 20 ms (the reader and its fork at once: time -v gives the larger of the two)."""
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve())) if tree else None
    p = subprocess.Popen(["/usr/bin/time", "-v", sys.executable, "-m", "comm_bench", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
    peak, done = [0], threading.Event()

    def sample():
        while not done.wait(0.02):
            peak[0] = max(peak[0], tree_rss(p.pid))
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = p.communicate()
    done.set()
    t.join()
    p.stdout, p.stderr = out, err
    stats = dict(line.strip().rsplit(": ", 1) for line in err.splitlines() if ": " in line and line.startswith("\t"))
    wall = stats.get("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    cpu = float(stats.get("User time (seconds)", 0)) + float(stats.get("System time (seconds)", 0))
    rss = max(peak[0], int(stats.get("Maximum resident set size (kbytes)", 0))) / 1024
    return p, wall, cpu, rss


def tree_rss(pid):
    """KiB resident in pid and its descendants now (0 where it is gone)."""
    total = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            total = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return total
    return total + sum(tree_rss(k) for k in kids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--cases", nargs="+", default=["full1024", "matchings4096"])
    ap.add_argument("--matchings", type=int, default=4)
    ap.add_argument("--reuse", action="store_true", help="read documents already in OUTDIR again")
    ap.add_argument("--trees", nargs="+", default=[], metavar="NAME=PATH", help="checkouts to alternate")
    a = ap.parse_args()
    trees = [t.split("=", 1) for t in a.trees] or [("", None)]
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")      # and again at the end: a shared machine
    print("| document | records | MB | tree | command | exit | wall | CPU (user + sys) | peak RSS (tree) | named | "
          "load before |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case in a.cases:
        if case in ("full1024", "full1024lat"):
            n, sizes, pattern = 1024, [1 << 20, 4 << 20], "pairwise"
            pairs = [(s, d) for s in range(n) for d in range(n) if s != d]
        else:
            n, sizes, pattern = 4096, [4 << 20], "matchings"
            pairs = [p for rnd in schedule("matchings", n, k=a.matchings) for p in rnd]
        doc = out / f"{case}.json"
        if a.reuse and doc.exists():
            with open(doc, "rb") as f:
                count = sum(1 for line in f if line.startswith(b'  {"'))
        else:
            count = write_doc(doc, n, sizes, pairs, pattern, latency=case == "full1024lat")
        mb = doc.stat().st_size / 1e6
        for args in (["validate", doc.name, "--json"], ["heatmap", doc.name, "-o", f"{case}.png"]):
            for name, tree in trees:
                load = os.getloadavg()[0]
                p, wall, cpu, rss = timed(args, out, tree)
                named = ""
                if args[0] == "validate" and p.returncode in (0, 1):
                    named = "; ".join(f"{f['kind']} {f.get('host')}" for f in json.loads(p.stdout)["findings"])
                elif p.returncode not in (0, 1):
                    named = next((ln for ln in p.stderr.splitlines() if ln.startswith("comm-bench:")), "")[:100]
                print(f"| {case} | {count:,} | {mb:.0f} | {name} | {' '.join(args[:1] + args[2:])} | {p.returncode} | "
                      f"{wall} | {cpu:.1f} s | {rss:.0f} MiB | {named} | {load:.1f} |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
