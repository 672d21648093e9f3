"""Gloo through torch.distributed: every collective and the pair patterns, on CPU
tensors or on GPU buffers (--buffer cuda[:cupy|:numba|:torch], _gpu_buffers.py).

Measures what a training job sees through torch.distributed (see _framework.py for
why its loop is Python). Gloo runs all_reduce and broadcast on CUDA tensors itself
(GLOO_CUDA_OPS, torch.distributed's backend table); the other ops, and every op with
--gpu-path staged, go through pinned host memory. CuPy and Numba arrays reach torch
without a copy (__cuda_array_interface__).
"""
from __future__ import annotations

import os
from datetime import timedelta

from .. import ops as ops_mod
from . import _framework as fw
from . import _gpu_buffers as gb
from ..errors import TransportUnavailable
from .base import GPU_OPTION, RankContext, RunResult, Transport, TransportError

GLOO_CUDA_OPS = ("all_reduce", "broadcast")   # what torch's Gloo backend runs on CUDA tensors
GPU_LIBRARIES = ("torch", "cupy", "numba")     # `--buffer cuda` takes torch first: Gloo's own


class GlooTransport(Transport):
    name = "gloo"
    description = "torch.distributed with the Gloo backend (CPU tensors)"
    link_kind = "cpu"
    ops = ops_mod.COLLECTIVES  # every op of comm_bench.ops
    torch_store = True   # torch.distributed is handed the rendezvous store
    redops = ("sum", "prod", "max", "min")   # torch's Gloo has no AVG
    patterns = ("collective", "pair", "pairwise", "pairwise-concurrent")
    pair_ops = ("sendrecv",)  # pair patterns time a sendrecv between the two ranks
    modes = ("bw", "lat")
    dtypes = tuple(d for d in ops_mod.ALL_DTYPES if d != "float16")  # as since the first version
    options = gb.OPTIONS + (GPU_OPTION,)

    @classmethod
    def check_options(cls, options: dict, max_bytes: int) -> None:
        gb.check_options(options, prefer=GPU_LIBRARIES)

    @classmethod
    def probe(cls):
        try:
            import torch.distributed as dist
        except ImportError:
            return False, "torch is not installed: `pip install torch`"
        if not dist.is_available() or not dist.is_gloo_available():
            return False, "this torch build has no Gloo backend"
        return True, ""

    def setup(self, ctx: RankContext) -> None:
        import torch.distributed as dist

        from ..system.netutil import iface_for_addr

        self.ctx = ctx
        iface = iface_for_addr(ctx.addr)
        if iface and "GLOO_SOCKET_IFNAME" not in os.environ:
            os.environ["GLOO_SOCKET_IFNAME"] = iface  # the interface peers reach us on
        try:
            dist.init_process_group("gloo", store=dist.PrefixStore("gloo", ctx.store.raw),
                                    rank=ctx.rank, world_size=ctx.world_size,
                                    timeout=timedelta(seconds=ctx.timeout))
        except Exception as exc:  # noqa: BLE001
            raise TransportError(f"rank {ctx.rank}: Gloo could not connect: {str(exc).splitlines()[0]}") from None
        self.dist = dist
        o = self.resolve_options(ctx.options)
        self.lib, self.gpu = gb.open_for(ctx, o, prefer=GPU_LIBRARIES)
        self.path = o["gpu_path"]

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        import torch

        torch_dtype = getattr(torch, dtype)
        values, out_count, want = fw.check_plan(op, self.ctx.rank, self.ctx.world_size, nbytes,
                                                ops_mod.dtype_size(dtype), role, self.ctx.redop, self.ctx.root)
        if self.gpu is not None:
            return self._run_gpu(op, nbytes, iters, warmup, dtype, check, mode, peer, role,
                                 values, out_count, want)
        inp = torch.from_numpy(values).to(torch_dtype)
        out = torch.zeros(out_count, dtype=torch_dtype)
        result = inp if (peer is None and op in fw.IN_PLACE) else out
        steps = (self._collective_step(op, inp, out), None) if peer is None else \
            self._pair_step(inp, out, peer, role, mode)
        res = self._measure(op, nbytes, steps, iters, warmup, check=check, want=want, role=role, mode=mode,
                            reset=lambda: (inp.copy_(torch.from_numpy(values).to(torch_dtype)), out.zero_()),
                            output=lambda: result.to(torch.float64).numpy())
        if role != "dst":
            res.extra = {"buffer": gb.describe(None, "host")}
        return res

    def _measure(self, op, nbytes, steps, iters, warmup, **how):
        try:
            return fw.measure(steps, iters, warmup, **how)
        except RuntimeError as exc:
            raise TransportError(f"rank {self.ctx.rank}: gloo {op} of {nbytes} B failed: "
                                 f"{str(exc).splitlines()[0]}") from None

    def _run_gpu(self, op, nbytes, iters, warmup, dtype, check, mode, peer, role, values, out_count, want):
        """Device buffers (the chosen library's, seen by torch without a copy): Gloo's own CUDA
        path where it has one (and --gpu-path is not staged), else staged through pinned host
        tensors, the copies timed in a pass of their own (extra.buffer)."""
        import torch

        if ops_mod.DTYPES[dtype][0] is None:
            raise TransportUnavailable(f"--dtype {dtype} has no numpy type: GPU buffers take "
                                       f"{', '.join(ops_mod.NUMPY_DTYPES)}")
        direct = peer is None and op in GLOO_CUDA_OPS and self.path != "staged"
        if self.path == "direct" and not direct:
            raise TransportUnavailable(f"--gpu-path direct: Gloo runs only {', '.join(GLOO_CUDA_OPS)} "
                                       f"(collective pattern) on CUDA tensors, not {op}; use --gpu-path "
                                       "staged or auto")
        g = self.gpu
        torch.cuda.set_device(g.dev)    # Gloo's CUDA ops and the tensors below: this rank's GPU
        inp, out = g.from_host(values.astype(dtype)), g.empty(out_count, dtype)
        t_in, t_out = (torch.as_tensor(a, device=f"cuda:{g.dev}") for a in (inp, out))
        in_place = peer is None and op in fw.IN_PLACE
        result = inp if in_place else out
        down = up = ()
        if direct:
            steps = (self._collective_step(op, t_in, t_out), None)
        else:
            hin, hout = g.pinned(values.size, dtype), g.pinned(out_count, dtype)
            h_in, h_out = torch.from_numpy(hin), torch.from_numpy(hout)
            down, up = [(hin, inp)], [(inp, hin) if in_place else (out, hout)]
            if peer is None:
                steps = (gb.staged_step(g, self._collective_step(op, h_in, h_out), down, up), None)
            else:
                steps, down, up = gb.staged_pair_steps(
                    g, self.dist.send, self.dist.recv, inp, out, {id(inp): (hin, h_in), id(out): (hout, h_out)},
                    torch.zeros(1, dtype=h_in.dtype), peer, role, mode, down, up)
        measure = lambda steps, **how: self._measure(  # noqa: E731
            op, nbytes, steps, iters, warmup, check=check, want=want, role=role, mode=mode, **how)
        return gb.measure_on_gpu(g, measure, steps, inp=inp, out=out, result=result, values=values,
                                 dtype=dtype, out_count=out_count, down=down, up=up, iters=iters,
                                 buffer=gb.describe(self.lib, "direct" if direct else "staged"))

    def _collective_step(self, op, inp, out):
        d, rank, n, root = self.dist, self.ctx.rank, self.ctx.world_size, self.ctx.root
        red = getattr(d.ReduceOp, {"prod": "PRODUCT"}.get(self.ctx.redop, self.ctx.redop.upper()))
        nxt, prev = fw.ring_peers(rank, n)
        # newer torch renamed these; use whichever this torch has
        all_gather = getattr(d, "all_gather_single", None) or d.all_gather_into_tensor
        reduce_scatter = getattr(d, "reduce_scatter_single", None) or d.reduce_scatter_tensor
        # the root's buffer as n views: what it receives from / sends to each rank
        pieces = lambda t: list(t.chunk(n)) if rank == root else None  # noqa: E731
        gathered, scattered = pieces(out), pieces(inp)
        steps = {
            "all_reduce": lambda: d.all_reduce(inp, op=red),
            "all_gather": lambda: all_gather(out, inp),
            "reduce_scatter": lambda: reduce_scatter(out, inp, op=red),
            "alltoall": lambda: d.all_to_all_single(out, inp),
            "broadcast": lambda: d.broadcast(inp, root),
            "reduce": lambda: d.reduce(inp, root, op=red),
            "gather": lambda: d.gather(inp, gathered, dst=root),
            "scatter": lambda: d.scatter(out, scattered, src=root),
            "sendrecv": lambda: [w.wait() for w in (d.isend(inp, nxt), d.irecv(out, prev))],
        }
        return steps[op]

    def _pair_step(self, inp, out, peer, role, mode):
        d = self.dist
        return fw.pair_steps(d.send, d.recv, inp, out, inp.new_zeros(1), peer, role, mode)

    def teardown(self) -> None:
        if getattr(self, "dist", None) and self.dist.is_initialized():
            self.dist.destroy_process_group()

    def describe(self) -> dict:
        import torch

        info = {"device": "cpu", "torch": torch.__version__, "gloo_iface": os.environ.get("GLOO_SOCKET_IFNAME")}
        return dict(info, **self.gpu.info()) if getattr(self, "gpu", None) is not None else info
