"""Raw TCP sockets (C++): the baseline every other transport is compared with.

bw: the source streams `iters` messages to the destination; the last sample
includes the wait for the destination's acknowledgement of the final byte.
lat: ping-pong; the samples are round trips (the record reports half).

GPU buffers (--buffer cuda[:LIB]) are staged: device -> pinned host -> wire -> pinned host
-> device. The wire loop stays the C++ one, untouched; the two copies are timed in a pass
of their own (each issued and waited for) and added to each wire sample (_gpu_buffers.staged_samples),
so no Python and no CUDA call enters the C++ loop, and the record shows the wire and the
copies apart (extra.buffer). -c sends one message from the GPU to the peer's GPU and
compares it there.
"""
from __future__ import annotations

from .. import ops as ops_mod
from . import _gpu_buffers as gb
from .base import GPU_OPTION, RankContext, RunResult, Transport, TransportError


class TcpTransport(Transport):
    name = "tcp"
    description = "raw TCP sockets from C++ (baseline for every other transport)"
    link_kind = "cpu"
    ops = ("sendrecv",)
    patterns = ("pair", "pairwise", "pairwise-concurrent")
    modes = ("bw", "lat")
    dtypes = ops_mod.ALL_DTYPES
    options = gb.OPTIONS + (GPU_OPTION,)

    @classmethod
    def probe(cls):
        from ..system.native import load

        mod, why = load("_C")
        return (mod is not None), why

    @classmethod
    def check_options(cls, options: dict, max_bytes: int) -> None:
        gb.check_staged_only(options, cls.name)

    def setup(self, ctx: RankContext) -> None:
        from ..system.native import require

        self.ctx = ctx
        self.lib, self.gpu = gb.open_for(ctx, self.resolve_options(ctx.options))
        C = require("_C")
        try:
            self.mesh = C.TcpMesh(ctx.rank, ctx.addr, 0, ctx.timeout, ctx.max_bytes)
            peers = ctx.store.all_gather("tcp/addr", {"host": ctx.addr, "port": self.mesh.port})
            self.mesh.connect_all([C.PeerAddr(r, p["host"], p["port"]) for r, p in enumerate(peers)])
        except C.NativeError as exc:
            raise TransportError(str(exc)) from None

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        from ..system.native import require

        C = require("_C")
        on_gpu = self.gpu is not None
        try:
            if mode == "lat":
                samples, wrong = self.mesh.pingpong(peer, nbytes, iters, warmup, role == "src",
                                                    check and not on_gpu)
                res = RunResult(samples, wrong, round_trip=True)
            elif role == "src":
                res = RunResult(self.mesh.stream_send(peer, nbytes, iters, warmup, check and not on_gpu))
            else:
                res = RunResult([], self.mesh.stream_recv(peer, nbytes, iters, warmup, check and not on_gpu))
            if on_gpu and check:
                res.wrong += self._gpu_check(peer, nbytes, ops_mod.dtype_size(dtype), role == "src")
        except C.NativeError as exc:
            raise TransportError(str(exc)) from None
        if role == "dst":
            return res
        res.extra = {"buffer": gb.byte_transport_buffer(self.lib, self.gpu, res, nbytes, iters)}
        return res

    def _gpu_check(self, peer, nbytes, esize, sender) -> int:
        """One message from this GPU to the peer's, through both pinned host mirrors."""
        values, dt = gb.check_values(nbytes, esize)
        if sender:
            self.mesh.send_bytes(peer, gb.outbound(self.gpu, values, dt))
            return 0
        host = self.gpu.pinned(values.size, dt)
        self.mesh.recv_bytes(peer, host)
        return gb.inbound_wrong(self.gpu, host, values, dt)

    def teardown(self) -> None:
        self.mesh = None

    def describe(self) -> dict:
        info = {"device": getattr(self, "ctx", None) and self.ctx.addr}
        return dict(info, **self.gpu.info()) if getattr(self, "gpu", None) is not None else info
