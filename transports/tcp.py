"""Raw TCP sockets (C++): the baseline every other transport is compared with.

bw: the source streams `iters` messages to the destination; the last sample
includes the wait for the destination's acknowledgement of the final byte.
lat: ping-pong; the samples are round trips (the record reports half).
"""
from __future__ import annotations

from .. import ops as ops_mod
from .base import RankContext, RunResult, Transport, TransportError


class TcpTransport(Transport):
    name = "tcp"
    description = "raw TCP sockets from C++ (baseline for every other transport)"
    link_kind = "cpu"
    ops = ("sendrecv",)
    patterns = ("pair", "pairwise", "pairwise-concurrent")
    modes = ("bw", "lat")
    dtypes = ops_mod.ALL_DTYPES

    @classmethod
    def probe(cls):
        from .._native import load

        mod, why = load("_C")
        return (mod is not None), why

    def setup(self, ctx: RankContext) -> None:
        from .._native import require

        self.ctx = ctx
        C = require("_C")
        try:
            self.mesh = C.TcpMesh(ctx.rank, ctx.addr, 0, ctx.timeout, ctx.max_bytes)
            peers = ctx.store.all_gather("tcp/addr", {"host": ctx.addr, "port": self.mesh.port})
            self.mesh.connect_all([C.PeerAddr(r, p["host"], p["port"]) for r, p in enumerate(peers)])
        except C.NativeError as exc:
            raise TransportError(str(exc)) from None

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        from .._native import require

        C = require("_C")
        try:
            if mode == "lat":
                samples, wrong = self.mesh.pingpong(peer, nbytes, iters, warmup, role == "src", check)
                return RunResult(samples, wrong, round_trip=True)
            if role == "src":
                return RunResult(self.mesh.stream_send(peer, nbytes, iters, warmup, check))
            return RunResult([], self.mesh.stream_recv(peer, nbytes, iters, warmup, check))
        except C.NativeError as exc:
            raise TransportError(str(exc)) from None

    def teardown(self) -> None:
        self.mesh = None

    def describe(self) -> dict:
        return {"device": getattr(self, "ctx", None) and self.ctx.addr}
