"""Heartbeats: a rank that dies or hangs makes every other rank stop, naming it.

Every rank bumps a counter `hb/<rank>` in the store each second (a second more per
thousand ranks: rank 0 answers them all) from a thread with its own store connection (so it keeps beating while the main thread is
inside native code, which releases the GIL). Rank 0, which hosts the store,
watches all counters; a counter that does not move for --timeout seconds,
or an abort posted by a failing rank, makes rank 0 post `abort` with the
culprit. Every rank polls `abort` and exits 1 with that one line. Other ranks
notice a dead rank 0 because the store stops answering; a hung rank 0 (stopped,
swapping) may leave their store calls blocked without end, so a second thread
checks that the heartbeat thread still gets answers and stops the rank if not.

A peer is dead only after --timeout (README, docs/reliability.md): a rank paused for
less (a GC pause, swap-in, a debugger attached, SIGSTOP then SIGCONT) carries on.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .rendezvous import Store

ABORT_KEY = "cb/abort"


def beat_interval(world_size: int) -> float:
    return 1.0 + world_size // 1000


class Watchdog:
    def __init__(self, store: Store, rank: int, world_size: int, rank_hosts: list[str], timeout: float,
                 on_abort: Callable[[dict[str, Any]], object]) -> None:
        self.rank, self.world_size, self.rank_hosts = rank, world_size, rank_hosts
        # a beat a second, one more second per thousand ranks (rank 0's store answers every
        # rank's beat); silent for the whole --timeout, and at least 4 beats, before a peer
        # counts as dead
        self.interval = beat_interval(world_size)
        self.stale_after = max(2.0, timeout, 4 * self.interval)
        self.on_abort = on_abort      # called with the failure dict before exiting
        self._store = store
        self._client = store.client(timeout=self.stale_after)
        self._aborting = threading.Lock()  # the first abort records and exits; later ones wait
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="comm-bench-watchdog", daemon=True)
        self._answered = time.monotonic()  # the last time the store answered the heartbeat thread
        self._deadman = threading.Thread(target=self._watch_store, name="comm-bench-deadman",
                                         daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        if self.rank != 0:  # rank 0 hosts the store in-process: it cannot hang without rank 0
            self._deadman.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def finished(self) -> None:
        """This rank has nothing left to run: not a silent death any more."""
        self._client.set(f"cb/done/{self.rank}", b"1")

    def post_abort(self, reason: str) -> None:
        """Tell every rank that this one failed (best effort)."""
        failure = {"rank": self.rank, "host": self.rank_hosts[self.rank], "reason": reason}
        try:
            # confirmed: this rank exits next, and a peer that sees it gone reads the abort
            self._client.set(ABORT_KEY, json.dumps(failure), confirmed=True)
        except Exception:  # noqa: BLE001 - the store may be gone; our own exit says enough
            pass

    def posted_failure(self) -> dict[str, Any] | None:
        """The failure another rank posted already, if any: an error this rank hits
        after that is its consequence (a peer that left), not the cause."""
        try:
            client = self._store.client(timeout=min(self.stale_after, 5.0))
            if client.check([ABORT_KEY]):
                failure = json.loads(client.get(ABORT_KEY))
                return failure if failure.get("rank") != self.rank else None
        except Exception:  # noqa: BLE001 - no store, nothing posted that we can know of
            pass
        return None

    # -- the thread ----------------------------------------------------------
    def _loop(self) -> None:
        last_seen: dict[int, tuple[int | None, float]] = {r: (None, time.monotonic()) for r in range(self.world_size)}
        while not self._stop.wait(self.interval):
            try:
                self._client.beat(f"cb/hb/{self.rank}")
                posted = self._client.payloads([ABORT_KEY])[0]   # None: absent, forged or replayed
                if posted is not None:
                    self.stop_for(json.loads(posted))
                if self.rank == 0:
                    self._watch(last_seen)
                self._answered = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - the store (rank 0) stopped answering
                if self._stop.is_set():
                    return
                self.stop_for({"rank": 0, "host": self.rank_hosts[0],
                             "reason": f"stopped answering (the rendezvous store on rank 0 did not "
                                       f"respond within {self.stale_after:.0f} s: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"})

    def _watch_store(self) -> None:
        """Store calls can block past their timeout when the store's host hangs."""
        while not self._stop.wait(1.0):
            silent = time.monotonic() - self._answered
            if silent > self.stale_after + 2.0:
                self.stop_for({"rank": 0, "host": self.rank_hosts[0],
                               "reason": f"stopped answering (the rendezvous store on rank 0 gave "
                                         f"no answer for {silent:.0f} s)"})

    def _watch(self, last_seen: dict[int, tuple[int | None, float]]) -> None:
        """Every rank's done mark and heartbeat in one store call (4,096 ranks: not 12,288)."""
        now = time.monotonic()
        others = range(1, self.world_size)
        values = self._client.payloads([f"cb/done/{r}" for r in others] + [f"cb/hb/{r}" for r in others])
        for r, done, raw in zip(others, values[:len(others)], values[len(others):]):
            if done is not None:
                continue
            beat = None if raw is None else int(raw)  # None: absent, forged or replayed
            prev, since = last_seen[r]
            if beat != prev:
                last_seen[r] = (beat, now)
            elif now - since > self.stale_after:
                failure = {"rank": r, "host": self.rank_hosts[r],
                           "reason": f"stopped answering (no heartbeat for {now - since:.0f} s)"}
                self._client.set(ABORT_KEY, json.dumps(failure), confirmed=True)
                # record it before the others exit: their leaving makes this rank's own
                # collectives fail, and that must not pass for the cause
                self.stop_for(failure, linger=2.5)

    def stop_for(self, failure: dict[str, Any], linger: float = 0.0) -> None:
        """Record `failure` (another rank's), name it, keep the store up for
        `linger` seconds so every rank can read the abort, and exit 1."""
        if self._stop.is_set() or failure.get("rank") == self.rank:
            return
        self._aborting.acquire()  # never released: this process ends below
        try:
            self.on_abort(failure)
        finally:
            print(f"comm-bench: rank {self.rank}: stopping: rank {failure['rank']} on "
                  f"{failure['host']} {failure['reason']}", file=sys.stderr, flush=True)
            time.sleep(linger)  # keep the store (rank 0) up until every rank has polled the abort
            os._exit(1)
