"""Progress on rank 0: a rich progress bar on a terminal, plain lines otherwise."""
from __future__ import annotations

import os
import sys

from ..printable import STDOUT_TTY_ENV

_MPI_RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


def stdout_is_terminal() -> bool:
    """Is what the user reads a terminal? Open MPI gives each rank a pseudo-terminal even
    when mpirun's own output goes to a file or a pipe, so under MPI the rank's isatty()
    says nothing: only the spawner's word (or none, no bar) counts."""
    said = os.environ.get(STDOUT_TTY_ENV)
    if said is not None:
        return said == "1" and sys.stdout.isatty()
    if any(k in os.environ for k in _MPI_RANK_ENV):
        return False
    return sys.stdout.isatty()


ETA_AFTER_S = 5.0    # a time-left estimate once the run has gone on this long (a rate to go by)


def _time_left_column():
    from rich.progress import ProgressColumn
    from rich.text import Text

    class TimeLeft(ProgressColumn):
        """rich's estimate of the time left, shown once the run is ETA_AFTER_S old: before
        that a short run is over, and a long one has no rate yet to go by."""
        def render(self, task):
            left = task.time_remaining
            if task.finished or left is None or (task.elapsed or 0) < ETA_AFTER_S:
                return Text("")
            left = int(left + 0.5)
            text = f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}" if left >= 3600 else \
                f"{left // 60}:{left % 60:02d}"
            return Text(f"{text} left")
    return TimeLeft()


class Progress:
    """One bar over the whole run: its total is the first pass's records, grown by the
    confirm phase's (or check's pair rounds') when they are planned."""

    def __init__(self, total: int, enabled: bool = True):
        self._bar = None
        self._console = None
        self._gone = False   # stdout's reader went away
        if enabled and stdout_is_terminal():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn

            # the bar's own terminal codes go to the terminal itself; every line of text is
            # escaped on its way (line()), as stdout escapes it (printable.py)
            raw = getattr(sys.stdout, "_stream", sys.stdout)
            self._console = Console(file=raw)
            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     _time_left_column(), console=self._console, transient=True)
            self._task = self._bar.add_task("sweep", total=total)
            self._bar.start()

    def line(self, text: str) -> None:
        if self._gone:
            return
        try:
            if self._bar is not None:
                from ..printable import escape
                self._bar.console.print(escape(text), highlight=False, markup=False, soft_wrap=True)
            else:
                print(text, flush=True)
        except BrokenPipeError:
            # `| head -1`: the table has no reader, the measurement and its results file go on;
            # stdout goes to /dev/null so no later write or the exit's flush fails
            self._gone = True
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)

    def advance(self, description: str = "", steps: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=steps, description=description)

    def grow(self, steps: int) -> None:
        """More work planned (the confirm phase's measurements): the total counts it."""
        if self._bar is not None and steps:
            total = next(t.total for t in self._bar.tasks if t.id == self._task) or 0
            self._bar.update(self._task, total=total + steps)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
