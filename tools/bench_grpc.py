#!/usr/bin/env python3
"""Side-by-side: comm-bench's grpc transport vs a minimal hand-written grpcio stream loop,
(one file over 400 lines on purpose: a benchmark script is read and run as one piece)
and both as a fraction of comm-bench's tcp transport, between the same two endpoints.

    python tools/bench_grpc.py                      # loopback (127.0.0.1)
    python tools/bench_grpc.py --netns              # two network namespaces (root)
    python tools/bench_grpc.py --netns --rounds 5 -b 64K -e 64M -f 2 --json out.json

Two rank processes (rank 0 sends, rank 1 receives) each host, at once:
  * the grpc transport (comm_bench.transports.grpc_streams, op sendrecv, mode bw:
    client-streaming; the same object `comm-bench sweep --transport grpc` drives),
  * the baseline: BASELINE_* below, the plainest grpcio bidirectional stream (generic
    handler, bytes payloads, default channel options apart from the message size limit),
  * the tcp transport (comm_bench.transports.tcp, op sendrecv, mode bw), when present.
For every size and round the three run one after the other (order rotated each round);
the table shows medians over rounds. Bandwidth is the same for all three:
bytes x iters / (first timed send -> the receiver's acknowledgement of the last message),
1 GB/s = 1e9 B/s. Warm-up messages go first on the same stream and are not timed.
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

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------- the baseline loop
def http2_options(overrides: dict) -> list:
    """The HTTP/2 flow-control settings given to the transport (--options), applied to the
    baseline too, so both run with the same window."""
    out = []
    if overrides.get("grpc_window"):
        out.append(("grpc.http2.lookahead_bytes", parse_size(str(overrides["grpc_window"]))))
    if overrides.get("grpc_no_bdp"):
        out.append(("grpc.http2.bdp_probe", 0))
    return out


def baseline_server(addr: str, max_message: int, extra_options=()):
    """Minimal grpcio server: one bidirectional-stream method that counts what arrives
    and answers once at the end of the stream."""
    import grpc
    from concurrent.futures import ThreadPoolExecutor

    def stream(request_iterator, context):
        n = 0
        for _ in request_iterator:
            n += 1
        yield str(n).encode()

    def client_stream(request_iterator, context):   # the same loop as a client-streaming method
        n = 0
        for _ in request_iterator:
            n += 1
        return str(n).encode()

    server = grpc.server(
        ThreadPoolExecutor(max_workers=4),
        handlers=[grpc.method_handlers_generic_handler(
            "baseline.Loop", {"Stream": grpc.stream_stream_rpc_method_handler(stream),
                              "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
                              "Echo": grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)})],
        options=[("grpc.max_receive_message_length", max_message),
                 ("grpc.max_send_message_length", max_message), *extra_options])
    port = server.add_insecure_port(f"{addr}:0")
    server.start()
    return server, port


def baseline_client(target: str, max_message: int, retries: bool = True, extra_options=()):
    """retries=False: the one channel argument the transport sets that changes speed
    (gRPC's default retry support buffers the first messages of a call for replay)."""
    import grpc
    options = [("grpc.max_receive_message_length", max_message),
               ("grpc.max_send_message_length", max_message), *extra_options]
    if not retries:
        options += [("grpc.enable_retries", 0), ("grpc.use_local_subchannel_pool", 1)]
    channel = grpc.insecure_channel(target, options=options)
    return channel, channel.stream_stream("/baseline.Loop/Stream"), channel.stream_unary("/baseline.Loop/ClientStream")


def baseline_echo(channel):
    return channel.unary_unary("/baseline.Loop/Echo")


def baseline_lat(echo, payload: bytes, iters: int, warmup: int) -> float:
    """Median RTT/2 (us) of unary echo calls."""
    for _ in range(warmup):
        echo(payload)
    half = []
    for _ in range(iters):
        t = time.perf_counter_ns()
        echo(payload)
        half.append((time.perf_counter_ns() - t) / 2000.0)
    return statistics.median(half)


def baseline_run(stream, payload: bytes, iters: int, warmup: int, client_streaming: bool = False) -> float:
    """Seconds from the first timed message to the server's answer."""
    t0 = [0]

    def requests():
        for _ in range(warmup):
            yield payload
        t0[0] = time.perf_counter_ns()
        for _ in range(iters):
            yield payload

    if client_streaming:
        assert int(stream(requests())) == iters + warmup
    else:
        for ack in stream(requests()):
            assert int(ack) == iters + warmup
    return (time.perf_counter_ns() - t0[0]) / 1e9


# ---------------------------------------------------------------- one rank
def parse_size(text: str) -> int:
    s = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(float(s.rstrip("KMG")) * mult)


def sizes(lo: int, hi: int, factor: int) -> list:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def make_ctx(cls, rank, world, addr, store, timeout, max_bytes, overrides):
    from comm_bench.transports.base import RankContext
    opts = {o.dest: o.default for o in cls.options}
    opts.update({k: v for k, v in overrides.items() if k in opts})
    return RankContext(rank=rank, world_size=world, local_rank=0, local_world_size=1,
                       host=socket.gethostname(), addr=addr, store=store, timeout=timeout,
                       options=opts, max_bytes=max_bytes, ops=("sendrecv",))


def rank_main(a) -> int:
    from comm_bench import registry
    from comm_bench.control.rendezvous import Store

    rank, world = a.rank, 2
    store = Store(a.master, a.port, rank, world, a.timeout, secret=f"bench-grpc:{a.port}".encode())
    size_list = sizes(parse_size(a.minbytes), parse_size(a.maxbytes), a.stepfactor)
    max_bytes = max(size_list)
    overrides = json.loads(a.options)
    kinds = {}
    grpc_cls = registry.get("grpc")
    t = grpc_cls()
    t.setup(make_ctx(grpc_cls, rank, world, a.addr, store, a.timeout, max_bytes, overrides))
    kinds["grpc"] = t
    has_tcp = "tcp" in registry.transports() and not a.no_tcp
    if has_tcp:
        tcp_cls = registry.get("tcp")
        ok, why = tcp_cls.probe()
        has_tcp = store.all_gather("bench/tcp-ok", bool(ok))
        has_tcp = all(has_tcp)
        if has_tcp:
            tt = tcp_cls()
            tt.setup(make_ctx(tcp_cls, rank, world, a.addr, store, a.timeout, max_bytes, overrides))
            kinds["tcp"] = tt
        elif rank == 0:
            print(json.dumps({"note": f"tcp transport unavailable: {why}"}), flush=True)
    max_message = max_bytes + (1 << 16)
    if rank == 1:
        server, bport = baseline_server(a.addr, max_message, http2_options(overrides))
        store.all_gather("bench/baseline", [a.addr, bport])
    else:
        ep = store.all_gather("bench/baseline", None)[1]
        host = f"[{ep[0]}]" if ":" in ep[0] else ep[0]
        h2 = http2_options(overrides)
        channel, stream, _ = baseline_client(f"{host}:{ep[1]}", max_message, extra_options=h2)
        channel_nr, stream_nr, unary_nr = baseline_client(f"{host}:{ep[1]}", max_message, retries=False,
                                                          extra_options=h2)
    order = ["grpc", "baseline", "baseline_nr"] + (["tcp"] if has_tcp else []) + \
        (["baseline_cs"] if a.client_streaming else [])
    import numpy as np
    for size in size_list:
        iters = max(a.min_iters, min(a.max_iters, parse_size(a.bytes_per_run) // size))
        warmup = max(2, iters // 10)
        payload = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8).tobytes() \
            if rank == 0 else None
        for rnd in range(a.rounds):
            k = rnd % len(order)
            for kind in order[k:] + order[:k]:
                store.barrier("bench/step")
                if kind.startswith("baseline"):
                    if rank == 0:
                        if kind == "baseline_cs":
                            secs = baseline_run(unary_nr, payload, iters, warmup, client_streaming=True)
                        else:
                            secs = baseline_run(stream if kind == "baseline" else stream_nr,
                                                payload, iters, warmup)
                        gbps = size * iters / secs / 1e9
                else:
                    r = kinds[kind].run("sendrecv", size, iters, warmup, dtype="uint8", mode="bw",
                                        peer=1 - rank, role="src" if rank == 0 else "dst")
                    if rank == 0:
                        mean_us = sum(r.samples_us) / len(r.samples_us)
                        gbps = size / mean_us / 1e3
                if rank == 0:
                    print(json.dumps({"kind": kind, "size": size, "iters": iters, "round": rnd,
                                      "gbps": gbps}), flush=True)
    lat_order = ["grpc", "baseline"] + (["tcp"] if has_tcp else [])
    for size in [parse_size(x) for x in a.lat.split(",")] if a.lat else []:
        payload = bytes(size) if rank == 0 else None
        echo = baseline_echo(channel) if rank == 0 else None
        for rnd in range(a.rounds):
            k = rnd % len(lat_order)
            for kind in lat_order[k:] + lat_order[:k]:
                store.barrier("bench/lat")
                if kind == "baseline":
                    if rank == 0:
                        us = baseline_lat(echo, payload, a.lat_iters, a.lat_iters // 10)
                else:
                    r = kinds[kind].run("sendrecv", size, a.lat_iters, a.lat_iters // 10, dtype="uint8",
                                        mode="lat", peer=1 - rank, role="src" if rank == 0 else "dst")
                    if rank == 0:
                        us = statistics.median(r.samples_us)
                if rank == 0:
                    print(json.dumps({"lat_kind": kind, "size": size, "iters": a.lat_iters, "round": rnd,
                                      "p50_us": us}), flush=True)
    store.barrier("bench/end")
    for tr in kinds.values():
        tr.teardown()
    if rank == 1:
        server.stop(0)
    else:
        channel.close()
        channel_nr.close()
    return 0


# ---------------------------------------------------------------- the driver
def free_port(addr="127.0.0.1") -> int:
    s = socket.socket()
    s.bind((addr, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(a, prefixes, addrs, master_port) -> list:
    base = [sys.executable, os.path.abspath(__file__), "_rank", "--master", addrs[0],
            "--port", str(master_port), "-b", a.minbytes, "-e", a.maxbytes,
            "-f", str(a.stepfactor), "--rounds", str(a.rounds), "--bytes-per-run", a.bytes_per_run,
            "--options", a.options, "--timeout", str(a.timeout)] + (["--no-tcp"] if a.no_tcp else []) + \
        (["--client-streaming"] if a.client_streaming else []) + \
        (["--lat", a.lat, "--lat-iters", str(a.lat_iters)] if a.lat else [])
    env = dict(os.environ, GRPC_VERBOSITY=os.environ.get("GRPC_VERBOSITY", "NONE"))
    procs = [subprocess.Popen([*prefixes[r], *base, "--rank", str(r), "--addr", addrs[r]],
                              stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL, text=True,
                              env=env) for r in range(2)]
    rows = []
    deadline = time.monotonic() + a.limit
    for line in procs[0].stdout:
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
            if "kind" in rows[-1] and a.verbose:  # (latency rows carry lat_kind)
                r = rows[-1]
                print(f"  {r['kind']:9s} {r['size']:>10d} round {r['round']} {r['gbps']:.3f} GB/s",
                      file=sys.stderr)
        if time.monotonic() > deadline:
            break
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if any(p.returncode for p in procs):
        raise SystemExit(f"bench_grpc: a rank failed (exit codes {[p.returncode for p in procs]})")
    return rows


def human(n: int) -> str:
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def table(rows: list, title: str) -> str:
    by = {}
    for r in rows:
        if "kind" in r:
            by.setdefault((r["size"], r["kind"]), []).append(r["gbps"])
    notes = [r["note"] for r in rows if "note" in r]
    size_list = sorted({s for s, _ in by})
    has_tcp = any(k == "tcp" for _, k in by)
    out = [f"### {title}", ""]
    head = ("| size | iters | grpc transport GB/s | baseline loop GB/s | baseline, retries off GB/s "
            "| grpc / baseline | grpc / baseline, retries off |")
    sep = "|---:|---:|---:|---:|---:|---:|---:|"
    if has_tcp:
        head += " tcp transport GB/s | grpc / tcp | baseline / tcp |"
        sep += "---:|---:|---:|"
    out += [head, sep]
    ratios, ratios_nr = [], []
    for s in size_list:
        g = statistics.median(by[(s, "grpc")])
        b = statistics.median(by[(s, "baseline")])
        bn = statistics.median(by[(s, "baseline_nr")])
        iters = next(r["iters"] for r in rows if r.get("size") == s)
        ratios.append(g / b)
        ratios_nr.append(g / bn)
        line = f"| {human(s)} | {iters} | {g:.3f} | {b:.3f} | {bn:.3f} | {g / b:.3f} | {g / bn:.3f} |"
        if has_tcp:
            t = statistics.median(by[(s, "tcp")])
            line += f" {t:.3f} | {g / t:.3f} | {max(b, bn) / t:.3f} |"
        out.append(line)
    for name, rs in (("grpc / baseline", ratios), ("grpc / baseline, retries off", ratios_nr)):
        out.append(f"{name}: min {min(rs):.3f}, geometric mean {statistics.geometric_mean(rs):.3f} "
                   f"over {len(rs)} sizes")
    if any(k == "baseline_cs" for _, k in by):
        cs = [statistics.median(by[(s, "grpc")]) / statistics.median(by[(s, "baseline_cs")])
              for s in size_list]
        out.append("grpc / baseline as a client-streaming call (retries off): "
                   + ", ".join(f"{human(s)} {r:.3f}" for s, r in zip(size_list, cs)))
    out += [f"note: {n}" for n in notes]
    return "\n".join(out)


def lat_table(rows: list) -> str:
    by = {}
    for r in rows:
        if "lat_kind" in r:
            by.setdefault((r["size"], r["lat_kind"]), []).append(r["p50_us"])
    if not by:
        return ""
    has_tcp = any(k == "tcp" for _, k in by)
    out = ["Unary ping-pong latency, p50 of RTT/2 (us), median over rounds:", "",
           "| size | grpc transport | baseline unary echo | grpc / baseline (time; < 1: faster) |" + (" tcp transport |" if has_tcp else ""),
           "|---:|---:|---:|---:|" + ("---:|" if has_tcp else "")]
    for s in sorted({s for s, _ in by}):
        g, b = statistics.median(by[(s, "grpc")]), statistics.median(by[(s, "baseline")])
        line = f"| {human(s)} | {g:.1f} | {b:.1f} | {g / b:.3f} |"
        if has_tcp:
            line += f" {statistics.median(by[(s, 'tcp')]):.2f} |"
        out.append(line)
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", nargs="?", default="bench", choices=["bench", "_rank"], help=argparse.SUPPRESS)
    ap.add_argument("-b", "--minbytes", default="64K")
    ap.add_argument("-e", "--maxbytes", default="64M")
    ap.add_argument("-f", "--stepfactor", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per size (median shown)")
    ap.add_argument("--bytes-per-run", default="256M", help="bytes per measurement (iters = this / size)")
    ap.add_argument("--min-iters", type=int, default=20)
    ap.add_argument("--max-iters", type=int, default=2000)
    ap.add_argument("--options", default="{}", help='grpc/tcp transport options as JSON, e.g. {"streams": 2}')
    ap.add_argument("--netns", action="store_true", help="ranks in two network namespaces (needs root)")
    ap.add_argument("--no-tcp", action="store_true", help="skip the tcp transport")
    ap.add_argument("--lat", default="", help="also compare unary ping-pong latency (p50 of RTT/2) at "
                                              "these sizes, e.g. 8,1K,64K")
    ap.add_argument("--lat-iters", type=int, default=1000)
    ap.add_argument("--client-streaming", action="store_true",
                    help="also time the baseline loop as a client-streaming call")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--limit", type=float, default=1800.0, help="wall-clock limit of the whole run (s)")
    ap.add_argument("--json", help="write the raw measurements here")
    ap.add_argument("-v", "--verbose", action="store_true")
    # internal (_rank)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--addr")
    ap.add_argument("--master")
    ap.add_argument("--port", type=int)
    a = ap.parse_args(argv)
    if a.mode == "_rank":
        return rank_main(a)

    results = {}
    started = time.time()
    if not a.netns:
        results["loopback"] = launch(a, [[], []], ["127.0.0.1", "127.0.0.1"], free_port())
    else:
        sys.path.insert(0, HERE)
        import netns_fabric
        ok, why = netns_fabric.available()
        if not ok:
            raise SystemExit(f"bench_grpc: --netns needs network namespaces: {why}")
        with netns_fabric.Fabric(2, prefix="cbgrpc", subnet="10.77.41") as fab:
            results["netns"] = launch(a, [fab.exec_prefix(0), fab.exec_prefix(1)], fab.addrs(), 29541)
    import grpc
    if a.options != "{}":
        print(f"transport options (HTTP/2 window settings also given to the baseline): {a.options}\n")
    where = {"loopback": "loopback 127.0.0.1", "netns": "two network namespaces joined by a veth bridge"}
    for key, rows in results.items():
        print(table(rows, f"{where[key]} (grpcio {grpc.__version__}, median of {a.rounds} alternating "
                          f"rounds, {time.strftime('%Y-%m-%d', time.gmtime(started))})"))
        print()
        lt = lat_table(rows)
        if lt:
            print(lt)
            print()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"command": sys.argv, "started": started, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
