"""How the ranks of one run meet at start-up, and the nonce that ties values to the run.

At scale ranks start over a minute or more (a thousand Python processes on few cores, a
slow shared file system), so the first meeting does not end at a fixed deadline: it
waits while ranks are still arriving and fails only when no rank has arrived for
--timeout seconds, naming those missing.

Every value sealed after the meeting carries the run nonce in its MAC (rendezvous.Store),
so a value sealed in an earlier run or attempt with the same secret is rejected. Each
rank draws a challenge; rank 0 draws the nonce once every rank is there and answers each
challenge with the nonce and an HMAC over both: a rank takes a nonce only from rank 0 of
this run (a replayed answer does not match its fresh challenge).
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import TYPE_CHECKING, Any

from ..errors import RunFailed
from .rendezvous import rank_list

if TYPE_CHECKING:
    from datetime import timedelta

    from .rendezvous import Store

HELLO, ANSWER, ARRIVALS = "cb/hello/{}", "cb/nonce/{}", "cb/arrivals"
NONCE_BYTES = 16
_CHUNK_S = 2.0        # how often a waiting rank looks whether others are still arriving


def _mac(secret: bytes, challenge: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret, b"comm-bench run nonce\0" + challenge + nonce, hashlib.sha256).digest()


def join(store: Store, started: float) -> dict[str, Any] | None:
    """Meet every rank, agree the run nonce (set on `store`). Rank 0 returns how the meeting
    went: {"seconds", "last_rank"}; the other ranks None. started: rank 0's time.monotonic()
    when it began hosting the store."""
    order = store.raw_call("count its arrival", store.raw.add, ARRIVALS, 1)
    if store.rank == 0:
        return _host(store, started, order)
    challenge = secrets.token_bytes(16)
    store.raw_call("post its challenge", store.raw.set, HELLO.format(store.rank), f"{challenge.hex()}:{order}")
    _wait_arriving(store, [ANSWER.format(store.rank)], "the run's nonce from rank 0")
    answer = store.raw_call("read the run's nonce", store.raw.get, ANSWER.format(store.rank))
    nonce, mac = answer[:NONCE_BYTES], answer[NONCE_BYTES:]
    if not hmac.compare_digest(mac, _mac(store.secret, challenge, nonce)):
        raise RunFailed(f"rank {store.rank}: the run nonce in the rendezvous store at {store.host}:"
                        f"{store.port} fails authentication: a process without this run's secret "
                        "is writing to the store (see docs/reliability.md)")
    store.nonce = nonce
    return None


def _host(store: Store, started: float, own_order: int) -> dict[str, Any]:
    others = range(1, store.world_size)
    keys = [HELLO.format(r) for r in others]
    _wait_arriving(store, keys, "the rendezvous")
    hellos = store.raw_call("read the ranks' challenges", store.values_raw, keys)
    nonce = secrets.token_bytes(NONCE_BYTES)
    answers, orders = [], {0: own_order}
    for r, hello in zip(others, hellos):
        try:
            text = hello.decode()
            challenge, orders[r] = bytes.fromhex(text.split(":")[0]), int(text.split(":")[1])
        except (AttributeError, ValueError, IndexError):
            raise RunFailed(f"rank 0: rank {r}'s challenge in the rendezvous store is malformed: a "
                            "process other than comm-bench is writing to the store") from None
        answers.append(nonce + _mac(store.secret, challenge, nonce))
    store.raw_call("answer the ranks' challenges", store.multi_set_raw,
                   [ANSWER.format(r) for r in others], answers)
    store.nonce = nonce
    return {"seconds": round(time.monotonic() - started, 3), "last_rank": max(orders, key=lambda r: orders[r])}


def _wait_arriving(store: Store, keys: list[str], what: str) -> None:
    """Wait for `keys` while ranks keep arriving; fail after --timeout without a new arrival."""
    count, since = -1, time.monotonic()
    while True:
        try:
            store.raw.wait(keys, _timedelta(_CHUNK_S))
            return
        except Exception:  # noqa: BLE001 - a timeout (any store's type) or a lost store
            pass
        now = time.monotonic()
        arrived = store.raw_call("count the ranks that arrived", store.raw.add, ARRIVALS, 0)
        if arrived != count:
            count, since = arrived, now
        elif now - since > store.timeout:
            break
    if store.rank != 0:
        raise RunFailed(f"rank {store.rank}: {count} of {store.world_size} ranks reached the rendezvous "
                        f"store at {store.host}:{store.port}, none in the last {store.timeout:.0f} s, "
                        f"waiting for {what}")
    present = store.raw_call("read the ranks' challenges", store.values_raw, keys)
    missing = [k.rsplit("/", 1)[-1] for k, v in zip(keys, present) if v is None]
    raise RunFailed(f"rank 0: rank(s) {rank_list(missing)} did not reach the rendezvous (the store at "
                    f"{store.host}:{store.port}); {count} of {store.world_size} arrived, none in the "
                    f"last {store.timeout:.0f} s (--timeout)")


def _timedelta(seconds: float) -> timedelta:
    from datetime import timedelta
    return timedelta(seconds=seconds)
