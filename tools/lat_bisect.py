"""Where comm-bench's gloo latency differs from a plain ping-pong: the plain loop of
tools/plain_pingpong.py with comm-bench's pieces added one at a time, in alternating rounds.

    python tools/lat_bisect.py [--rounds 3] [--iters 2000] [--size 8]

Variants (each 2 fresh local ranks over loopback):
  plain     torch.distributed env:// rendezvous, the ping-pong, nothing else
  store     + comm-bench's rendezvous store (comm_bench.control.rendezvous.Store, rank 0 hosts it)
  watchdog  + comm-bench's watchdog threads (heartbeat through the store, once a second)
  loop      + comm-bench's timing loop (transports/_framework.time_loop) instead of the plain one
Prints one markdown row per variant: median over rounds of the round trip's median and min (us).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys

VARIANTS = ("plain", "store", "watchdog", "loop")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def rank_main(variant: str, rank: int, iters: int, size: int) -> list:
    import torch
    import torch.distributed as dist
    from datetime import timedelta

    from plain_pingpong import pingpong

    step = VARIANTS.index(variant)
    store = watchdog = None
    if step == 0:
        dist.init_process_group("gloo", rank=rank, world_size=2)
    else:
        from comm_bench.control.rendezvous import Store
        store = Store("127.0.0.1", int(os.environ["MASTER_PORT"]), rank, 2, 60.0, secret=b"k" * 32)
        dist.init_process_group("gloo", store=dist.PrefixStore("gloo", store.raw), rank=rank, world_size=2,
                                timeout=timedelta(seconds=60))
    if step >= 2:
        from comm_bench.control.watchdog import Watchdog
        watchdog = Watchdog(store, rank, 2, ["here", "here"], 60.0, on_abort=lambda f: None).start()
    buf = torch.zeros(size // 4, dtype=torch.float32)
    if step >= 3:
        from comm_bench.transports import _framework as fw
        peer = 1 - rank
        steps = fw.pair_steps(dist.send, dist.recv, buf, buf, buf.new_zeros(1), peer,
                              "src" if rank == 0 else "dst", "lat")
        out = fw.time_loop(steps[0], iters, iters // 10)
    else:
        out = pingpong(dist.send, dist.recv, buf, rank, iters)
    dist.barrier()
    if watchdog:
        watchdog.stop()
    dist.destroy_process_group()
    return out


def launch(variant: str, iters: int, size: int) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    cmd = [sys.executable, os.path.abspath(__file__), "--variant", variant, "--iters", str(iters),
           "--size", str(size)]
    procs = [subprocess.Popen(cmd + ["--rank", str(r)], env=env, stdout=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"{variant}: a rank failed")
    return json.loads(outs[0].strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.variant:
        samples = rank_main(a.variant, a.rank, a.iters, a.size)
        if a.rank == 0:
            print(json.dumps({"median_us": statistics.median(samples), "min_us": min(samples)}), flush=True)
        return 0
    got = {v: [] for v in a.variants}
    for _ in range(a.rounds):
        for v in a.variants:
            got[v].append(launch(v, a.iters, a.size))
    print(f"gloo ping-pong, {a.size} B, {a.iters} iterations, {a.rounds} alternating rounds (round trip, us)")
    print("| variant | median of p50 | median of min | rounds' p50 |")
    print("|---|---|---|---|")
    for v, rows in got.items():
        print(f"| {v} | {statistics.median(r['median_us'] for r in rows):.1f} | "
              f"{statistics.median(r['min_us'] for r in rows):.1f} | "
              f"{', '.join(format(r['median_us'], '.1f') for r in rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
