#!/usr/bin/env python3
"""Host buffers beside GPU buffers, same transports, same run (docs/benchmarks/gpu-buffers.md).

For each transport/op, a host-buffer sweep and a GPU-buffer sweep (--buffer cuda:LIB) of
the same sizes, alternating host, GPU, GPU, host... (--rounds), 2 ranks on 2 GPUs; each
figure is the median over the rounds. Writes a markdown table: busbw with host and with GPU
buffers, the GPU run's path (direct / staged) and, for staged runs, the device<->host copy
times per iteration and their share of the iteration's time (extra.buffer).

    python3 tools/bench_gpu_buffers.py --lib cupy --rounds 2 -o gpu-buffers.md
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

from comm_bench.sizes import human_size

# (transport, op, pattern): every host-side transport, a collective and a pair op where it has both
CASES = [("mpi", "all_reduce", "collective"), ("mpi", "sendrecv", "pair"),
         ("gloo", "all_reduce", "collective"), ("gloo", "sendrecv", "pair"),
         ("grpc", "sendrecv", "pair"), ("tcp", "sendrecv", "pair")]


def sweep(cb, transport, op, pattern, buffer, args, out):
    cmd = [cb, "sweep", "-t", transport, "--op", op, "--pattern", pattern, "--buffer", buffer,
           "--nprocs", "2", "-b", args.minbytes, "-e", args.maxbytes, "-f", args.stepfactor,
           "-n", str(args.iters), "-w", "3", "--no-progress", "-o", out, "--force"]   # one file, replaced
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    with open(out) as f:
        return json.load(f)["results"]


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def table(case, host_runs, gpu_runs):
    sizes = sorted({r["size"] for run in host_runs + gpu_runs for r in run})

    def at(runs, size, get):
        return median([get(r) for run in runs for r in run if r["size"] == size])

    def copy(key):
        """One message's copy (d2h_us / h2d_us): the source's record, else the destination's
        (a stream copies out at the source and in at the destination)."""
        def get(r):
            ex = r["extra"]
            v = ex["buffer"].get(key)
            return v if v is not None else ((ex.get("dst") or {}).get("buffer") or {}).get(key)
        return get

    def share(r):
        """The records' own copy_share: each rank's copies over its own iteration time (a
        stream's source copies out while its destination copies in: "source / destination")."""
        mine = r["extra"]["buffer"].get("copy_share")
        dst = ((r["extra"].get("dst") or {}).get("buffer") or {}).get("copy_share")
        return (mine, dst)

    def share_text(size):
        pairs = [share(r) for run in gpu_runs for r in run if r["size"] == size]
        src, dst = median([p[0] for p in pairs]), median([p[1] for p in pairs])
        pct = lambda v: "-" if v is None else f"{v * 100:.0f}%"     # noqa: E731
        return pct(src) if dst is None else f"{pct(src)} / {pct(dst)}"

    def wire_only(r):
        """A byte transport's (tcp, grpc) GPU record without its staging copies: the busbw of
        the same run's wire loop alone (its time is that loop's samples + d2h + h2d)."""
        b = r["extra"]["buffer"]
        if b.get("wire_us") is None or not r["time_us"]:
            return None
        return r["busbw"] * r["time_us"] / (r["time_us"] - b["d2h_us"] - b["h2d_us"])

    def spread(runs, size):
        """min-max of the rounds' busbw: a GPU / host ratio inside the overlap is noise."""
        v = [r["busbw"] for run in runs for r in run if r["size"] == size]
        return f"{min(v):.3f}-{max(v):.3f}" if len(v) > 1 else "-"

    lines = ["| size | host busbw (GB/s) | host rounds | GPU busbw (GB/s) | GPU rounds | GPU run's wire alone (GB/s) | GPU / host | GPU path "
             "| d2h (us) | h2d (us) | copies' share of each rank's time |",
             "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for size in sizes:
        h = at(host_runs, size, lambda r: r["busbw"])
        g = at(gpu_runs, size, lambda r: r["busbw"])
        paths = sorted({r["extra"]["buffer"]["path"] for run in gpu_runs for r in run if r["size"] == size})
        lines.append(f"| {human_size(size)} | {fmt(h, '.3f')} | {spread(host_runs, size)} | {fmt(g, '.3f')} | "
                     f"{spread(gpu_runs, size)} | {fmt(at(gpu_runs, size, wire_only), '.3f')} | "
                     f"{fmt(g / h if g and h else None)} | {'/'.join(paths)} | {fmt(at(gpu_runs, size, copy('d2h_us')))} | "
                     f"{fmt(at(gpu_runs, size, copy('h2d_us')))} | {share_text(size)} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default="cupy", choices=("cupy", "numba", "torch"))
    ap.add_argument("--transports", default="mpi,gloo,grpc,tcp")
    ap.add_argument("--rounds", type=int, default=2, help="host/GPU alternations")
    ap.add_argument("-b", "--minbytes", default="4K")
    ap.add_argument("-e", "--maxbytes", default="64M")
    ap.add_argument("-f", "--stepfactor", default="16")
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("-o", "--output", default="gpu-buffers.md")
    ap.add_argument("--json", default=None, help="also write every record here")
    args = ap.parse_args()
    cb = os.path.join(os.path.dirname(sys.executable), "comm-bench")
    wanted = args.transports.split(",")
    cases = [c for c in CASES if c[0] in wanted]
    runs = {c: {"host": [], "gpu": []} for c in cases}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for case in cases:
                kinds = (("host", "host"), ("gpu", f"cuda:{args.lib}"))
                for kind, buffer in kinds[::1 if rnd % 2 == 0 else -1]:   # ABBA: neither always goes first
                    out = os.path.join(tmp, "r.json")
                    runs[case][kind].append(sweep(cb, *case, buffer, args, out))
                    print(f"round {rnd}: {' '.join(case)} {buffer} done ({time.time() - t0:.0f} s)", flush=True)
            write(args, cases, runs, rnd + 1)     # each finished round: a whole table


def write(args, cases, runs, rounds):
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines()
    md = [f"# Host buffers beside GPU buffers ({args.lib}), {time.strftime('%Y-%m-%d', time.gmtime())}", "",
          f"Machine: {len(gpu)} x {gpu[0] if gpu else '?'}; 2 ranks, one GPU each. Command: "
          f"`python3 tools/bench_gpu_buffers.py {' '.join(sys.argv[1:])}`. Host and GPU sweeps alternate, "
          f"host first in even rounds, GPU first in odd ones ({rounds} round(s)); each figure is the median over rounds; -n {args.iters}.", "",
          "busbw: as every comm-bench record (staged GPU runs include the device<->host copies). "
          "d2h/h2d: the staging copies of one message or iteration (device -> host at the source, host -> "
          "device at the destination), timed in their own pass as the staged loop makes them (each issued and "
          "waited for, host clock); share: each rank's own copies over its own iteration time (a stream: source / destination). tcp/grpc: the GPU record's time is its own wire "
          "loop + d2h + h2d (the wire alone in its own column). "
          "direct: the library read GPU memory itself (no copies of ours).", ""]
    for case in cases:
        md += [f"## {case[0]} {case[1]} ({case[2]})", ""] + table(case, runs[case]["host"], runs[case]["gpu"]) + [""]
    with open(args.output, "w") as f:
        f.write("\n".join(md))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({" ".join(c): runs[c] for c in cases}, f)
    print("\n".join(md))

if __name__ == "__main__":
    main()
