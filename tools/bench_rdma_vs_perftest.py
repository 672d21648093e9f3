#!/usr/bin/env python3
"""comm-bench's rdma transport against perftest, side by side, in one Soft-RoCE VM boot.

For each case (ib_write_bw, ib_read_bw, ib_send_bw at 64 KiB..1 MiB; ib_write_lat
at 2 B..4 KiB) it alternates perftest and comm-bench at the same size, iterations,
tx depth and inline size, `--reps` times (the order flips every repetition), and
compares medians of the repetitions: bandwidth = average bandwidth (bytes x
iters / (last completion - first post), perftest's definition), latency = the
median one-way latency (perftest's t_typical). Timings under QEMU emulation are
noisy, hence alternation and medians; never compare with fixed numbers.

    python tools/bench_rdma_vs_perftest.py --out docs/benchmarks/rdma_results.json

comm-bench runs in forked ranks of one interpreter with a file store
(tests/rdma_vm/minirun.py): the transport and its native loops are the real ones;
torch's store is skipped because importing torch under emulation takes minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BW_CASES = [(op, s) for op in ("write", "read", "send") for s in (65536, 262144, 1 << 20)]
LAT_CASES = [("write", s) for s in (2, 64, 512, 4096)]


# -- perftest ----------------------------------------------------------------
def perftest(tool: str, size: int, iters: int, port: int, gid: int) -> dict:
    args = [tool, "-d", "rxe0", "-i", "1", "-x", str(gid), "-s", str(size), "-n", str(iters),
            "-p", str(port), "-F"]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = ""
    for _ in range(30):  # the server needs a moment to listen (slow under emulation)
        time.sleep(0.5)
        client = subprocess.run(args + ["127.0.0.1"], capture_output=True, text=True, timeout=300)
        out = client.stdout + client.stderr
        if client.returncode == 0:
            break
        if "Couldn't connect" not in out and "Unable to" not in out:
            break
    server.wait(timeout=120)
    return parse_perftest(out, size, tool)


def parse_perftest(text: str, size: int, tool: str) -> dict:
    for line in text.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0] == str(size) and re.match(r"^\d+$", cols[1]):
            nums = [float(c) for c in cols[2:]]
            if tool.endswith("_lat"):  # t_min t_max t_typical t_avg t_stdev p99 p99.9
                return {"median_us": nums[2], "min_us": nums[0], "avg_us": nums[3], "p99_us": nums[5]}
            # BW peak, BW average [MB/s], MsgRate [Mpps]: bytes/s from the message rate (unit-free)
            return {"gbps": nums[2] * size / 1e3, "peak_mbs": nums[0]}
    raise RuntimeError(f"{tool} -s {size}: no result line in:\n{text}")


# -- comm-bench --------------------------------------------------------------
def commbench(op: str, mode: str, size: int, iters: int, warmup: int) -> dict:
    sys.path.insert(0, os.path.join(REPO, "tests", "rdma_vm"))
    from minirun import run_ranks

    def body(t, rank):
        res = t.run(op, size, iters, warmup, mode=mode, peer=1 - rank, role="src" if rank == 0 else "dst")
        if rank:
            return None
        s = sorted(res.samples_us)
        from comm_bench.metrics import make_record   # the record's figures, as the sweep derives them
        rec = make_record(transport="rdma", op=op, mode=mode, pattern="pair", size=size, dtype="uint8",
                          iters=iters, warmup=warmup, n=2, samples_us=res.samples_us, wrong=res.wrong,
                          extra=res.extra, elem=1, round_trip=res.round_trip, peak_gbps=res.peak_gbps)
        return {"gbps": rec["algbw"] if mode == "bw" else None, "median_us": statistics.median(s), "min_us": s[0],
                "counters": res.extra.get("counters")}

    res = run_ranks(2, body, max_bytes=size, timeout=60, ops=(op,))
    if "ok" not in res[0]:
        raise RuntimeError(f"comm-bench {op} {mode} {size}: {res[0].get('error')} / {res[1].get('error')}")
    return res[0]["ok"]


def progress(args, line: str) -> None:
    """Print, and append to <out>.log (readable on the host while the VM runs)."""
    print(line, flush=True)
    with open(args.out + ".log", "a") as f:
        f.write(line + "\n")


def inside(args) -> int:
    gid = 1  # rxe on lo: index 1 is the RoCE v2 IPv4 GID (what comm-bench picks too)
    rows = []
    port = 18515
    cases = ([("bw", op, s) for op, s in BW_CASES] if args.only in ("all", "bw") else []) + \
            ([("lat", op, s) for op, s in LAT_CASES] if args.only in ("all", "lat") else [])
    for mode, op, size in cases:
        tool = f"ib_{op}_{mode}"
        iters = args.bw_iters if mode == "bw" else args.lat_iters
        pt, cb = [], []
        try:
            for rep in range(args.reps):
                order = ("pt", "cb") if rep % 2 == 0 else ("cb", "pt")
                for who in order:
                    port += 1
                    if who == "pt":
                        pt.append(perftest(tool, size, iters, port, gid))
                    else:
                        cb.append(commbench(op, mode, size, iters, warmup=args.warmup))
        except Exception as exc:  # noqa: BLE001 - one broken case must not lose the others
            progress(args, f"{tool} {size} B: FAILED: {exc}")
            continue
        key = "gbps" if mode == "bw" else "median_us"
        p = statistics.median(r[key] for r in pt)
        c = statistics.median(r[key] for r in cb)
        row = {"tool": tool, "mode": mode, "op": op, "size": size, "iters": iters, "reps": args.reps,
               "perftest": p, "comm_bench": c, "ratio": c / p if p else None,
               "perftest_all": [r[key] for r in pt], "comm_bench_all": [r[key] for r in cb]}
        rows.append(row)
        unit = "GB/s" if mode == "bw" else "us"
        progress(args, f"{tool:13s} {size:>8d} B  perftest {p:9.3f} {unit}  comm-bench {c:9.3f} {unit}  "
                       f"ratio {row['ratio']:.3f}")
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "kernel": os.uname().release,
           "device": "rxe0 (Soft-RoCE on lo, QEMU TCG VM, 2 vCPUs)", "rows": rows,
           "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
           "command": f"python tools/bench_rdma_vs_perftest.py --only {args.only} --reps {args.reps} "
                      f"--bw-iters {args.bw_iters} --lat-iters {args.lat_iters} --out {args.out}"}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(markdown(doc))
    return 0


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def markdown(doc: dict) -> str:
    lines = ["| test | size (B) | perftest | comm-bench | ratio | target |",
             "|---|---:|---:|---:|---:|---|"]
    for r in doc["rows"]:
        unit = "GB/s" if r["mode"] == "bw" else "us (median)"
        target = ">= 0.95" if r["mode"] == "bw" else "<= 1.10"
        lines.append(f"| {r['tool']} | {r['size']} | {r['perftest']:.3f} {unit} | {r['comm_bench']:.3f} {unit} "
                     f"| {r['ratio']:.3f} | {target} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="rdma_vs_perftest.json")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bw-iters", type=int, default=2000)
    ap.add_argument("--lat-iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--only", choices=("all", "bw", "lat"), default="all", help="which cases to run")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        return inside(args)
    sys.path.insert(0, HERE)
    from softroce_vm import run_in_vm

    out = os.path.abspath(args.out)
    cmd = (f"python {os.path.abspath(__file__)} --inside --out {out} --reps {args.reps} "
           f"--bw-iters {args.bw_iters} --lat-iters {args.lat_iters} --warmup {args.warmup} --only {args.only}")
    res = run_in_vm(cmd, rwdirs=[os.path.dirname(out)], timeout=3600)
    sys.stdout.write(res.output)
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
