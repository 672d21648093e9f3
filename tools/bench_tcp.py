#!/usr/bin/env python3
"""comm-bench's tcp transport beside iperf3 and a minimal C ping-pong, in one run.

    sudo .venv/bin/python tools/bench_tcp.py [--rounds 3] [--out docs/benchmarks/tcp.json]

For each path (loopback; a veth pair between two network namespaces) it
alternates iperf3 and comm-bench bandwidth runs at 4, 16 and 64 MiB messages,
then the 8 B ping-pong of comm-bench and of tools/c/pingpong.c, and finally
the harness's own cost per timed iteration. Needs root for the namespaces
and iperf3 + gcc on the PATH. Prints a markdown table; --out keeps the JSON.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CB = str(Path(sys.executable).parent / "comm-bench")
SIZES = ["4M", "16M", "64M"]
PORT = 29877


class Path2:
    """Two endpoints: (prefix command to run 'on' each side, address of each side)."""

    def __init__(self, name, prefixes, addrs):
        self.name, self.prefixes, self.addrs = name, prefixes, addrs


def loopback():
    return Path2("loopback", [[], []], ["127.0.0.1", "127.0.0.1"])


class VethPair:
    def __init__(self):
        tag = os.getpid() % 10000
        self.ns = [f"cbb{tag}a", f"cbb{tag}b"]
        self.addrs = ["10.211.0.1", "10.211.0.2"]

    def __enter__(self):
        a, b = self.ns
        sh = lambda *c: subprocess.run(c, check=True)  # noqa: E731
        sh("ip", "netns", "add", a)
        sh("ip", "netns", "add", b)
        sh("ip", "link", "add", "cbbv0", "netns", a, "type", "veth", "peer", "name", "cbbv1", "netns", b)
        for ns, dev, addr in ((a, "cbbv0", self.addrs[0]), (b, "cbbv1", self.addrs[1])):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        return Path2("veth pair (2 netns)", [["ip", "netns", "exec", n] for n in self.ns], self.addrs)

    def __exit__(self, *exc):
        for n in self.ns:
            subprocess.run(["ip", "netns", "del", n], check=False)


def iperf3(path, seconds=4):
    server = subprocess.Popen(path.prefixes[1] + ["iperf3", "-s", "-1", "-B", path.addrs[1], "-p", str(PORT)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    out = subprocess.run(path.prefixes[0] + ["iperf3", "-c", path.addrs[1], "-p", str(PORT), "-t", str(seconds),
                                             "-J"], capture_output=True, text=True, check=True).stdout
    server.wait(timeout=30)
    end = json.loads(out)["end"]
    sender = end["streams"][0]["sender"]
    return {"gbps": end["sum_received"]["bits_per_second"] / 8e9,
            "rtt_mean_us": sender.get("mean_rtt"), "rtt_max_us": sender.get("max_rtt")}


def comm_bench(path, size, iters, mode="bw"):
    """A two-rank comm-bench tcp run, launched torchrun-style on both endpoints."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        procs = []
        for rank in (0, 1):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                       MASTER_ADDR=path.addrs[0], MASTER_PORT=str(PORT + 1))
            procs.append(subprocess.Popen(path.prefixes[rank] + [
                CB, "sweep", "-t", "tcp", "--mode", mode, "-b", size, "-e", size, "-n", str(iters), "-w", "10",
                "--addr", path.addrs[rank], "-o", str(out), "--no-progress"], env=env, cwd=tmp,
                stdout=subprocess.DEVNULL))
        for p in procs:
            if p.wait(timeout=300) != 0:
                raise SystemExit("comm-bench run failed")
        return json.loads(out.read_text())["results"][0]


def c_pingpong(path, iters):
    exe = Path(tempfile.gettempdir()) / "cb_pingpong"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(ROOT / "tools/c/pingpong.c")], check=True)
    server = subprocess.Popen(path.prefixes[1] + [str(exe), "server", str(PORT + 2), "8", str(iters + 1000)])
    out = subprocess.run(path.prefixes[0] + [str(exe), "client", path.addrs[1], str(PORT + 2), "8",
                                             str(iters + 1000)], capture_output=True, text=True, check=True).stdout
    server.wait(timeout=60)
    xs = sorted(float(x) for x in out.split()[1000:])  # the first 1000 are warm-up
    return {"median_us": statistics.median(xs), "p99_us": xs[int(0.99 * (len(xs) - 1))]}


def bench_path(path, rounds):
    bw = {s: {"comm_bench": [], "iperf3": []} for s in SIZES}
    iperf_rtt = []
    for _ in range(rounds):  # alternate: iperf3, then comm-bench at each size
        for size in SIZES:
            ip = iperf3(path)
            iperf_rtt.append(ip)
            bw[size]["iperf3"].append(ip["gbps"])
            iters = {"4M": 600, "16M": 150, "64M": 40}[size]
            bw[size]["comm_bench"].append(comm_bench(path, size, iters)["algbw"])
    lat_cb = comm_bench(path, "8", 20000, mode="lat")["latency_us"]
    lat_c = c_pingpong(path, 20000)
    return {
        "path": path.name,
        "bandwidth_GBps": {s: {k: statistics.median(v) for k, v in d.items()} | {
            "ratio": statistics.median(d["comm_bench"]) / statistics.median(d["iperf3"]), "runs": d}
            for s, d in bw.items()},
        "latency_8B_us": {"comm_bench": {"median": lat_cb["median"], "p99": lat_cb["p99"]},
                          "c_pingpong": {"median": lat_c["median_us"], "p99": lat_c["p99_us"]},
                          "iperf3_tcp_info_rtt_mean_us": statistics.median(r["rtt_mean_us"] for r in iperf_rtt)},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-netns", action="store_true")
    args = ap.parse_args()
    from comm_bench import _C

    report = {"harness_overhead_ns_per_iter": _C.harness_overhead_ns(10_000_000),
              "cpu": os.cpu_count(), "paths": [bench_path(loopback(), args.rounds)]}
    if not args.no_netns:
        with VethPair() as path:
            report["paths"].append(bench_path(path, args.rounds))
    print(f"harness overhead: {report['harness_overhead_ns_per_iter']:.1f} ns per timed iteration")
    print("| path | size | comm-bench GB/s | iperf3 GB/s | ratio |\n|---|---|---|---|---|")
    for p in report["paths"]:
        for s, d in p["bandwidth_GBps"].items():
            print(f"| {p['path']} | {s} | {d['comm_bench']:.2f} | {d['iperf3']:.2f} | {d['ratio']:.2f} |")
    print("\n| path | 8 B RTT/2 median (us) | p99 | C ping-pong median | p99 | iperf3 TCP_INFO mean RTT (us) |")
    print("|---|---|---|---|---|---|")
    for p in report["paths"]:
        lat = p["latency_8B_us"]
        print(f"| {p['path']} | {lat['comm_bench']['median']:.2f} | {lat['comm_bench']['p99']:.2f} | "
              f"{lat['c_pingpong']['median']:.2f} | {lat['c_pingpong']['p99']:.2f} | "
              f"{lat['iperf3_tcp_info_rtt_mean_us']} |")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
