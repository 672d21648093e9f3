"""One round of pairs on the simulated fabric: per-iteration times on a simulated clock,
turned into records by the sweep's own record builder (metrics.make_record)."""
from __future__ import annotations

import math

from ..metrics import make_record

ROUND_OVERHEAD_S = 0.02     # a round's barrier and gather to rank 0 (a stated guess, not measured)


def cross_share(fabric, pairs) -> tuple[dict, dict]:
    """leaf -> the share of the host rate its uplink pool gives each cross-leaf flow this round."""
    out_n: dict = {}
    in_n: dict = {}
    for a, b in pairs:
        la, lb = fabric.leaf_of(a), fabric.leaf_of(b)
        if la != lb:
            out_n[la] = out_n.get(la, 0) + 1
            in_n[lb] = in_n.get(lb, 0) + 1
    return {leaf: min(1.0, fabric.uplinks / c) for leaf, c in out_n.items()}, \
        {leaf: min(1.0, fabric.uplinks / c) for leaf, c in in_n.items()}


def iteration_times(fabric, rng, a, b, size, n_iter, t0, share):
    """Per-iteration microseconds of a -> b from simulated time t0 (warmup included)."""
    base = fabric.pair_rate(a, b, share, t0)
    meas = math.exp(rng.normal(0.0, fabric.noise))
    jitter = rng.lognormal(0.0, fabric.noise / 2, n_iter)
    if fabric.flapping(a, b) is None:
        return (fabric.latency_us + size / (base * meas * 1e3)) * jitter
    out, t = [], t0
    for j in range(n_iter):          # the rate changes with the clock: one step per iteration
        us = (fabric.latency_us + size / (fabric.pair_rate(a, b, share, t) * meas * 1e3)) * jitter[j]
        out.append(us)
        t += us * 1e-6
    return out


def run_round(fabric, rng, pairs, size, iters, warmup, t0, meta):
    """(records, seconds the round took). meta: transport, op, pattern, dtype, elem, round, tag."""
    up, down = cross_share(fabric, pairs)
    recs, longest = [], 0.0
    for a, b in pairs:
        share = min(up.get(fabric.leaf_of(a), 1.0), down.get(fabric.leaf_of(b), 1.0))
        times = list(iteration_times(fabric, rng, a, b, size, warmup + iters, t0, share))
        longest = max(longest, sum(times) * 1e-6)
        rec = make_record(transport=meta["transport"], op=meta["op"], mode="bw", pattern=meta["pattern"],
                          size=size, dtype=meta["dtype"], iters=iters, warmup=warmup, n=2,
                          samples_us=times[warmup:], wrong=0, extra={"simulated": True},
                          elem=meta["elem"])
        rec.update(src=a, dst=b, src_host=fabric.host(a), dst_host=fabric.host(b),
                   src_device="mlx5_0", dst_device="mlx5_0", round=meta["round"])
        rec.update(meta.get("tag") or {})
        recs.append(rec)
    return recs, longest + ROUND_OVERHEAD_S
