"""The rendezvous store's wire format, shared by its client (light_store.py) and its
server (store_server.py).

Frames: a 4-byte length, then the op (one byte) and its fields, each a 4-byte length and
bytes. Replies: a status byte (0 ok, 1 timed out, 2 refused, 3 a quiet SET refused) and
fields. A connection's first frame answers the server's greeting (a random challenge) with
`proof`.

Every request is answered, in order, except SET_QUIET: it is answered only when refused,
with SET_REFUSED (the key, the reason), so a client reads at most such frames ahead of the
reply it waits for (docs/internal-contracts.md, "The rendezvous store's wire").
"""
from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import Any

MAX_MESSAGE = 16 << 20        # rendezvous.Store sends values in parts of 4 MB
MAX_HELLO = 256               # what a connection may send before it has authenticated
SET, GET, ADD, CHECK, DELETE, WAIT, MULTI_GET, MULTI_SET, AUTH, SET_QUIET = range(10)
OK, TIMED_OUT, REFUSED, SET_REFUSED = range(4)
ABSENT, LATER = -1, -2        # multi_get's lengths: the key is absent; the reply had no room
_LEN = struct.Struct("!I")


def frame(head: int, fields: Iterable[bytes]) -> bytes:
    parts, size = [b"", bytes([head])], 1
    for f in fields:
        parts += (_LEN.pack(len(f)), f)
        size += 4 + len(f)
    parts[0] = _LEN.pack(size)
    return b"".join(parts)


def fields_of(body: bytes | bytearray, views: bool = False) -> list[Any]:
    """The fields of a frame's body (after its head byte); struct.error if it is cut short.
    views: memoryviews into body instead of copies (a 4 MB gather is copied once, not twice)."""
    fields: list[Any] = []
    at = 1
    whole = memoryview(body) if views else body
    while at < len(body):
        (n,) = _LEN.unpack_from(body, at)
        if at + 4 + n > len(body):
            raise struct.error("a field runs past its frame")
        fields.append(whole[at + 4:at + 4 + n] if views else bytes(body[at + 4:at + 4 + n]))
        at += 4 + n
    return fields


# Lists travel as two or three fields, so that neither side loops over thousands of fields in
# Python: keys joined by NUL (no key holds one), and values as their lengths (int32, little
# endian; ABSENT or LATER in place of a length) and their bytes end to end.
def join_keys(keys: Sequence[str | bytes]) -> bytes:
    try:
        joined = "\0".join(keys).encode()  # type: ignore[arg-type]  # all str, the usual case: no loop in Python
    except TypeError:
        joined = b"\0".join(k.encode() if isinstance(k, str) else k for k in keys)
    if joined.count(b"\0") != max(0, len(keys) - 1):
        raise ValueError("a store key holds a NUL byte")
    return joined


def split_keys(joined: bytes) -> list[bytes]:
    return joined.split(b"\0") if joined else []


def pack_values(lengths: Sequence[int], values: Iterable[bytes]) -> tuple[bytes, bytes]:
    return struct.pack(f"<{len(lengths)}i", *lengths), b"".join(values)


def values_frame(head: int, lengths: Sequence[int], values: Sequence[bytes]) -> bytes:
    """frame(head, pack_values(lengths, values)), with the values copied once."""
    packed = struct.pack(f"<{len(lengths)}i", *lengths)
    blob = sum(map(len, values))
    return b"".join([_LEN.pack(9 + len(packed) + blob), bytes([head]), _LEN.pack(len(packed)), packed,
                     _LEN.pack(blob), *values])


def unpack_values(lengths: bytes, blob: bytes | memoryview) -> list[Any]:
    """Each value (bytes), or ABSENT / LATER where the key had none or did not fit."""
    sizes = struct.unpack(f"<{len(lengths) // 4}i", lengths)
    if sizes and min(sizes) >= 0:               # every value there: slice without a loop in Python
        ends = list(accumulate(sizes))
        if ends[-1] != len(blob):
            raise struct.error("values and their lengths disagree")
        blob = bytes(blob)
        return list(map(blob.__getitem__, map(slice, [0, *ends[:-1]], ends)))
    out: list[bytes | int] = []
    at = 0
    for n in sizes:
        if n < 0:
            out.append(n)
        else:
            out.append(bytes(blob[at:at + n]))
            at += n
    if at != len(blob):
        raise struct.error("values and their lengths disagree")
    return out


def proof(secret: bytes, challenge: bytes) -> bytes:
    """What a client answers the server's challenge with."""
    return hmac.new(secret, b"comm-bench store\0" + challenge, hashlib.sha256).digest()
