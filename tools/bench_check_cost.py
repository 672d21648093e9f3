"""What the data check (-c, on by default) costs: the wall time of the same sweep with
-c 1 and -c 0, alternating, and the timed figures of both (which the check must not move).

    python tools/bench_check_cost.py [--transports tcp gloo] [--rounds 3] [-- extra sweep args]

Prints one markdown row per transport: median wall seconds with and without the check,
their ratio, and the median over sizes of the time_us ratio (checked / unchecked).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def sweep(transport: str, check: str, extra: list) -> tuple:
    """(wall seconds, {size: time_us}) of one sweep."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.json")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "comm_bench", "sweep", "-t", transport, "--nprocs", "2",
                        "-c", check, "--no-progress", "-o", path, *extra],
                       capture_output=True, text=True, timeout=900, check=True)
        wall = time.perf_counter() - t0
        with open(path) as f:
            return wall, {r["size"]: r["time_us"] for r in json.load(f)["results"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transports", nargs="+", default=["tcp", "gloo"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("extra", nargs="*", help="sweep arguments (default: -b 8 -e 16M -n 20)")
    a = p.parse_args()
    extra = a.extra or ["-b", "8", "-e", "16M", "-n", "20"]
    print(f"sweep {' '.join(extra)}, 2 local ranks, {a.rounds} alternating rounds")
    print("| transport | wall -c 1 (s) | wall -c 0 (s) | wall ratio | time_us ratio (median over sizes) |")
    print("|---|---|---|---|---|")
    for t in a.transports:
        on, off, ratios = [], [], []
        for _ in range(a.rounds):
            w1, t1 = sweep(t, "1", extra)
            w0, t0 = sweep(t, "0", extra)
            on.append(w1)
            off.append(w0)
            ratios.append(statistics.median(t1[s] / t0[s] for s in t1 if t0.get(s)))
        w1, w0 = statistics.median(on), statistics.median(off)
        print(f"| {t} | {w1:.2f} | {w0:.2f} | {w1 / w0:.2f} | {statistics.median(ratios):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
