"""Gloo through torch.distributed on the CPU: every collective and the pair patterns.

Measures what a CPU training job sees through torch.distributed (see
_framework.py for why its loop is Python).
"""
from __future__ import annotations

import os
from datetime import timedelta

from .. import ops as ops_mod
from . import _framework as fw
from .base import RankContext, RunResult, Transport, TransportError



class GlooTransport(Transport):
    name = "gloo"
    description = "torch.distributed with the Gloo backend (CPU tensors)"
    link_kind = "cpu"
    ops = ops_mod.COLLECTIVES  # every op of comm_bench.ops
    patterns = ("collective", "pair", "pairwise", "pairwise-concurrent")
    pair_ops = ("sendrecv",)  # pair patterns time a sendrecv between the two ranks
    modes = ("bw", "lat")
    dtypes = tuple(d for d in ops_mod.ALL_DTYPES if d != "float16")  # as since the first version

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

        from ..netutil import iface_for_addr

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

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        import torch

        torch_dtype = getattr(torch, dtype)
        values, out_count, want = fw.check_plan(op, self.ctx.rank, self.ctx.world_size, nbytes,
                                                ops_mod.dtype_size(dtype), role)
        inp = torch.from_numpy(values).to(torch_dtype)
        out = torch.zeros(out_count, dtype=torch_dtype)
        result = inp if (peer is None and op in fw.IN_PLACE) else out
        steps = (self._collective_step(op, inp, out), None) if peer is None else \
            self._pair_step(inp, out, peer, role, mode)
        try:
            return fw.measure(
                steps, iters, warmup, check=check, want=want, role=role, mode=mode,
                reset=lambda: (inp.copy_(torch.from_numpy(values).to(torch_dtype)), out.zero_()),
                output=lambda: result.to(torch.float64).numpy())
        except RuntimeError as exc:
            raise TransportError(f"rank {self.ctx.rank}: gloo {op} of {nbytes} B failed: "
                                 f"{str(exc).splitlines()[0]}") from None

    def _collective_step(self, op, inp, out):
        d, rank, n = self.dist, self.ctx.rank, self.ctx.world_size
        nxt, prev = fw.ring_peers(rank, n)
        # newer torch renamed these; use whichever this torch has
        all_gather = getattr(d, "all_gather_single", None) or d.all_gather_into_tensor
        reduce_scatter = getattr(d, "reduce_scatter_single", None) or d.reduce_scatter_tensor
        steps = {
            "all_reduce": lambda: d.all_reduce(inp),
            "all_gather": lambda: all_gather(out, inp),
            "reduce_scatter": lambda: reduce_scatter(out, inp),
            "alltoall": lambda: d.all_to_all_single(out, inp),
            "broadcast": lambda: d.broadcast(inp, 0),
            "reduce": lambda: d.reduce(inp, 0),
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

        return {"device": "cpu", "torch": torch.__version__,
                "gloo_iface": os.environ.get("GLOO_SOCKET_IFNAME")}
