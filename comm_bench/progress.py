"""Progress on rank 0: a rich progress bar on a terminal, plain lines otherwise."""
from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, enabled: bool = True):
        self._bar = None
        self._console = None
        if enabled and sys.stdout.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn

            self._console = Console()
            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), console=self._console, transient=True)
            self._task = self._bar.add_task("sweep", total=total)
            self._bar.start()

    def line(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, highlight=False, markup=False, soft_wrap=True)
        else:
            print(text, flush=True)

    def advance(self, description: str = "") -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=description)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
