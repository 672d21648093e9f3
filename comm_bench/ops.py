"""Ops: byte counts, bus factors and the data each rank should end up with.

Each op supplies only what differs between ops (nccl-tests' pattern): how the
size column S relates to per-rank buffers, its bus factor, and the data check.
Formulas live here, never in a transport.

    algbw = S / t;  busbw = algbw x bus_factor(n)        (docs/internal-contracts.md)
    S = bytes per rank: all_reduce, broadcast, reduce, sendrecv (and p2p ops)
    S = bytes x n:      all_gather, reduce_scatter, alltoall, gather, scatter
                        (nccl-tests prints max(send, receive bytes): the root's whole buffer)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .errors import UsageError

if TYPE_CHECKING:
    import numpy


def _numpy():
    """numpy, imported on first use: the launcher and the readers never need it, and it is a
    tenth of a second of a command's start (docs/benchmarks/startup.md)."""
    import numpy
    return numpy

DTYPES = {  # name -> (numpy dtype or None, bytes per element)
    "float32": ("float32", 4), "float64": ("float64", 8), "float16": ("float16", 2),
    "bfloat16": (None, 2), "int32": ("int32", 4), "int64": ("int64", 8),
    "int8": ("int8", 1), "uint8": ("uint8", 1),
}
# nccl-tests' -d spellings (src/common.cu test_typenames) of the same types
DTYPE_ALIASES = {"float": "float32", "half": "float16", "double": "float64"}
ALL_DTYPES = tuple(DTYPES)
NUMPY_DTYPES = tuple(name for name, (np_name, _) in DTYPES.items() if np_name)
ROOT = 0  # root rank of broadcast and reduce (--root)
REDOPS = ("sum", "prod", "max", "min", "avg")   # nccl-tests' -o names (--redop)


def canonical_dtype(name: str) -> str:
    """A -d value in this tool's spelling: nccl-tests' float/half/double are accepted."""
    return DTYPE_ALIASES.get(name, name)


def reduce_values(redop: str, arrays):
    """The element-wise reduction of int64 arrays, as `redop` combines ranks' data (avg:
    the sum over the count, a float)."""
    import functools
    np = _numpy()
    fn = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "avg": np.add}[redop]
    out = functools.reduce(fn, arrays)
    return out / len(arrays) if redop == "avg" else out


def dtype_size(dtype: str) -> int:
    dtype = canonical_dtype(dtype)
    if dtype not in DTYPES:
        raise UsageError(f"unknown --dtype '{dtype}'; choose one of: {', '.join(DTYPES)}")
    return DTYPES[dtype][1]


@dataclass(frozen=True)
class Op:
    name: str
    bus_factor: Callable[[int], float]
    scales_with_n: bool = False    # S = bytes x n
    reduces: bool = False          # has a reduction operator (sum)
    rooted: bool = False           # broadcast / reduce: root rank ROOT
    collective: bool = True        # False: point-to-point op measured between two ranks

    def round_size(self, size: int, n: int, elem: int) -> int:
        """The largest valid S <= size (at least one element per rank)."""
        unit = elem * (n if self.scales_with_n else 1)
        return max(unit, size // unit * unit)

    def plan_sizes(self, sizes, n: int, elem: int) -> list:
        """[(S, [requested sizes that round to S])], one entry per distinct S, in order:
        with 4 ranks an 8 B and a 16 B all_gather are both 16 B, measured once."""
        plan: dict[int, list] = {}
        for size in sizes:
            plan.setdefault(self.round_size(size, n, elem), []).append(size)
        return list(plan.items())

    def counts(self, size: int, n: int, elem: int) -> tuple:
        """(input elements, output elements) of one rank's buffers for size S."""
        total = size // elem
        if self.name in ("all_gather", "gather"):
            return total // n, total
        if self.name in ("reduce_scatter", "scatter"):
            return total, total // n
        return total, total

    # -- data check (values are small integers, so sums are exact in every dtype) ----
    @staticmethod
    def value(rank, index):
        return ((rank % 4) + 1) * ((index % 5) + 1)

    # Both take the array library as `xp` (numpy, or torch with device=... so a GPU
    # transport builds the same values on its GPU): one definition for every transport.
    def fill(self, rank: int, n: int, in_count: int, xp=None, **where):
        """One rank's input, as int64 (cast by the transport to its dtype)."""
        xp = xp or _numpy()
        return self.value(rank, xp.arange(in_count, dtype=xp.int64, **where))

    def expected(self, rank: int, n: int, in_count: int, peer=None, xp=None, redop="sum", root=ROOT, **where):
        """What this rank's output must hold (int64), or None where the op leaves none;
        `peer`: a pair pattern's sender (sendrecv), instead of the ring's previous rank;
        redop / root: --redop and --root (numpy only for a redop other than sum)."""
        xp = xp or _numpy()
        def arange(a, b=None):
            return xp.arange(a, b, dtype=xp.int64, **where) if b is not None else \
                xp.arange(a, dtype=xp.int64, **where)
        idx = arange(in_count)
        if redop == "sum":
            all_sum = lambda i: sum(self.value(r, i) for r in range(n))  # noqa: E731 - one of two reducers, picked by redop
        else:
            all_sum = lambda i: reduce_values(redop, [self.value(r, i) for r in range(n)])  # noqa: E731 - one of two reducers, picked by redop
        if self.name == "all_reduce":
            return all_sum(idx)
        if self.name == "reduce":
            return all_sum(idx) if rank == root else None
        if self.name == "broadcast":
            return self.value(root, idx)
        if self.name == "all_gather":
            return xp.concatenate([self.value(r, idx) for r in range(n)])
        if self.name == "gather":
            return xp.concatenate([self.value(r, idx) for r in range(n)]) if rank == root else None
        if self.name == "scatter":
            return self.value(root, arange(rank * (in_count // n), (rank + 1) * (in_count // n)))
        if self.name == "reduce_scatter":
            return all_sum(arange(rank * (in_count // n), (rank + 1) * (in_count // n)))
        if self.name == "alltoall":
            chunk = in_count // n
            return xp.concatenate([self.value(src, arange(rank * chunk, (rank + 1) * chunk))
                                   for src in range(n)])
        if self.name == "sendrecv":  # ring: receive what the previous rank sent
            return self.value((rank - 1) % n if peer is None else peer, idx)
        return None


def _ring(n):
    return 2 * (n - 1) / n if n > 1 else 0.0


def _share(n):
    return (n - 1) / n if n > 1 else 0.0


def _one(n):
    return 1.0


OPS = {op.name: op for op in (
    Op("all_reduce", _ring, reduces=True),
    Op("all_gather", _share, scales_with_n=True),
    Op("reduce_scatter", _share, scales_with_n=True, reduces=True),
    Op("alltoall", _share, scales_with_n=True),
    Op("broadcast", _one, rooted=True),
    Op("reduce", _one, reduces=True, rooted=True),
    Op("sendrecv", _one),
    # nccl-tests' gather.cu / scatter.cu: S = count x n (the root's buffer), busbw factor (n-1)/n
    Op("gather", _share, scales_with_n=True, rooted=True),
    Op("scatter", _share, scales_with_n=True, rooted=True),
)}
COLLECTIVES = tuple(OPS)  # every collective transport runs these

# Each rank works on its own device, all ranks at once (the collective pattern):
# copies between host and GPU, or within one GPU. S = bytes copied, factor 1.
LOCAL_OPS = {name: Op(name, _one) for name in ("h2d", "d2h", "bidir", "d2d")}


def get(name: str) -> Op:
    """The op; point-to-point ops of a transport (write, read, send, ...) count S bytes, factor 1."""
    return OPS.get(name) or LOCAL_OPS.get(name) or Op(name, _one, collective=False)


def to_numpy(values: numpy.ndarray, dtype: str) -> numpy.ndarray:
    np_dtype = DTYPES[dtype][0]
    if np_dtype is None:
        raise UsageError(f"--dtype {dtype} is not available for this transport")
    return values.astype(np_dtype)


def count_wrong(got: numpy.ndarray, want) -> int:
    """Elements of `got` that differ from the int64 expectation (cast like the data was)."""
    if want is None:
        return 0
    want = want.astype(got.dtype)
    return int(_numpy().count_nonzero(got.reshape(-1)[: want.size] != want))
