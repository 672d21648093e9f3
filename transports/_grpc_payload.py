"""Payloads of the gRPC transport: the -c data pattern and counting wrong elements.

Untimed helpers (numpy): payloads are built before timing, checks run in a
separate untimed round.
"""
from __future__ import annotations

import struct

from .base import TEST_CORRUPT_CHECK

ACK = struct.Struct("<qq")          # (messages received, wrong elements)


def pattern(nbytes: int, seed: int) -> bytes:
    """Deterministic payload for the data check (numpy, untimed)."""
    import numpy as np
    n32 = (nbytes + 3) // 4
    a = np.arange(n32, dtype=np.uint32)
    a *= np.uint32(2654435761)
    a ^= np.uint32((seed * 0x9E3779B1 + 0x7F4A7C15) & 0xFFFFFFFF)
    return a.tobytes()[:nbytes]


def message_seed(src: int, dst: int, idx: int, direction: int) -> int:
    return ((src * 1_000_003 + dst) * 7_919 + idx) * 2 + direction


def count_wrong(got: bytes, expected: bytes, esize: int) -> int:
    """Wrong elements of `got` against `expected` (0 when equal)."""
    if TEST_CORRUPT_CHECK and got:
        got = bytes([got[0] ^ 0x5A]) + bytes(got[1:])
    if got == expected:
        return 0
    n_elem = max(1, len(expected) // esize)
    if len(got) != len(expected):
        return n_elem
    import numpy as np
    diff = np.frombuffer(got, np.uint8) != np.frombuffer(expected, np.uint8)
    if esize > 1 and len(expected) % esize == 0:
        return int(diff.reshape(-1, esize).any(axis=1).sum())
    return int(diff.sum())
