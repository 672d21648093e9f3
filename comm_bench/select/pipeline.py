"""Pipeline stage splits: how many transformer layers each pipeline rank holds
(docs/selection.md, section 4, "Stage splits").

Megatron-Core splits L layers over pp ranks evenly, or with the embedding and the loss counted
as a layer each (--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split:
(L + 2) / pp per stage, one fewer on the first and last), or with any first and last stage sizes
and equal middle stages (--decoder-first-pipeline-num-layers F --decoder-last-pipeline-num-layers
G: (L - F - G) / (pp - 2) each), or by an explicit layout (--pipeline-model-parallel-layout);
with v virtual stages every stage's layers divide by v (each chunk L_r / v), but for the
embedding / loss accounting (the first chunk one fewer). torchtitan splits at module boundaries
(pipeline_parallel_split_points).

select searches the first and last stage sizes (equal middles) and keeps the split whose slowest
stage is fastest, and within 1% of that, whose fullest rank needs the least memory. A stage's
time is t_layer x (its layers + o on the last), o the output layer's compute in layers (compute
is linear in the layers: compute.py); a rank's memory is its layers' model states (s per layer),
its embedding or output layer (e_first, e_last, the logits on the last), and its layers'
activations with its micro-batches in flight (a per layer; memory.in_flight_layers).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..errors import UsageError

TIME_TOLERANCE = 0.01       # splits within 1% of the fastest slowest stage: the least memory wins


@dataclass(frozen=True)
class Split:
    stages: tuple               # transformer layers of each pipeline rank, first to last
    how: str                    # even | embedding-loss | first-last | given

    @property
    def first(self):
        return self.stages[0]

    @property
    def last(self):
        return self.stages[-1]

    @property
    def middle(self):
        return self.stages[1] if len(self.stages) > 2 else max(self.stages)

    def chunks(self, r, v):
        """Layers of rank r's v virtual chunks: L_r / v each; with the embedding / loss
        accounting the first rank's first chunk and the last rank's last chunk hold one fewer."""
        n = self.stages[r]
        if v <= 1:
            return [float(n)]
        if self.how == "embedding-loss" and len(self.stages) > 1:
            y = self.stages[0] + 1            # (L + 2) / pp: the embedding and the loss count as a layer
            out = [float(y // v)] * v
            if r == 0:
                out[0] -= 1
            if r == len(self.stages) - 1:
                out[-1] -= 1
            return out
        return [n / v] * v


def even(L, pp):
    return Split((L // pp,) * pp if pp > 1 else (L,), "even")


@functools.lru_cache(maxsize=1024)
def options(L, pp, v=1):
    """Every split select considers for L layers over pp ranks with v chunks each: even (L %
    pp v == 0), the embedding / loss accounting ((L + 2) % pp v == 0), and first / last sizes
    with equal middles (multiples of v, at least v each) with no stage over ceil(L / pp) + 2 v
    + 2 layers (beyond that the stage is slower than the even split's by more than the output
    layer's few layers of compute)."""
    if pp <= 1:
        return (Split((L,), "even"),)
    out = []
    if L % (pp * v) == 0:
        out.append(even(L, pp))
    if (L + 2) % (pp * v) == 0 and (L + 2) // pp >= 2 and L % (pp * v):
        y = (L + 2) // pp
        out.append(Split((y - 1,) + (y,) * (pp - 2) + (y - 1,), "embedding-loss"))
    cap = math.ceil(L / pp) + 2 * v + 2
    if pp == 2:
        mids = [0]
    else:                                     # 2 v <= L - (pp - 2) y <= 2 cap
        lo = max(v, math.ceil((L - 2 * cap) / (pp - 2)))
        mids = [y for y in range(lo - lo % v if lo % v else lo, min(cap, (L - 2 * v) // (pp - 2)) + 1, v) if y >= v]
    for y in mids:
        rest = L - (pp - 2) * y
        for f in range(v, min(cap, rest - v) + 1, v):
            g = rest - f
            if g < v or g > cap or g % v:
                continue
            s = Split((f,) + (y,) * (pp - 2) + (g,), "first-last")
            if len(set(s.stages)) == 1 or s in out:
                continue
            out.append(s)
    return tuple(out)


def _ranks(split):
    """The ranks whose memory can be the largest: the first, each whose layers exceed every
    earlier rank's (fewer micro-batches in flight further down the pipeline), and the last."""
    out, top = [0], split.stages[0]
    for r, n in enumerate(split.stages[1:], 1):
        if n > top:
            out.append(r)
            top = n
    if len(split.stages) - 1 not in out:
        out.append(len(split.stages) - 1)
    return out


def in_flight_chunks(pp, v, m, r):
    """Chunk passes rank r holds at its peak under Megatron-Core's 1F1B (uniform chunks):
    min(pp - r, m) without interleaving, else its warm-up ((pp - r - 1) x 2 + (v - 1) x pp)
    plus one, at most m x v (memory.in_flight_layers replays the schedule itself)."""
    if v <= 1:
        return min(pp - r, max(1, m))
    return min(max(1, m) * v, (pp - r - 1) * 2 + (v - 1) * pp + 1)


def stage_time(split, o):
    """The slowest stage in layer times: its layers, + o on the last (the output layer)."""
    pp = len(split.stages)
    return max(n + (o if r == pp - 1 else 0.0) for r, n in enumerate(split.stages))


def stage_memory(split, v, m, s, a, e_first, e_last):
    """The fullest rank's bytes (proxy): s per layer, a per layer held, the end stages' extras."""
    pp = len(split.stages)
    return max(s * split.stages[r] + a * in_flight_chunks(pp, v, m, r) * split.stages[r] / v
               + (e_first if r == 0 else 0.0) + (e_last if r == pp - 1 else 0.0) for r in _ranks(split))


@functools.lru_cache(maxsize=8192)
def best(L, pp, v, m, o, s, a, e_first, e_last):
    """The split select uses: the fastest slowest stage, then (within TIME_TOLERANCE of it) the
    least memory on the fullest rank, then the simplest flags (even, embedding-loss, first-last).
    None when no split has whole chunks."""
    opts = options(L, pp, v)
    if not opts:
        return None
    times = [stage_time(x, o) for x in opts]
    fastest = min(times)
    near = [(stage_memory(x, v, m, s, a, e_first, e_last), k, x) for k, (x, t) in enumerate(zip(opts, times))
            if t <= fastest * (1 + TIME_TOLERANCE)]
    return min(near, key=lambda z: (z[0], z[1]))[2]


def parse(text):
    """--pp-layout: 'F,G' (first and last stage layers, equal middles) or one count per pipeline
    rank ('3,4,4,...,2'); 'F,G' with two ranks is the same split."""
    try:
        counts = tuple(int(p) for p in str(text).replace(" ", "").split(","))
    except ValueError:
        counts = ()
    if len(counts) < 2 or any(c < 1 for c in counts):
        raise UsageError(f"--pp-layout {text!r}: give FIRST,LAST stage layers or one layer count per pipeline "
                         "stage, e.g. 3,2 or 3,4,4,2 (each at least 1)")
    return counts


def given(counts, L, pp, v=1):
    """The split --pp-layout states for pp ranks, or None where it does not apply (other pp,
    layers that do not add up, chunks not whole)."""
    if pp <= 1:
        return None
    if len(counts) == pp:
        stages = counts
    elif len(counts) == 2 and pp > 2 and (L - sum(counts)) % (pp - 2) == 0 and L - sum(counts) >= pp - 2:
        y = (L - sum(counts)) // (pp - 2)
        stages = (counts[0],) + (y,) * (pp - 2) + (counts[1],)
    else:
        return None
    if sum(stages) != L:
        return None
    emb = [x for x in options(L, pp, v) if x.how == "embedding-loss"]
    if emb and emb[0].stages == tuple(stages):   # the accounting's split: its chunks, its flags
        return emb[0]
    if any(n % v for n in stages):
        return None
    return Split(tuple(stages), "even" if len(set(stages)) == 1 else "given")


def check_given(counts, L):
    """UsageError unless the layout can apply to some pipeline of L layers."""
    if len(counts) > 2 and sum(counts) != L:
        raise UsageError(f"--pp-layout: the stages hold {sum(counts)} layers, the model has {L}")
    if len(counts) == 2 and sum(counts) > L:
        raise UsageError(f"--pp-layout: first and last stage hold {sum(counts)} layers, the model has {L}")


def megatron_flags(split, v):
    """Megatron-LM flags that reproduce a split ('' for an even one)."""
    st = split.stages
    if split.how == "even" or len(st) <= 1:
        return ""
    if split.how == "embedding-loss":
        return "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
    mids = set(st[1:-1])
    if len(mids) <= 1:
        return (f"--decoder-first-pipeline-num-layers {st[0]} --decoder-last-pipeline-num-layers {st[-1]}"
                + (f" (the other stages {st[1]} each)" if len(st) > 2 else ""))
    return f"--pipeline-model-parallel-layout \"{layout_string(split, v)}\""


def layout_string(split, v):
    """Megatron-Core's --pipeline-model-parallel-layout: virtual stages in order (chunk k of
    every rank, then chunk k + 1), '|' between them, E the embedding, t a layer, L the loss."""
    pp = len(split.stages)
    parts = []
    for k in range(v):
        for r in range(pp):
            n = int(split.chunks(r, v)[k])
            body = "t" * n if n <= 2 else f"t*{n}"
            parts.append(("E" if (k, r) == (0, 0) else "") + body + ("L" if (k, r) == (v - 1, pp - 1) else ""))
    return "|".join(parts)


def split_points(split, v):
    """torchtitan's pipeline_parallel_split_points: the first layer of every stage but the first
    (pp x v stages in schedule order)."""
    pp = len(split.stages)
    sizes = [split.chunks(r, v)[k] for k in range(v) for r in range(pp)]
    out, at = [], 0
    for n in sizes[:-1]:
        at += int(n)
        out.append(f"layers.{at}")
    return out


def describe(split):
    """'3 + 4 x 14 + 2' (first + middles + last), or the list."""
    st = split.stages
    if len(st) <= 2:
        return " + ".join(map(str, st))
    if len(set(st[1:-1])) == 1:
        return f"{st[0]} + {st[1]} x {len(st) - 2} + {st[-1]}"
    return ", ".join(map(str, st))
