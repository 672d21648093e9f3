"""torch.distributed over NCCL on GPU tensors: what a PyTorch training job sees.

Same ops and byte counts as the nccl transport, so the two side by side show
the framework's overhead. The loop is Python by necessity (it measures
torch's API). time_us is taken as the nccl transport takes it (nccl-tests'
BenchTime): a barrier of the ranks, a host clock around `iters` calls and the
stream synchronize, / iters; the ranks' times combined as -a says. extra.gpu_time_us:
two events around a batch of the same calls; the samples: an event after each call.
"""
from __future__ import annotations

import time
from datetime import timedelta

from .. import ops as ops_mod
from .base import (AVERAGE_OPTION, GPU_OPTION, NCCL_TESTS_TIMING, TEST_CORRUPT_CHECK, RankContext, RunResult,
                   Transport, TransportError)

IN_PLACE = ("all_reduce", "broadcast", "reduce")  # torch's API is in-place for these


class TorchNcclTransport(Transport):
    buffers = "gpu"  # for the memory check before a sweep starts
    name = "torch-nccl"
    description = "torch.distributed with the NCCL backend (GPU tensors), one rank per GPU"
    link_kind = "gpu"
    ops = ops_mod.COLLECTIVES  # every op of comm_bench.ops
    torch_store = True   # torch.distributed is handed the rendezvous store
    patterns = ("collective", "pair", "pairwise", "pairwise-concurrent")
    pair_ops = ("sendrecv",)  # pair patterns time a sendrecv between the two ranks
    modes = ("bw",)
    dtypes = ops_mod.ALL_DTYPES
    options = (GPU_OPTION, AVERAGE_OPTION)

    @classmethod
    def default_ranks(cls) -> int:
        from .cuda import one_rank_per_gpu

        return one_rank_per_gpu()

    @classmethod
    def probe(cls):
        try:
            import torch
            import torch.distributed as dist
        except ImportError:
            return False, "torch is not installed: `pip install torch` (a CUDA build)"
        except Exception as exc:  # noqa: BLE001 - probe never raises
            return False, f"torch does not import: {str(exc).splitlines()[0]}"
        try:
            if not torch.cuda.is_available():
                return False, "torch sees no CUDA GPU (a CPU build of torch, or no GPU/driver here)"
            if not dist.is_available() or not dist.is_nccl_available():
                return False, "this torch build has no NCCL backend"
        except Exception as exc:  # noqa: BLE001
            return False, str(exc).splitlines()[0]
        return True, ""

    def setup(self, ctx: RankContext) -> None:
        import torch
        import torch.distributed as dist

        self.ctx, self.torch, self.dist = ctx, torch, dist
        from .cuda import pick_gpu

        self.dev = pick_gpu(ctx, ctx.options.get("gpu"), torch.cuda.device_count())
        torch.cuda.set_device(self.dev)
        self.device = torch.device("cuda", self.dev)
        try:
            dist.init_process_group("nccl", store=dist.PrefixStore("torch-nccl", ctx.store.raw),
                                    rank=ctx.rank, world_size=ctx.world_size,
                                    timeout=timedelta(seconds=ctx.timeout), device_id=self.device)
        except Exception as exc:  # noqa: BLE001
            raise TransportError(f"rank {ctx.rank}: torch.distributed NCCL init failed: "
                                 f"{str(exc).splitlines()[0]}") from None
        self._bufs: dict = {}
        self.average = 1 if ctx.options.get("average") is None else int(ctx.options["average"])
        self._bar = torch.zeros(1, device=self.device)

    def run(self, op, nbytes, iters, warmup, *, dtype="float32", check=False, mode="bw",
            peer=None, role=None) -> RunResult:
        torch, d = self.torch, self.dist
        rank, n = self.ctx.rank, self.ctx.world_size
        tdt = getattr(torch, dtype)
        in_count, out_count = ops_mod.get(op).counts(nbytes, n, ops_mod.dtype_size(dtype))
        inp = torch.empty(in_count, dtype=tdt, device=self.device)
        out = torch.empty(out_count, dtype=tdt, device=self.device)
        nxt, prev = (rank + 1) % n, (rank - 1) % n
        root = self.ctx.root
        gathered, scattered = ((list(out.chunk(n)), list(inp.chunk(n))) if rank == root else (None, None))
        if peer is not None:  # pair patterns run sendrecv only (pair_ops)
            step = (lambda: d.send(inp, peer)) if role == "src" else (lambda: d.recv(out, peer))
        else:
            steps = {
                "all_reduce": lambda: d.all_reduce(inp),
                "all_gather": lambda: d.all_gather_into_tensor(out, inp),
                "reduce_scatter": lambda: d.reduce_scatter_tensor(out, inp),
                "alltoall": lambda: d.all_to_all_single(out, inp),
                "broadcast": lambda: d.broadcast(inp, root),
                "reduce": lambda: d.reduce(inp, root),
                "gather": lambda: d.gather(inp, gathered, dst=root),
                "scatter": lambda: d.scatter(out, scattered, src=root),
                "sendrecv": lambda: [w.wait() for w in d.batch_isend_irecv(
                    [d.P2POp(d.isend, inp, nxt), d.P2POp(d.irecv, out, prev)])],
            }
            step = steps[op]

        def fill():
            inp.copy_(ops_mod.get(op).fill(rank, n, in_count, xp=torch, device=self.device).to(tdt))
            out.fill_(-1 if not tdt.is_floating_point else float("nan"))

        try:
            fill()
            stream = torch.cuda.current_stream(self.device)
            for _ in range(warmup):
                step()
            # pass 1, time_us (nccl-tests' BenchTime): one op waited for, a barrier of the
            # ranks, then a host clock around `iters` calls and the stream synchronize
            step()
            self._sync(stream, op)
            self._barrier(stream, step if peer is not None else None)
            t0 = time.perf_counter()
            for _ in range(iters):
                step()
            self._sync(stream, op)
            mean_us = (time.perf_counter() - t0) * 1e6 / iters
            # pass 1b, the GPU time of a batch of the same calls: two events around it
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._barrier(stream, step if peer is not None else None)
            start.record(stream)
            for _ in range(iters):
                step()
            end.record(stream)
            self._wait(end, op)
            gpu_us = start.elapsed_time(end) * 1e3 / iters
            # pass 2, the spread: an event after each launch
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
            self._barrier(stream, step if peer is not None else None)
            ev[0].record(stream)
            for i in range(iters):
                step()
                ev[i + 1].record(stream)
            self._wait(ev[-1], op)
            samples = [ev[i].elapsed_time(ev[i + 1]) * 1e3 for i in range(iters)]
            wrong = 0
            if check:
                fill()
                step()
                got = inp if (peer is None and op in IN_PLACE) else out
                want = None if role == "src" else ops_mod.get(op).expected(
                    rank, n, in_count, peer=peer if role == "dst" else None, xp=torch, root=self.ctx.root,
                    device=self.device)
                done = torch.cuda.Event()
                done.record(stream)
                self._wait(done, op + " data check")
                if want is not None:
                    flat = got.reshape(-1)[: want.numel()]
                    if TEST_CORRUPT_CHECK and flat.numel():
                        flat[flat.numel() // 2] += 1
                    wrong = int((flat != want.to(tdt)).sum().item())
        except TransportError:
            raise
        except RuntimeError as exc:
            raise TransportError(f"rank {rank}: torch-nccl {op} of {nbytes} B failed: "
                                 f"{str(exc).splitlines()[0]}") from None
        extra = {"gpu": self.dev, "average": self.average, "timing": NCCL_TESTS_TIMING, "gpu_time_us": gpu_us,
                 "launch_overhead_us": mean_us - gpu_us}
        if role == "dst":
            return RunResult([], wrong, extra)
        return RunResult(samples, wrong, extra, mean_us=mean_us)

    def _sync(self, stream, what):
        """nccl-tests' testStreamSynchronize: poll the stream (no sleep: the clock is running)."""
        deadline = time.monotonic() + self.ctx.timeout
        while not stream.query():
            if time.monotonic() > deadline:
                raise TransportError(f"rank {self.ctx.rank}: torch-nccl {what} did not finish within "
                                     f"{self.ctx.timeout:.0f} s")

    def _barrier(self, stream, pair_step=None):
        """The ranks' barrier before a clock starts: a one-element all-reduce, waited for;
        a pair pattern's two ranks (the others idle) use one step of their own instead."""
        if self.ctx.world_size > 1:
            (pair_step or (lambda: self.dist.all_reduce(self._bar)))()
            self._sync(stream, "barrier")

    def _wait(self, event, what):
        """Poll with a deadline rather than block forever on a dead peer."""
        deadline = time.monotonic() + self.ctx.timeout
        while not event.query():
            if time.monotonic() > deadline:
                raise TransportError(f"rank {self.ctx.rank}: torch-nccl {what} did not finish within "
                                     f"{self.ctx.timeout:.0f} s")
            time.sleep(0.0002)

    def teardown(self) -> None:
        d = getattr(self, "dist", None)
        if d is not None and d.is_initialized():
            d.destroy_process_group()

    def describe(self) -> dict:
        import os

        torch = getattr(self, "torch", None)
        out: dict = {"device": f"cuda:{getattr(self, 'dev', '?')}"}
        if torch is not None:
            out.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                       nccl=".".join(map(str, torch.cuda.nccl.version())),
                       gpu=torch.cuda.get_device_name(self.dev))
        out["nccl_env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}
        return out
