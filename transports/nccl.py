"""NCCL, called directly from C++ (csrc/cuda/nccl_bench.cu); libnccl is loaded at run time.

One rank per GPU. Every collective (all_reduce, all_gather, reduce_scatter,
broadcast, reduce, alltoall, gather, scatter) and sendrecv (a ring in the collective
pattern; src -> dst in the pair patterns), in-place or out-of-place (--in-place), with
optional CUDA-graph capture (--cudagraph N, nccl-tests' -G) and buffer registration
(-R, nccl-tests' -R). time_us is nccl-tests' figure, taken its way (src/common.cu,
BenchTime): after a barrier of the ranks, a host clock spans `iters` launches and the
stream synchronize (with -G N: N launches of a graph of `iters`), / the ops; the ranks'
times combined as nccl-tests' -a (default 1: their mean). Buffers are allocated once for
the largest size and iteration i works at offset i x bytes (modulo the buffer), as
nccl-tests' startColl does, so sizes that fit in L2 are not timed from L2. extra.gpu_time_us is the GPU
time of a batch of the same launches (two events), so extra.launch_overhead_us = host -
GPU; latency_us comes from a third pass with an event after each launch.

libnccl: --nccl-lib PATH, else the nvidia-nccl wheel (nvidia/nccl/lib), else
torch's lib folder, else the system's libnccl.so.2.
"""
from __future__ import annotations

import os

from .. import ops as ops_mod
from ..errors import TransportUnavailable
from .base import (AVERAGE_OPTION, GPU_OPTION, NCCL_TESTS_TIMING, Option, RankContext, RunResult, Transport,
                   TransportError)


def nccl_candidates(explicit: str | None = None) -> list:
    """Where to look for libnccl, in order (paths first, then the system's loader)."""
    import importlib.util
    import sys

    out = []
    if explicit:
        return [explicit]
    env = os.environ.get("COMM_BENCH_NCCL_LIB")
    if env:
        out.append(env)
    try:
        spec = importlib.util.find_spec("nvidia")
        roots = list(spec.submodule_search_locations or []) if spec else []
    except (ImportError, ValueError):
        roots = []
    for p in sys.path:  # a namespace package may be spread over several folders
        if p and os.path.isdir(os.path.join(p, "nvidia")):
            roots.append(os.path.join(p, "nvidia"))
    for root in dict.fromkeys(roots):
        for name in ("libnccl.so.2", "libnccl.so"):
            f = os.path.join(root, "nccl", "lib", name)
            if os.path.exists(f):
                out.append(f)
    try:
        spec = importlib.util.find_spec("torch")
        if spec and spec.origin:
            lib = os.path.join(os.path.dirname(spec.origin), "lib")
            for f in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
                if f.startswith("libnccl") and ".so" in f:
                    out.append(os.path.join(lib, f))
    except (ImportError, ValueError):
        pass
    out += ["libnccl.so.2", "libnccl.so"]
    return list(dict.fromkeys(out))


def version_string(code: int) -> str:
    if code >= 10000:  # 2.9 and later: major*10000 + minor*100 + patch
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def load_nccl(explicit: str | None = None) -> tuple:
    """(module, path, version) of the loaded libnccl; TransportUnavailable if none loads."""
    from .cuda import load_native

    mod, why = load_native()
    if mod is None:
        raise TransportUnavailable(f"comm_bench._cuda is not available: {why}")
    try:
        path, code = mod.nccl_load(nccl_candidates(explicit))
    except mod.NativeError as exc:
        raise TransportUnavailable(str(exc)) from None
    return mod, path, code


def nccl_env() -> dict:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}


class NcclTransport(Transport):
    buffers = "gpu"  # for the memory check before a sweep starts
    name = "nccl"
    description = "NCCL called from C++ (libnccl loaded at run time), one rank per GPU"
    link_kind = "gpu"
    ops = ops_mod.COLLECTIVES  # every op of comm_bench.ops
    patterns = ("collective", "pair", "pairwise", "pairwise-concurrent")
    pair_ops = ("sendrecv",)  # pair patterns time a sendrecv between the two ranks
    modes = ("bw",)
    dtypes = ops_mod.ALL_DTYPES
    redops = ops_mod.REDOPS  # the native side maps them to ncclSum..ncclAvg and checks them
    options = (
        Option("--nccl-lib", str, None, "libnccl to load (default: the nvidia-nccl wheel, torch's, "
                                        "then the system's libnccl.so.2)"),
        Option("--cudagraph", int, 0, "nccl-tests' -G: capture the timed iterations in a CUDA graph "
                                      "and launch it N times (0: off)", aliases=("-G",), low=0, high=100000),
        Option("--in-place", bool, False, "in-place ops (output buffer = input buffer)"),
        AVERAGE_OPTION,
        Option("--register", int, 0, "nccl-tests' -R: register the buffers with NCCL, 1 ncclCommRegister, "
                                     "2 symmetric windows (NCCL 2.27+); 0 off", aliases=("-R",), low=0, high=2),
        GPU_OPTION,
    )

    @classmethod
    def default_ranks(cls) -> int:
        from .cuda import one_rank_per_gpu

        return one_rank_per_gpu()

    @classmethod
    def probe(cls):
        from .cuda import probe_gpu

        ok, why = probe_gpu()
        if not ok:
            return ok, why
        try:
            load_nccl(os.environ.get("COMM_BENCH_NCCL_LIB"))
        except TransportUnavailable as exc:
            return False, str(exc).replace("\n", " ")
        except Exception as exc:  # noqa: BLE001 - probe never raises
            return False, str(exc).splitlines()[0]
        return True, ""

    def setup(self, ctx: RankContext) -> None:
        from .cuda import gpu_description, pick_gpu

        self.ctx = ctx
        o = ctx.options
        self.mod, self.lib_path, self.lib_version = load_nccl(o.get("nccl_lib"))
        mod = self.mod
        count, why = mod.device_count()
        if count == 0:
            raise TransportUnavailable(f"rank {ctx.rank}: no CUDA GPU on {ctx.host} ({why})")
        self.dev = pick_gpu(ctx, o.get("gpu"), count)
        self.graph = int(o.get("cudagraph") or 0)
        self.in_place = bool(o.get("in_place"))
        self.average = 1 if o.get("average") is None else int(o["average"])
        self.register = int(o.get("register") or 0)
        self.info = gpu_description(mod, self.dev)
        uid = mod.nccl_unique_id().hex() if ctx.rank == 0 else None
        if ctx.world_size > 1:
            uid = ctx.store.broadcast(0, "nccl/unique-id", uid)
        assert uid is not None  # rank 0 made it; the others got it from the store
        try:
            self.comm = mod.NcclBench(self.dev, ctx.world_size, ctx.rank, bytes.fromhex(uid),
                                      float(ctx.timeout), self.register)
            if ctx.max_bytes:  # buffers for the largest size, once (nccl-tests allocates so)
                self.comm.reserve(int(ctx.max_bytes))
        except mod.NativeError as exc:
            raise TransportError(f"rank {ctx.rank} (GPU {self.dev} on {ctx.host}): {exc}") from None
        self._pair_seq: dict = {}

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        from ..system import nvml_counters as nvml

        ctx = self.ctx
        native_op, native_peer = op, -1
        if peer is not None:  # pair patterns (sendrecv only: pair_ops): src sends to dst
            native_op, native_peer = ("send" if role == "src" else "recv"), peer
        in_count, out_count = ops_mod.get(native_op).counts(int(nbytes), ctx.world_size, ops_mod.dtype_size(dtype))
        try:
            with nvml.Sampler([self.info.get("pci_bus_id")]) as sampled:
                out = self.comm.run(native_op, in_count, out_count, dtype, ctx.redop, ctx.root, native_peer, int(iters),
                                    int(warmup), self.in_place, self.graph, bool(check), float(ctx.timeout))
        except self.mod.NativeError as exc:
            raise TransportError(f"rank {ctx.rank} (GPU {self.dev}): nccl {op} of {nbytes} B failed: "
                                 f"{exc}") from None
        wrong = int(out["wrong"])
        if peer is not None and check:  # the receiver counts; the sender's record carries it
            src, dst = (ctx.rank, peer) if role == "src" else (peer, ctx.rank)
            seq = self._pair_seq.get((src, dst), 0)
            self._pair_seq[(src, dst)] = seq + 1
            key = f"nccl/wrong/{src}-{dst}/{seq}"
            if role == "dst":
                ctx.store.set(key, str(wrong))
                wrong = 0
            else:
                try:
                    wrong = int(ctx.store.get(key))
                except Exception as exc:  # noqa: BLE001 - the store names the missing rank
                    raise TransportError(f"rank {ctx.rank}: no data check result from rank {peer}: "
                                         f"{exc}") from None
        extra = {"gpu": self.dev, "in_place": self.in_place and op not in ("alltoall", "sendrecv"),
                 "nccl_api": out["api"], "alloc": out["alloc"], "register": self.register,
                 "average": self.average, "timing": NCCL_TESTS_TIMING,
                 "gpu_time_us": out["gpu_us"], "launch_overhead_us": out["mean_us"] - out["gpu_us"]}
        if self.graph:
            extra["cudagraph"] = self.graph  # time_us from the graph; latency_us from eager launches
        if sampled.result:
            extra["nvml_counters"] = sampled.result
        if role == "dst":
            return RunResult([], wrong, extra)
        return RunResult(list(out["samples_us"]), wrong, extra, mean_us=out["mean_us"])

    def teardown(self) -> None:
        comm = getattr(self, "comm", None)
        if comm is not None:
            self.comm = None
            try:
                comm.destroy()
            except Exception:  # noqa: BLE001 - nothing useful to do at teardown
                pass

    def describe(self) -> dict:
        from ..system import nvml_counters as nvml

        return {"device": f"cuda:{getattr(self, 'dev', '?')}", "gpu": getattr(self, "info", {}),
                "nccl": {"version": version_string(getattr(self, "lib_version", 0) or 0),
                         # nccl-tests' communicator config (2.28+), see nccl_bench.cu
                         "config": {"nvlinkCentricSched": 1} if (getattr(self, "lib_version", 0) or 0) >= 22800
                         else {},
                         "version_code": getattr(self, "lib_version", 0), "path": getattr(self, "lib_path", None)},
                "nccl_env": nccl_env(), "nvml": nvml.system()}
