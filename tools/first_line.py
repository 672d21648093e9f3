#!/usr/bin/env python3
"""Time to the first result line: `comm-bench sweep` (one size, 2 local ranks) against
iperf3, alternating, each run a fresh process; prints every run and the medians.

    python tools/first_line.py [--runs 10] [--comm-bench .venv/bin/comm-bench] [-- SWEEP ARGS]

A result line is comm-bench's first table row (a line not starting with '#') and
iperf3's first interval line ("[  5]   0.00-..."). Recorded in docs/benchmarks/startup.md.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

IPERF_RESULT = re.compile(r"^\[\s*\d+\]\s+\d")


def first_line(cmd, is_result, env=None) -> tuple:
    """(seconds to the first result line, seconds to exit) of one run of cmd."""
    t = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    first = None
    for line in proc.stdout:
        if first is None and is_result(line):
            first = time.monotonic() - t
    proc.wait()
    if proc.returncode != 0 or first is None:
        raise SystemExit(f"first_line.py: {' '.join(cmd)} exited {proc.returncode} "
                         f"{'without a result line' if first is None else ''}")
    return first, time.monotonic() - t


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--comm-bench", default=os.path.join(".venv", "bin", "comm-bench"))
    ap.add_argument("sweep", nargs="*", default=["-t", "tcp", "-b", "1K", "-e", "1K"])
    a = ap.parse_args()
    iperf = shutil.which("iperf3")
    if not iperf:
        print("first_line.py: iperf3 is not installed", file=sys.stderr)
        return 2
    port = free_port()
    server = subprocess.Popen([iperf, "-s", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    out = os.path.join(tempfile.mkdtemp(), "first-line.json")
    ours = [a.comm_bench, "sweep", *a.sweep, "-o", out, "--force"]
    theirs = [iperf, "-c", "127.0.0.1", "-p", str(port), "-n", "1K"]
    rows = {"comm-bench": [], "iperf3": []}
    try:
        first_line(ours, lambda s: not s.startswith("#"))      # warm-up: file caches, .pyc
        first_line(theirs, IPERF_RESULT.match)
        for i in range(a.runs):
            rows["comm-bench"].append(first_line(ours, lambda s: s.strip() and not s.startswith("#")))
            rows["iperf3"].append(first_line(theirs, IPERF_RESULT.match))
            print(f"run {i + 1}: comm-bench first line {rows['comm-bench'][-1][0]:.3f} s "
                  f"(exit {rows['comm-bench'][-1][1]:.3f} s); iperf3 first line "
                  f"{rows['iperf3'][-1][0]:.3f} s (exit {rows['iperf3'][-1][1]:.3f} s)")
    finally:
        server.terminate()
        server.wait()
    for name, r in rows.items():
        firsts = [x for x, _ in r]
        print(f"{name}: first result line median {statistics.median(firsts):.3f} s "
              f"(min {min(firsts):.3f}, max {max(firsts):.3f}); exit median "
              f"{statistics.median(y for _, y in r):.3f} s")
    print(f"command: {' '.join(ours[:-3])}  vs  {' '.join(theirs)}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
