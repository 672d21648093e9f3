"""What the framework transports (gloo, mpi) share: the timing loop and the data check.

torch.distributed has only a Python API, so gloo's loop is Python by necessity: one
call and one clock read per iteration, as a plain torch.distributed ping-pong
(tools/plain_pingpong.py). MPI's pair loops run in C++ (_mpi_native.py, `timed`); its
collectives and GPU-staged steps still go through mpi4py here. The native transports
(tcp, rdma, cuda, nccl) time their loops in C++.
"""
from __future__ import annotations

import time

from .. import ops as ops_mod
from .base import TEST_CORRUPT_CHECK, RunResult


def time_loop(step, iters: int, warmup: int, finish=None) -> list:
    """Per-iteration times (us) of `step()`, after `warmup` untimed calls.

    `finish()` (e.g. waiting for a receiver's acknowledgement) runs after the
    last iteration and counts in its time, as in the native stream loops.
    """
    for _ in range(warmup):
        step()
    if finish:
        finish()
    clock = time.perf_counter_ns
    stamps = [0] * (iters + 1)
    stamps[0] = clock()
    for i in range(iters):
        step()
        stamps[i + 1] = clock()
    if finish:
        finish()
        stamps[-1] = clock()
    return [(b - a) / 1e3 for a, b in zip(stamps, stamps[1:])]


IN_PLACE = ("all_reduce", "broadcast", "reduce")  # result lands in the input buffer


def check_plan(op: str, rank: int, n: int, nbytes: int, elem: int, role=None, redop="sum", root=ops_mod.ROOT):
    """(input values, output elements, expected output or None), values as int64,
    for one checked iteration. Pair patterns: the source's data must reach the
    destination (and come back, in a ping-pong)."""
    o = ops_mod.get(op)
    if role is not None:
        count = nbytes // elem
        values = ops_mod.get("sendrecv").fill(0, 2, count)
        return values, count, values
    in_count, out_count = o.counts(nbytes, n, elem)
    return o.fill(rank, n, in_count), out_count, o.expected(rank, n, in_count, redop=redop, root=root)


def ring_peers(rank: int, n: int):
    return (rank + 1) % n, (rank - 1) % n


def measure(steps, iters: int, warmup: int, *, check: bool, reset, output, want, role, mode,
            compare=None, timed=None):
    """Time `steps` = (step, finish) (or, where the library's calls can run in a native loop,
    `timed(iters, warmup)` -> samples, the same steps in C++) and, with check, run one more
    iteration on fresh data
    (`reset()`), comparing `output()` (a numpy array) with `want`, or, for GPU buffers,
    `compare(want)` (the count of wrong elements, compared on the GPU). A pair's ping-pong
    samples are whole round trips (the record halves them)."""
    step, finish = steps
    samples = timed(iters, warmup) if timed else time_loop(step, iters, warmup, finish)
    wrong = 0
    if check:
        reset()
        step()
        if finish:
            finish()
        if role == "src" and mode == "bw":
            want = None  # the destination checks what arrived
        if compare is not None:
            wrong = compare(want) if want is not None else 0
        else:
            got = output()
            if TEST_CORRUPT_CHECK and want is not None and got.size:
                got.reshape(-1)[got.size // 2] += 1
            wrong = ops_mod.count_wrong(got, want)
    return RunResult(samples if role != "dst" else [], wrong,
                     round_trip=mode == "lat" and role is not None)


def pair_steps(send, recv, inp, out, ack, peer: int, role: str, mode: str):
    """(step, finish) for one rank of a pair, given the framework's blocking send(buf, peer)
    and recv(buf, peer): a stream whose last sample waits for the receiver's `ack`, or a
    ping-pong (the destination echoes what it received)."""
    if mode == "lat":
        if role == "src":
            return (lambda: (send(inp, peer), recv(out, peer))), None
        return (lambda: (recv(out, peer), send(out, peer))), None
    if role == "src":
        return (lambda: send(inp, peer)), (lambda: recv(ack, peer))
    return (lambda: recv(out, peer)), (lambda: send(ack, peer))
