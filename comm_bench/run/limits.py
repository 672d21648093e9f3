"""What this host can run: rank counts and buffer sizes are checked against its
cores and memory before any rank starts or allocates (--oversubscribe overrides).

A spawned rank is a Python process with torch loaded (about 250 MiB resident,
measured), plus the buffers its transport holds for the largest size.
"""
from __future__ import annotations

import os

from ..errors import UsageError
from ..sizes import format_size

RANK_BASE_BYTES = 256 << 20   # one rank's interpreter, torch and libraries
RANKS_PER_CORE = 4            # ranks mostly wait on the network; beyond this they starve


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes; None where the kernel does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_host(cls, max_bytes: int, world_size: int, local_ranks: int, *, spawning: bool,
               oversubscribe: bool) -> None:
    """UsageError (one line, with the figures) when `local_ranks` ranks of transport `cls`
    at `max_bytes` do not fit here. `spawning`: we start the processes ourselves, so
    their own footprint and the core count count too."""
    if oversubscribe:
        return
    hint = "; --oversubscribe runs it anyway"
    if spawning and local_ranks > RANKS_PER_CORE * cores():
        raise UsageError(f"--nprocs {local_ranks} is more than this host can run ({cores()} cores, "
                         f"at most {RANKS_PER_CORE * cores()} ranks){hint}")
    per_rank = cls.host_bytes(max_bytes, world_size) + (RANK_BASE_BYTES if spawning else 0)
    need, have = per_rank * local_ranks, mem_available()
    if have is not None and need > have:
        raise UsageError(f"{local_ranks} rank(s) at {format_size(max_bytes)} need about "
                         f"{_gib(need)} of memory ({_gib(per_rank)} per rank) but this host has "
                         f"{_gib(have)} available: lower -e/--maxbytes or the rank count{hint}")
    gpu = cls.gpu_bytes(max_bytes, world_size)
    if gpu:
        free = _gpu_free()
        if free and gpu > min(free):
            raise UsageError(f"a rank at {format_size(max_bytes)} needs about {_gib(gpu)} of GPU "
                             f"memory but a GPU here has {_gib(min(free))} free: lower "
                             f"-e/--maxbytes{hint}")


def _gpu_free() -> list:
    try:
        from ..system.nvml_counters import free_memory
        return free_memory()
    except Exception:  # noqa: BLE001 - unknown GPU memory is not checked (the transport reports it)
        return []


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"
