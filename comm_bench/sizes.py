"""Message sizes as nccl-tests spells them: 8, 1K, 64M, 1G (K = 1024)."""
from __future__ import annotations

import math
import re

from .errors import UsageError

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_BYTES = 1 << 50  # beyond any host's memory; keeps byte counts in 64-bit native integers
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(I?B)?\s*$", re.IGNORECASE)


def parse_size(text: object, what: str = "size") -> int:
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError(f"{what} '{text}' is not a size: use bytes with an optional K, M or G "
                         "suffix (e.g. 8, 64K, 1M, 2G)")
    value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if value <= 0:
        raise UsageError(f"{what} must be at least 1 byte (got '{text}')")
    if value > MAX_BYTES:
        raise UsageError(f"{what} '{text}' is larger than any buffer (at most {MAX_BYTES >> 40}T)")
    return value


def format_size(nbytes: int) -> str:
    """The size in -b/-e syntax, exactly (1536 -> "1536"): for messages a user may paste back."""
    for unit in ("G", "M", "K"):
        if nbytes >= _UNITS[unit] and nbytes % _UNITS[unit] == 0:
            return f"{nbytes // _UNITS[unit]}{unit}"
    return str(nbytes)


def size_range(minbytes, maxbytes, stepfactor=2.0) -> list:
    """minbytes, minbytes x f, ... <= maxbytes (nccl-tests' -b/-e/-f)."""
    lo, hi = parse_size(minbytes, "--minbytes"), parse_size(maxbytes, "--maxbytes")
    if lo > hi:
        raise UsageError(f"--minbytes ({minbytes}) is larger than --maxbytes ({maxbytes})")
    try:
        f = float(stepfactor)
    except (TypeError, ValueError):
        raise UsageError(f"--stepfactor '{stepfactor}' is not a number") from None
    if not math.isfinite(f):
        raise UsageError(f"--stepfactor must be a finite number (got {stepfactor})")
    if f <= 1 and lo != hi:
        raise UsageError(f"--stepfactor must be greater than 1 (got {stepfactor})")
    out, size = [], lo
    while size <= hi:
        out.append(size)
        if f <= 1:
            break
        nxt = int(size * f)
        size = nxt if nxt > size else size + 1
    return out


def human_size(n: int) -> str:
    """A short label for tables and panels (1536 -> "1.5K", 8 -> "8B")."""
    for unit, f in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= f and n % (f // 1024 or 1) == 0:
            v = n / f
            return f"{v:g}{unit}" if v >= 1 else f"{n}B"
    return f"{n}B"
