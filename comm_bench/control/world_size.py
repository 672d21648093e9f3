"""Ranks launched with different WORLD_SIZEs (a launcher or job script that hands them
out inconsistently) would wait for ranks that never come and then blame heartbeats or
timeouts. Each rank posts the world size it was given; a rank whose figure is not rank
0's, or that finds one that is not its own, names the disagreement (exit 2).

The figures travel unsealed, before the ranks have agreed the run nonce (a secret
derived from the launch environment leaves WORLD_SIZE out, so such ranks still meet). A
forged figure (torch's TCPStore admits anyone) can only make a rank refuse to start
(interference that store allows anyway, docs/reliability.md), never make it run with a
wrong world size."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import RunFailed, UsageError

if TYPE_CHECKING:
    from .rendezvous import Store

T = TypeVar("T")

KEY = "cb/world_size/{}"


def post(store: Store, info: Any) -> None:
    """This rank's WORLD_SIZE, then (ranks > 0) rank 0's compared with it at once."""
    store.raw_call("post its WORLD_SIZE", store.raw.set, KEY.format(info.rank), str(info.world_size))
    if info.rank != 0:
        theirs = _figure(store, 0)
        if theirs is not None and theirs != info.world_size:
            raise UsageError(_disagree(info.rank, info.world_size, 0, theirs))


def explained(store: Store, info: Any, meet: Callable[[], T]) -> T:
    """meet() (the ranks' first meeting), with a timeout explained by a rank posting another
    world size."""
    try:
        return meet()
    except RunFailed:
        for r in range(info.world_size):
            posted = r != info.rank and store.raw_call("read WORLD_SIZEs", store.raw.check, [KEY.format(r)])
            theirs = _figure(store, r) if posted else None
            if theirs is not None and theirs != info.world_size:
                raise UsageError(_disagree(r, theirs, info.rank, info.world_size)) from None
        raise


def _figure(store: Store, rank: int) -> int | None:
    """The WORLD_SIZE rank `rank` posted (waiting for it up to the store's timeout)."""
    try:
        return int(store.raw.get(KEY.format(rank)))
    except ValueError:
        return None
    except Exception as exc:  # noqa: BLE001 - torch's store raises several types
        raise RunFailed(f"rank {store.rank}: rank {rank} did not reach the rendezvous store within "
                        f"{store.timeout:.0f} s ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def _disagree(rank: int, size: int, other: int, other_size: int) -> str:
    return (f"the launcher gave rank {rank} WORLD_SIZE={size} and rank {other} WORLD_SIZE={other_size}: "
            "every rank of one run must be started with the same WORLD_SIZE (check the launch "
            "command or job script)")
