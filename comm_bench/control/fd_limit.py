"""Descriptors for thousands of ranks: rank 0's store holds two connections per rank (the
rank's own and its watchdog's), every rank may hold a socket to each peer (tcp's mesh),
and the local spawner holds a pipe to each child. Each raises its soft RLIMIT_NOFILE to
the hard limit at start, and says in one line when even that is too low for the world
size it was given (exit 2, before the rank meets the others)."""
from __future__ import annotations

import resource

from ..errors import UsageError

# descriptors per rank of the run: a peer socket each, plus rank 0's two store connections
# each; the spawner holds a pipe to each child
PER_RANK = {"rank": 1, "rank 0": 3, "the local spawner": 1}
SPARE = 64                        # libraries, log files, the listener, transports' own sockets


def needed(world_size: int, role: str) -> int:
    return PER_RANK[role] * world_size + SPARE


def raise_for(world_size: int, role: str) -> int:
    """The soft limit after raising it to the hard one; UsageError if that is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    need = needed(world_size, role)
    if soft < need:
        raise UsageError(f"{world_size} ranks need about {need} open files on {role}, and this "
                         f"process may open {soft} (ulimit -n; hard limit {hard}): raise the hard "
                         "limit (ulimit -Hn, limits.conf or the job's --propagate) or run fewer ranks")
    return soft
