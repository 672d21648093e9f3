"""What the confirm phase (confirm_phase.py) needs of a running pair sweep: the declared
interface between the phase and whoever measures. The sweep's rank (sweep._RankRun, and
check's CheckRun) and the fabric simulator (fabric_sim.run.SimRun) implement it; the
phase uses nothing else of them."""
from __future__ import annotations

from typing import Any, Protocol


class ConfirmSettings(Protocol):
    """The run's options the phase reads."""

    mode: str               # "bw" or "lat": what a suspect is judged by
    iters: int              # the first pass's iterations a measurement
    confirm: int            # alternations per suspect (0: no confirm phase)
    rules: str | None       # validate's rules file, None for the defaults


class PairRunner(Protocol):
    rank: int               # rank 0 plans and judges; every rank measures

    @property
    def cfg(self) -> ConfirmSettings:
        """The run's options (read only here)."""

    def sizes(self, op: str) -> list[tuple[int, list[int]]]:
        """(size measured, sizes asked for it) of op, smallest first."""

    def measure_pairs(self, op: str, size: int, round_idx: int, pairs: list[tuple[int, int]],
                      asked: list[int], tag: dict | None = None, iters: int | None = None) -> None:
        """Every rank: one round of pairs at size, each an ordinary record plus `tag`'s fields
        (rank 0 writes them). iters: this round's, else the run's own."""

    def document(self, op: str | None = None) -> dict:
        """Rank 0: the results document so far (only op's records when given)."""

    def share(self, key: str, value: Any) -> Any:
        """Every rank: rank 0's value (the others pass None)."""

    def step_done(self, key: str) -> None:
        """Every rank: wait until every rank has reached key (a barrier)."""

    def still_working(self) -> None:
        """Rank 0: tell the waiting ranks that rank 0 is alive though busy."""

    def say(self, line: str) -> None:
        """Rank 0: one line of the run's output."""

    def add_work(self, steps: int) -> None:
        """Rank 0: the progress bar's total grows by steps measurements."""
