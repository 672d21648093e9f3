"""Errors that end a run with one clear line and an exit code, and the exit codes themselves
(docs/internal-contracts.md: Exit codes). A leaf module: it imports nothing of comm_bench, so
every room, system/ included, may raise these."""

# The exit codes, one table: errors, validate and the CLI take them from here.
EXIT_OK = 0
EXIT_FAILED = 1          # a failed run, or findings
EXIT_USAGE = 2           # bad input: one line, no traceback
EXIT_UNCONFIRMED = 3     # validate: suspects or would-be findings left unconfirmed
INTERNAL_ERROR = 70      # a bug in comm-bench (EX_SOFTWARE): never 1, which means a failed run or findings
EXIT_SIGNAL = 128        # + the signal's number: a run ended by a signal (130: Ctrl-C)


class CommBenchError(Exception):
    exit_code = EXIT_FAILED


class UsageError(CommBenchError):
    """Bad sizes, options or files: exit 2."""
    exit_code = EXIT_USAGE


class RunFailed(CommBenchError):
    """A benchmark failed (a peer died, a transport broke): exit 1."""
    exit_code = EXIT_FAILED


class TransportUnavailable(UsageError):
    """The transport cannot run here (missing library, device, native part, ...): one line
    saying what to do; exit 2. Here, not in transports/, because system/native.py raises it."""


class Interrupted(BaseException):
    """SIGTERM or SIGHUP reached a rank (scancel, a time limit, torchrun stopping its group):
    the run ends as failed with what was measured kept; exit 128 + the signal. Like
    KeyboardInterrupt, not an Exception: no `except Exception` on the way may swallow it."""

    def __init__(self, signum: int):
        import signal

        self.signame = signal.Signals(signum).name
        self.exit_code = EXIT_SIGNAL + signum
        super().__init__(f"interrupted by {self.signame}")
