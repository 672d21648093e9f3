"""Errors that end a run with one clear line and an exit code (see DESIGN: exit codes)."""


class CommBenchError(Exception):
    exit_code = 1


class UsageError(CommBenchError):
    """Bad sizes, options or files: exit 2."""
    exit_code = 2


class RunFailed(CommBenchError):
    """A benchmark failed (a peer died, a transport broke): exit 1."""
    exit_code = 1


class Interrupted(BaseException):
    """SIGTERM or SIGHUP reached a rank (scancel, a time limit, torchrun stopping its group):
    the run ends as failed with what was measured kept; exit 128 + the signal. Like
    KeyboardInterrupt, not an Exception: no `except Exception` on the way may swallow it."""

    def __init__(self, signum: int):
        import signal

        self.signame = signal.Signals(signum).name
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by {self.signame}")


INTERNAL_ERROR = 70  # a bug in comm-bench (EX_SOFTWARE): never 1, which means a failed run or findings
