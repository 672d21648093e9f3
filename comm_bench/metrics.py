"""From per-iteration times to a results record (definitions: docs/internal-contracts.md)."""
from __future__ import annotations

from . import ops as ops_mod
from .system.native import require


def stats(samples_us: list) -> dict:
    st = require("_C").stats([float(x) for x in samples_us])
    return {k: st[k] for k in ("min", "max", "avg", "stdev", "median", "p99", "p999")}


def slowest_per_iteration(per_rank_samples: list) -> list:
    """A collective finishes when its slowest rank does: elementwise max over ranks."""
    per_rank_samples = [s for s in per_rank_samples if s]
    if not per_rank_samples:
        return []
    return [max(vals) for vals in zip(*per_rank_samples)]


# What the two time figures of a record are, where a GPU transport measured them apart.
BATCH_TIMING = {"time_us": "pass 1: events around all iterations / iters",
                "latency_us": "pass 2: an event after each iteration"}


def one_way(round_trips_us: list) -> list:
    """A ping-pong's one-way latency: half of each round trip (perftest's and OSU's
    definition; the README's contract for every transport's --mode lat)."""
    return [x / 2 for x in round_trips_us]


def make_record(*, transport: str, op: str, mode: str, pattern: str, size: int, dtype: str,
                iters: int, warmup: int, n: int, samples_us: list, wrong: int | None, extra: dict,
                elem: int, round_trip: bool = False, mean_us: float | None = None,
                reverse_mean_us: float | None = None, both_directions: bool = False,
                peak_gbps: float | None = None, redop: str = "sum", root: int = ops_mod.ROOT) -> dict:
    """`round_trip`: the samples are whole round trips (RunResult.round_trip);
    mean_us: the batch-timed time per iteration (else the samples' mean);
    reverse_mean_us: a concurrent bidirectional pair's other direction (same size);
    both_directions: S bytes went each way in time_us (RunResult.both_directions);
    peak_gbps: a native sampler's best window (else the fastest sample's rate)."""
    o = ops_mod.get(op)
    if round_trip:
        samples_us = one_way(samples_us)
    lat = stats(samples_us)
    time_us = lat["avg"] if mean_us is None else float(mean_us)
    extra = dict(extra or {})
    if mean_us is not None:
        extra.setdefault("timing", BATCH_TIMING)
    if both_directions:
        reverse_mean_us = time_us
    if reverse_mean_us:  # per direction in algbw, both directions added up here
        forward = size / time_us / 1e3 if time_us > 0 else 0.0
        reverse = size / float(reverse_mean_us) / 1e3
        extra["per_direction_gbps"] = {"src->dst": forward, "dst->src": reverse}
        extra["total_gbps"] = forward + reverse
    algbw = size / time_us / 1e3 if time_us > 0 else 0.0       # GB/s, 1 GB = 1e9 B
    if peak_gbps is None:
        peak_gbps = size / lat["min"] / 1e3 if lat["min"] > 0 else 0.0
    rec = {
        "transport": transport, "op": op, "mode": mode, "pattern": pattern,
        "size": size, "count": size // elem, "dtype": dtype,
        "redop": redop if o.reduces else None, "root": root if o.rooted else None,
        "iters": iters, "warmup": warmup, "time_us": time_us,
        "algbw": algbw, "busbw": algbw * o.bus_factor(n),
        "bw_peak": peak_gbps,
        "msg_rate_mpps": 1.0 / time_us if time_us > 0 else 0.0,
        "latency_us": lat, "wrong": None if wrong is None else int(wrong),  # None: not checked
    }
    rec["extra"] = extra
    return rec
