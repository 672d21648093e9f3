"""The yardstick for comm-bench's gloo and mpi latency: a plain ping-pong written
directly against torch.distributed (gloo) or mpi4py, nothing else around it.

    python tools/plain_pingpong.py gloo [--iters N] [--size B]   # starts its 2 ranks itself
    python tools/plain_pingpong.py mpi  [--iters N] [--size B]   # starts them through mpirun

Prints one JSON line from rank 0: {"median_us": whole round trip, "min_us": ...}.
Used by tests/test_framework_latency.py and tools/bench_framework_lat.py.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def pingpong(send, recv, buf, rank: int, iters: int) -> list:
    """Round trips (us) of the framework's own blocking send(buf, peer) / recv(buf, peer),
    after a tenth as many untimed ones."""
    peer = 1 - rank
    out = []
    for i in range(iters + iters // 10):
        t0 = time.perf_counter_ns()
        if rank == 0:
            send(buf, peer)
            recv(buf, peer)
        else:
            recv(buf, peer)
            send(buf, peer)
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out[iters // 10:]


def gloo_rank(rank: int, iters: int, size: int) -> list:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=2)
    out = pingpong(dist.send, dist.recv, torch.zeros(size // 4, dtype=torch.float32), rank, iters)
    dist.barrier()       # neither tears down while the other still talks: gloo aborts at exit then
    dist.destroy_process_group()
    return out


def mpi_rank(iters: int, size: int) -> tuple:
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    return rank, pingpong(comm.Send, comm.Recv, np.zeros(size, np.uint8), rank, iters)


def report(samples: list) -> None:
    print(json.dumps({"median_us": statistics.median(samples), "min_us": min(samples)}), flush=True)


def launch(kind: str, iters: int, size: int) -> int:
    """Start the two ranks (re-running this file with --rank), as comm-bench --nprocs 2 would."""
    here = [sys.executable, os.path.abspath(__file__), kind, "--iters", str(iters), "--size", str(size)]
    if kind == "mpi":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        from comm_bench.run.spawn import mpirun_command
        return subprocess.run(mpirun_command(2) + here + ["--rank", "-1"]).returncode
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    procs = [subprocess.Popen(here + ["--rank", str(r)], env=env) for r in range(2)]
    return max(p.wait() for p in procs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=("gloo", "mpi"))
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rank is None:
        return launch(a.kind, a.iters, a.size)
    if a.kind == "gloo":
        rank, samples = a.rank, gloo_rank(a.rank, a.iters, a.size)
    else:
        rank, samples = mpi_rank(a.iters, a.size)
    if rank == 0:
        report(samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
