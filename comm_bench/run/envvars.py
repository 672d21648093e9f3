"""Whole numbers from a launcher's environment (torchrun, mpirun, srun, Kubernetes pods)."""
from __future__ import annotations

from ..errors import UsageError


def env_int(env, *names, hint: str = ""):
    """The first of `names` set to a non-empty value, as an int; None when none is set; a
    value that is not a whole number is bad input (one line naming it, and `hint`)."""
    for name in names:
        if env.get(name, "") != "":
            try:
                return int(env[name])
            except ValueError:
                raise UsageError(f"{name}={env[name]!r} is not a whole number{hint}") from None
    return None
