"""comm-bench's rendezvous store (light_store + store_server) against torch's TCPStore
(libuv backend, the store torch.distributed uses at scale) under the same load: N light
clients (threads in a few processes, each with its own connection, not full ranks), each
store in a server process of its own, as rank 0 hosts it. The stores alternate, round by
round. Per N and store: the wall time of a barrier (each client sets its arrival; client 0
waits for all, then releases the others, as rendezvous.Store.barrier does) and of an
all-gather of 1 KiB per client (set, wait for every key, read them all in one multi_get),
and the server process's peak resident memory. `--barriers K` runs K barriers back to back
on the same connections in each round (connecting 4,096 TCPStore clients takes minutes, a
barrier milliseconds): a barrier's time runs from the end of the one before (the first:
from the start signal) to its last client's return, and a round reports their median.

    .venv/bin/python tools/bench_store.py --clients 256 1024 4096 --rounds 5 5 1 --barriers 5

Results: docs/benchmarks/store.md.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import statistics
import sys
import threading
import time
from datetime import timedelta

os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")   # one warning per TCPStore client buried the table

SECRET = b"bench-store-secret-0123456789abcdef"
HOST = "127.0.0.1"
OP_TIMEOUT_S = 120            # a client whose wait outlasts this fails the round


def _raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _serve(kind: str, port: int, ready, stop):
    _raise_nofile()
    if kind == "comm-bench":
        from comm_bench.control.light_store import LightStore
        from comm_bench.control.rendezvous import _listener
        store = LightStore(HOST, port, True, 600.0, _listener(HOST, port, True), secret=SECRET)
    else:
        from torch.distributed import TCPStore
        store = TCPStore(HOST, port, None, True, timedelta(seconds=OP_TIMEOUT_S), wait_for_workers=False,
                         use_libuv=True)
    ready.set()
    stop.wait()
    del store       # served until the clients were done
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
    return peak


def _client(kind: str, port: int):
    if kind == "comm-bench":
        from comm_bench.control.light_store import LightStore
        return LightStore(HOST, port, False, 600.0, secret=SECRET)
    from torch.distributed import TCPStore
    return TCPStore(HOST, port, None, False, timedelta(seconds=OP_TIMEOUT_S), wait_for_workers=False,
                    use_libuv=True)


def _clients(kind, port, first, count, total, connected, go, out, gather, barriers):
    """One process: `count` threads, clients first .. first+count-1 of `total`."""
    _raise_nofile()
    done = [None] * count
    stores = [None] * count
    # built once per process, not per client
    keys = {"g": [f"g/{r}" for r in range(total)], **{j: [f"b{j}/{r}" for r in range(total)] for j in range(barriers)}}

    def connect(i):
        stores[i] = _client(kind, port)

    def work(i):
        try:
            run(i)
        except Exception as exc:  # noqa: BLE001 - a client that failed or timed out is counted
            done[i] = repr(exc)

    def run(i):
        me, s = first + i, stores[i]
        start.wait()
        ends = []
        for j in range(barriers):
            s.set(f"b{j}/{me}", b"1")
            if me == 0:
                s.wait(keys[j], timedelta(seconds=OP_TIMEOUT_S))
                s.set(f"b{j}/go", b"1")
            else:
                s.wait([f"b{j}/go"], timedelta(seconds=OP_TIMEOUT_S))
            ends.append(time.monotonic())
        if not gather:
            done[i] = (ends, ends[-1])
            return
        s.set(f"g/{me}", os.urandom(1024))
        s.wait(keys["g"], timedelta(seconds=OP_TIMEOUT_S))
        values = s.multi_get(keys["g"])
        assert len(values) == total and all(len(v) == 1024 for v in values)
        done[i] = (ends, time.monotonic())

    threads = [threading.Thread(target=connect, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    connected.release()
    # the threads wait on an event of their process, not on `go` itself: 4,096 waiters on one
    # multiprocessing Event are woken one by one across processes, which the barrier would time
    start = threading.Event()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    go.wait()
    cpu0 = time.process_time()
    start.set()
    for t in threads:
        t.join()
    out.put((done, time.process_time() - cpu0))


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(kind: str, n: int, procs: int, gather: bool = True, barriers: int = 1) -> dict:
    ctx = mp.get_context("fork")
    from comm_bench.system.netutil import free_port
    port = free_port()
    ready, stop = ctx.Event(), ctx.Event()
    peak_q = ctx.Queue()
    server = ctx.Process(target=lambda: peak_q.put(_serve(kind, port, ready, stop)))
    server.start()
    ready.wait(120)
    connected, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    per = [n // procs + (1 if p < n % procs else 0) for p in range(procs)]
    starts = [sum(per[:p]) for p in range(procs)]
    workers = [ctx.Process(target=_clients, args=(kind, port, starts[p], per[p], n, connected, go, out, gather,
                                                         barriers))
               for p in range(procs) if per[p]]
    connect0 = time.monotonic()
    for w in workers:
        w.start()
    for _ in workers:
        connected.acquire()
    connect_s = time.monotonic() - connect0
    server_cpu0 = _cpu_s(server.pid)
    t0 = time.monotonic()
    go.set()
    got = [out.get(timeout=4 * OP_TIMEOUT_S) for _ in workers]
    server_cpu = _cpu_s(server.pid) - server_cpu0
    done = [d for ds, _ in got for d in ds]
    client_cpu = sum(c for _, c in got)
    for w in workers:
        w.join()
    stop.set()
    peak = peak_q.get(timeout=60)
    server.join()
    failed = [d for d in done if isinstance(d, str)]
    if failed:
        return {"failed": len(failed), "why": failed[0], "server_peak_mb": peak, "server_cpu_s": server_cpu,
                "client_cpu_s": client_cpu, "connect_s": connect_s}
    ends = [t0] + [max(d[0][j] for d in done) for j in range(barriers)]
    each = [b - a for a, b in zip(ends, ends[1:])]
    barrier_end = ends[-1]
    return {"barrier_s": statistics.median(each), "barriers_s": each,
            "allgather_s": max(d[1] for d in done) - barrier_end if gather
            else float("nan"), "server_peak_mb": peak, "server_cpu_s": server_cpu, "client_cpu_s": client_cpu,
            "connect_s": connect_s}


def main():
    global OP_TIMEOUT_S
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--rounds", type=int, nargs="+", default=[3],
                   help="rounds per store: one number for every N, or one per --clients")
    p.add_argument("--barriers", type=int, default=1, help="barriers back to back in each round")
    p.add_argument("--procs", type=int, default=4, help="client processes (threads spread over them)")
    p.add_argument("--gather-max", type=int, default=1 << 30,
                   help="skip the all-gather above this many clients (N x N KiB through the store)")
    p.add_argument("--stores", nargs="+", default=["comm-bench", "TCPStore"], choices=["comm-bench", "TCPStore"])
    p.add_argument("--op-timeout", type=float, default=OP_TIMEOUT_S,
                   help="seconds a client's wait may last (the 4,096-client all-gather moves 16 GiB)")
    a = p.parse_args()
    if len(a.rounds) not in (1, len(a.clients)) or min(a.rounds) < 1 or a.barriers < 1 or min(a.clients) < 1:
        print("bench_store.py: --rounds takes one number or one per --clients; rounds, barriers and clients "
              "are at least 1", file=sys.stderr)
        return 2
    rounds = dict(zip(a.clients, a.rounds * len(a.clients) if len(a.rounds) == 1 else a.rounds))
    OP_TIMEOUT_S = a.op_timeout      # the forked servers and clients read it
    _raise_nofile()
    print("| clients | store | barrier s (median, min-max) | all-gather 1 KiB s (median, min-max) "
          "| server CPU s | client CPU s | server peak MB (max) |")
    print("|---|---|---|---|---|---|---|")
    for n in a.clients:
        runs = {kind: [] for kind in a.stores}
        for _ in range(rounds[n]):
            for kind in runs:                    # alternate: both see the same machine state
                runs[kind].append(one_round(kind, n, a.procs, gather=n <= a.gather_max, barriers=a.barriers))
                print(f"# {n} {kind}: {runs[kind][-1]}", file=sys.stderr, flush=True)
        for kind, rs in runs.items():
            ok = [r for r in rs if "failed" not in r]
            for r in rs:
                if "failed" in r:
                    print(f"| {n} | {kind} | a round failed: {r['failed']} client(s), e.g. {r['why'][:120]} | | |")

            def fig(name):
                v = [r[name] for r in ok]
                return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" if v else "-"
            print(f"| {n} | {kind} ({len(ok)} of {len(rs)} rounds) | {fig('barrier_s')} | {fig('allgather_s')} | "
                  f"{fig('server_cpu_s')} | {fig('client_cpu_s')} | {max(r['server_peak_mb'] for r in rs):.0f} |",
                  flush=True)
        if len(runs) < 2:
            continue
        pairs = [(x, y) for x, y in zip(runs["comm-bench"], runs["TCPStore"]) if "failed" not in x and "failed" not in y]
        b = [x["barrier_s"] / y["barrier_s"] for x, y in pairs]
        g = [x["allgather_s"] / y["allgather_s"] for x, y in pairs]
        print(f"| {n} | ratio comm-bench/TCPStore, pair by pair | "
              f"{', '.join(f'{r:.2f}' for r in b)} | {', '.join(f'{r:.2f}' for r in g)} | | | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
