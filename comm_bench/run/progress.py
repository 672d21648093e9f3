"""Progress on rank 0: a rich progress bar on a terminal, plain lines otherwise."""
from __future__ import annotations

import os
import sys


STDOUT_TTY_ENV = "COMM_BENCH_STDOUT_TTY"   # the spawner's own stdout, "1" a terminal
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


class Progress:
    def __init__(self, total: int, enabled: bool = True):
        self._bar = None
        self._console = None
        self._gone = False   # stdout's reader went away
        if enabled and stdout_is_terminal():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn

            self._console = Console()
            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), console=self._console, transient=True)
            self._task = self._bar.add_task("sweep", total=total)
            self._bar.start()

    def line(self, text: str) -> None:
        if self._gone:
            return
        try:
            if self._bar is not None:
                self._bar.console.print(text, highlight=False, markup=False, soft_wrap=True)
            else:
                print(text, flush=True)
        except BrokenPipeError:
            # `| head -1`: the table has no reader, the measurement and its results file go on;
            # stdout goes to /dev/null so no later write or the exit's flush fails
            self._gone = True
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)

    def advance(self, description: str = "") -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=description)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
