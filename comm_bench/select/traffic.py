"""The collectives of one training step as frameworks issue them: DDP's buckets,
DeepSpeed's, and the timeline that prices each at the scope it runs on (linkmodel)."""
from __future__ import annotations

import math
from collections import Counter

from .linkmodel import ZERO, Est, worst

FIRST_BUCKET = 1 << 20              # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
DEEPSPEED_BUCKET_ELEMS = 5e8        # DeepSpeed reduce_bucket_size / allgather_bucket_size


def ddp_buckets(elems, nbytes, bucket_mb):
    """Bucket sizes (bytes) as DDP forms them: parameters in reverse order, a bucket closes
    once it reaches its cap (the first cap is 1 MiB)."""
    cap, out, cur = FIRST_BUCKET, [], 0
    for n in reversed(elems):
        cur += n * nbytes
        if cur >= cap:
            out.append(cur)
            cur, cap = 0, bucket_mb * (1 << 20)
    if cur:
        out.append(cur)
    return out


def chunks(total, size):
    n = max(1, math.ceil(total / size))
    return [total / n] * n


class Timeline:
    """The collectives of one step: (what, count, size, Est)."""

    def __init__(self, lm):
        self.lm, self.items = lm, []

    def add(self, what, op, sizes, placement, repeat=1, scope=None):
        """(total Est, Est of the last size) of `sizes` run `repeat` times."""
        n_intra, n_inter = placement
        if n_intra * n_inter <= 1 and op != "p2p":
            return ZERO, ZERO
        total, last, ests = 0.0, ZERO, {}
        for S, k in Counter(round(S) for S in sizes).items():
            e = ests[S] = (self.lm.op_time("p2p", S, 2, scope) if op == "p2p"
                           else self.lm.collective(op, S, n_intra, n_inter))
            total += e.seconds * k * repeat
        last = ests[round(sizes[-1])]
        src = worst(*(e.source for e in ests.values()))
        notes = list(dict.fromkeys(e.note for e in ests.values() if e.note))
        note = "; ".join(notes[:2]) + (f"; (+{len(notes) - 2} more sizes)" if len(notes) > 2 else "")
        self.items.append({"what": what, "op": op, "count": len(sizes) * repeat,
                           "bytes": sum(sizes) * repeat, "seconds": total, "source": src,
                           "n_intra": n_intra, "n_inter": n_inter, "note": note})
        return Est(total, src, ""), last
