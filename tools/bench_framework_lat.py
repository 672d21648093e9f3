"""comm-bench's gloo and mpi latency next to a plain ping-pong, in alternating rounds.

    python tools/bench_framework_lat.py [--transports gloo mpi] [--rounds 5] [--iters 2000] [--json]

Each round runs, per transport, the plain ping-pong of tools/plain_pingpong.py
(torch.distributed or mpi4py, nothing around it) and then
`comm-bench sweep --mode lat --pattern pair` with the same message size and
iterations, both with 2 local ranks. comm-bench reports the one-way latency
(half a round trip), so its median should be about half the plain round trip
(a ratio of 1.0 to that half); more is overhead of comm-bench's own, less (mpi) the
cost of mpi4py's Python calls that comm-bench's C++ loop does not pay. Prints a markdown
table (or, with --json, one JSON object) of the medians and minimums in microseconds and
comm-bench's figure over half the plain round trip.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def plain_round_trip(kind: str, iters: int, size: int) -> dict:
    """{"median_us", "min_us"} of the plain ping-pong's round trips."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "plain_pingpong.py"), kind,
                          "--iters", str(iters), "--size", str(size)],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def comm_bench_latency(kind: str, iters: int, size: int) -> dict:
    """The record's latency statistics (one-way, us)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.json")
        subprocess.run([sys.executable, "-m", "comm_bench", "sweep", "-t", kind, "--nprocs", "2",
                        "--op", "sendrecv", "--pattern", "pair", "--mode", "lat",
                        "-b", str(size), "-e", str(size), "-n", str(iters), "-w", str(iters // 10),
                        "--no-progress", "-o", path],
                       capture_output=True, text=True, timeout=300, check=True)
        with open(path) as f:
            return json.load(f)["results"][0]["latency_us"]


def measure(kinds, rounds: int, iters: int, size: int) -> dict:
    """{kind: [per round: medians and minimums (us) and their ratios]}, rounds alternating.
    The minimums move less than the medians on a loaded machine."""
    out = {k: [] for k in kinds}
    for _ in range(rounds):
        for k in kinds:
            plain = plain_round_trip(k, iters, size)
            cb = comm_bench_latency(k, iters, size)
            out[k].append({"plain_rtt_us": plain["median_us"], "comm_bench_us": cb["median"],
                           "ratio": cb["median"] / plain["median_us"],
                           "half_ratio": cb["median"] / (plain["median_us"] / 2),
                           "min_half_ratio": cb["min"] / (plain["min_us"] / 2),
                           "plain_rtt_min_us": plain["min_us"], "comm_bench_min_us": cb["min"],
                           "min_ratio": cb["min"] / plain["min_us"]})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transports", nargs="+", default=["gloo", "mpi"], choices=("gloo", "mpi"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    res = measure(a.transports, a.rounds, a.iters, a.size)
    if a.json:
        print(json.dumps(res))
        return 0
    print("| transport | round | plain round trip p50 / min (us) | comm-bench lat p50 / min (us) "
          "| comm-bench / half the plain round trip, p50 / min |")
    print("|---|---|---|---|---|")
    for k, rows in res.items():
        for i, r in enumerate(rows):
            print(f"| {k} | {i + 1} | {r['plain_rtt_us']:.2f} / {r['plain_rtt_min_us']:.2f} | "
                  f"{r['comm_bench_us']:.2f} / {r['comm_bench_min_us']:.2f} | "
                  f"{r['half_ratio']:.2f} / {r['min_half_ratio']:.2f} |")
        print(f"| {k} | median of rounds | | | {statistics.median(r['half_ratio'] for r in rows):.2f} / "
              f"{statistics.median(r['min_half_ratio'] for r in rows):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
