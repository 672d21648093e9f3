"""Errors that end a run with one clear line and an exit code (see DESIGN: exit codes)."""


class CommBenchError(Exception):
    exit_code = 1


class UsageError(CommBenchError):
    """Bad sizes, options or files: exit 2."""
    exit_code = 2


class RunFailed(CommBenchError):
    """A benchmark failed (a peer died, a transport broke): exit 1."""
    exit_code = 1


INTERNAL_ERROR = 70  # a bug in comm-bench (EX_SOFTWARE): never 1, which means a failed run or findings
