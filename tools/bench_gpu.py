#!/usr/bin/env python3
"""comm-bench's GPU engines side by side with their peers, in one run, alternating.

1. Pinned host<->device copies (>= 256 MiB): comm-bench's copy engine path vs
   torch's copy (Tensor.copy_, non_blocking) vs a plain cudaMemcpyAsync loop
   (libcudart through ctypes), each timed with CUDA events around its loop.
2. Device-local copy: comm-bench CE and SM kernel vs torch's copy_.
3. NCCL all_reduce at world size 1: comm-bench's native NCCL vs
   torch.distributed.all_reduce, 8 B .. 1 GiB, in-place on one buffer each.
4. peers: the CLI's peer (one direction) and peer_bidir (both GPUs writing to each
   other at once) copies, copy engine and SM, at --peer-size.

Methods alternate within each round; each figure is the median over rounds of
the per-round figure. Run from the repository root after building:

    python tools/bench_gpu.py --out bench_gpu.json [--only peers]

The NCCL transport against nccl-tests itself: tools/nccl_tests_parity.sh.
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

MiB = 1 << 20


def cudart():
    """libcudart for the plain cudaMemcpyAsync loop (the toolkit's, else the wheel's)."""
    cands = []
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            cands += sorted(glob.glob(os.path.join(root, "lib64", "libcudart.so*")))
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    for loc in (spec.submodule_search_locations if spec else []) or []:
        cands += sorted(glob.glob(os.path.join(loc, "cuda_runtime", "lib", "libcudart.so*")))
        cands += sorted(glob.glob(os.path.join(loc, "cu13", "lib", "libcudart.so*")))
    for c in cands:
        try:
            lib = ctypes.CDLL(c)
            lib.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.c_int, ctypes.c_void_p]
            lib.cudaMemcpyAsync.restype = ctypes.c_int
            return lib, c
        except OSError:
            continue
    return None, None


def gbps(nbytes, us):
    return nbytes / us / 1e3 if us > 0 else 0.0


def bench_copies(torch, mod, dev, sizes, iters, rounds, log):
    """H2D / D2H pinned: comm-bench vs torch vs plain cudaMemcpyAsync."""
    lib, libpath = cudart()
    log(f"plain loop: {libpath or 'libcudart not found (skipped)'}")
    bench = mod.CopyBench(dev, -1)
    out = []
    cuda = torch.device("cuda", dev)
    stream = torch.cuda.Stream(cuda)
    for size in sizes:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        host.fill_(7)
        gpu = torch.empty(size, dtype=torch.uint8, device=cuda)
        for direction in ("h2d", "d2h"):
            dst, src = (gpu, host) if direction == "h2d" else (host, gpu)
            kind = 1 if direction == "h2d" else 2  # cudaMemcpyHostToDevice / DeviceToHost

            def timed(enqueue):
                with torch.cuda.stream(stream):
                    for _ in range(3):
                        enqueue()
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record(stream)
                    for _ in range(iters):
                        enqueue()
                    b.record(stream)
                    b.synchronize()
                return a.elapsed_time(b) * 1e3 / iters

            runs = {"comm-bench": [], "torch": [], "cudaMemcpyAsync": []}
            for _ in range(rounds):
                r = bench.run(direction, "ce", "pinned", size, iters, 3, False, -1, 120.0)
                runs["comm-bench"].append(r["mean_us"])
                runs["torch"].append(timed(lambda: dst.copy_(src, non_blocking=True)))
                if lib is not None:
                    sp = stream.cuda_stream
                    runs["cudaMemcpyAsync"].append(timed(
                        lambda: lib.cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), size, kind, sp)))
            row = {"test": direction, "size": size}
            for k, v in runs.items():
                if v:
                    row[k] = {"us": statistics.median(v), "gbps": gbps(size, statistics.median(v)),
                              "gbps_rounds": [round(gbps(size, x), 2) for x in v]}
            peers = [row[k]["gbps"] for k in ("torch", "cudaMemcpyAsync") if k in row]
            row["ratio_vs_best_peer"] = row["comm-bench"]["gbps"] / max(peers) if peers else None
            out.append(row)
            log(f"{direction} {size // MiB:>5} MiB  comm-bench {row['comm-bench']['gbps']:6.2f}  "
                f"torch {row['torch']['gbps']:6.2f}  "
                f"cudaMemcpyAsync {row.get('cudaMemcpyAsync', {}).get('gbps', float('nan')):6.2f} GB/s  "
                f"ratio {row['ratio_vs_best_peer']:.3f}")
        del host, gpu
    # bidirectional and pageable (comm-bench only, for the record)
    for size in sizes[-1:]:
        r = bench.run("bidir", "ce", "pinned", size, iters, 3, False, -1, 120.0)
        t = r["mean_us"]
        out.append({"test": "bidir", "size": size, "comm-bench": {"us": t, "gbps_per_direction": gbps(size, t),
                                                                   "gbps_total": 2 * gbps(size, t)}})
        log(f"bidir {size // MiB} MiB: {gbps(size, t):.2f} GB/s per direction, {2 * gbps(size, t):.2f} total")
        for direction in ("h2d", "d2h"):
            r = bench.run(direction, "ce", "pageable", size, max(iters // 2, 3), 2, False, -1, 120.0)
            t = r["mean_us"]
            out.append({"test": f"{direction}_pageable", "size": size, "comm-bench": {"us": t, "gbps": gbps(size, t)}})
            log(f"{direction} pageable {size // MiB} MiB: {gbps(size, t):.2f} GB/s")
        for direction in ("h2d", "d2h"):
            r = bench.run(direction, "sm", "pinned", size, iters, 3, False, -1, 120.0)
            t = r["mean_us"]
            out.append({"test": f"{direction}_sm", "size": size, "comm-bench": {"us": t, "gbps": gbps(size, t)}})
            log(f"{direction} SM kernel {size // MiB} MiB: {gbps(size, t):.2f} GB/s")
    bench.release_buffers()
    return out


def bench_d2d(torch, mod, dev, sizes, iters, rounds, log):
    bench = mod.CopyBench(dev, -1)
    cuda = torch.device("cuda", dev)
    out = []
    for size in sizes:
        a = torch.empty(size, dtype=torch.uint8, device=cuda)
        b = torch.empty(size, dtype=torch.uint8, device=cuda)
        runs = {"comm-bench ce": [], "comm-bench sm": [], "torch": []}
        for _ in range(rounds):
            runs["comm-bench ce"].append(bench.run("d2d", "ce", "pinned", size, iters, 3, False, -1, 120.0)["mean_us"])
            runs["comm-bench sm"].append(bench.run("d2d", "sm", "pinned", size, iters, 3, False, -1, 120.0)["mean_us"])
            for _ in range(3):
                b.copy_(a)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(iters):
                b.copy_(a)
            e1.record()
            e1.synchronize()
            runs["torch"].append(e0.elapsed_time(e1) * 1e3 / iters)
        row = {"test": "d2d", "size": size}
        for k, v in runs.items():
            row[k] = {"us": statistics.median(v), "gbps": gbps(size, statistics.median(v))}
        out.append(row)
        log(f"d2d {size // MiB:>5} MiB  comm-bench ce {row['comm-bench ce']['gbps']:7.1f}  "
            f"sm {row['comm-bench sm']['gbps']:7.1f}  torch {row['torch']['gbps']:7.1f} GB/s (bytes copied / time)")
        del a, b
    bench.release_buffers()
    return out


def bench_allreduce(torch, mod, dev, sizes, iters, rounds, log):
    import torch.distributed as dist

    from comm_bench.transports.nccl import nccl_candidates, version_string

    path, code = mod.nccl_load(nccl_candidates(os.environ.get("COMM_BENCH_NCCL_LIB")))
    log(f"comm-bench NCCL: {version_string(code)} from {path}; torch NCCL: "
        f"{'.'.join(map(str, torch.cuda.nccl.version()))}")
    cuda = torch.device("cuda", dev)
    store = dist.HashStore()
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=cuda)
    comm = mod.NcclBench(dev, 1, 0, mod.nccl_unique_id(), 120.0)
    out = []
    stream = torch.cuda.current_stream(cuda)
    for size in sizes:
        t = torch.ones(max(size // 4, 1), dtype=torch.float32, device=cuda)
        n_it = iters if size <= 64 * MiB else max(iters // 4, 10)
        runs = {"comm-bench": [], "comm-bench out-of-place": [], "torch": []}
        for _ in range(rounds):
            runs["comm-bench"].append(
                comm.run("all_reduce", size // 4, size // 4, "float32", "sum", 0, -1, n_it, 5, True, 0, False, 120.0)["mean_us"])
            runs["comm-bench out-of-place"].append(
                comm.run("all_reduce", size // 4, size // 4, "float32", "sum", 0, -1, n_it, 5, False, 0, False, 120.0)["mean_us"])
            for _ in range(5):
                dist.all_reduce(t)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(stream)
            for i in range(n_it):
                dist.all_reduce(t)
            e1.record(stream)
            e1.synchronize()
            runs["torch"].append(e0.elapsed_time(e1) * 1e3 / n_it)
        row = {"test": "all_reduce_ws1", "size": size}
        for k, v in runs.items():
            row[k] = {"us": statistics.median(v), "us_rounds": [round(x, 2) for x in v]}
        row["ratio_vs_torch"] = row["comm-bench"]["us"] / row["torch"]["us"]
        out.append(row)
        log(f"all_reduce {size:>11} B  comm-bench {row['comm-bench']['us']:9.2f} us  "
            f"(out-of-place {row['comm-bench out-of-place']['us']:9.2f})  torch {row['torch']['us']:9.2f} us  "
            f"ratio {row['ratio_vs_torch']:.3f}")
        del t
    comm.destroy()
    dist.destroy_process_group()
    return out


def cli_sweep(args, out_json):
    """Run `comm-bench sweep` and return its results document."""
    import subprocess

    cmd = [sys.executable, "-m", "comm_bench", "sweep", "--no-progress", "-o", out_json, *args]
    if os.path.exists(out_json):
        os.remove(out_json)
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with open(out_json) as f:
        doc = json.load(f)
    if proc.returncode != 0:
        print(f"WARNING: {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-300:]}", flush=True)
    return doc


def bench_peers(size, rounds, log, tmp):
    """peer vs peer_bidir through the CLI: per direction, and the total of both."""
    out = []
    for copy in ("ce", "sm"):
        runs = {"peer": [], "peer_bidir": [], "peer_bidir_total": []}
        for rnd in range(rounds):
            ops = ["peer", "peer_bidir"] if rnd % 2 == 0 else ["peer_bidir", "peer"]
            for op in ops:
                doc = cli_sweep(["-t", "cuda", "--nprocs", "2", "--pattern", "pair", "--op", op, "--copy", copy,
                                 "-b", str(size), "-e", str(size), "-n", "20", "-w", "5", "-c", "1"],
                                os.path.join(tmp, "peers.json"))
                rec = doc["results"][0]
                assert rec["wrong"] == 0, rec
                runs[op].append(rec["algbw"])
                if op == "peer_bidir":
                    runs["peer_bidir_total"].append(rec["extra"]["total_gbps"])
        row = {"test": "peers", "copy": copy, "size": size,
               **{k: {"gbps": statistics.median(v), "rounds": v} for k, v in runs.items()}}
        row["bidir_per_direction_vs_peer"] = row["peer_bidir"]["gbps"] / row["peer"]["gbps"]
        out.append(row)
        log(f"{copy} {size // MiB} MiB: peer {row['peer']['gbps']:.1f} GB/s; peer_bidir "
            f"{row['peer_bidir']['gbps']:.1f} per direction ({row['bidir_per_direction_vs_peer']:.3f}x), "
            f"{row['peer_bidir_total']['gbps']:.1f} total")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_gpu.json")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", default="copies,d2d,allreduce")
    ap.add_argument("--peer-size", type=int, default=512 * MiB)
    args = ap.parse_args()
    import torch

    from comm_bench.system import nvml_counters as nvml
    from comm_bench.system.native import require

    mod = require("_cuda")
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    info = dict(mod.device_info(args.gpu))
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": info,
           "nvml": nvml.device(bus_id=info.get("pci_bus_id")), "nvml_system": nvml.system(),
           "torch": torch.__version__, "command": sys.argv, "results": {}}
    log(f"GPU {args.gpu}: {info['name']} {info['pci_bus_id']} NUMA {info['numa_node']}; torch {torch.__version__}")
    only = args.only.split(",")
    if "copies" in only:
        doc["results"]["copies"] = bench_copies(torch, mod, args.gpu, [256 * MiB, 1024 * MiB], args.iters,
                                                args.rounds, log)
    if "d2d" in only:
        doc["results"]["d2d"] = bench_d2d(torch, mod, args.gpu, [256 * MiB, 1024 * MiB, 4096 * MiB],
                                          args.iters, args.rounds, log)
    if "allreduce" in only:
        sizes = [8 << (2 * i) for i in range(15)]  # 8 B, 32 B, ..., 2 GiB
        sizes = [s for s in sizes if s <= 1 << 30] + [1 << 30]
        doc["results"]["all_reduce"] = bench_allreduce(torch, mod, args.gpu, sorted(set(sizes)), args.iters * 2,
                                                       args.rounds, log)
    import tempfile

    tmp = tempfile.mkdtemp(prefix="bench_gpu.")
    if "peers" in only:
        doc["results"]["peers"] = bench_peers(args.peer_size, args.rounds, log, tmp)
    doc["log"] = lines
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
