"""The framework table (comm_bench/data/select_frameworks.yaml): which framework
implements a layout per ecosystem, and its backend, scheduling unit, elasticity,
Kubernetes operator, migration effort and sources."""
from __future__ import annotations

import functools
import os

from ..errors import UsageError

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "select_frameworks.yaml")
ECOSYSTEMS = ("pytorch", "jax")


@functools.lru_cache(maxsize=1)
def table():
    import yaml
    with open(PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


def name_for(kind, ecosystem):
    try:
        return table()["layouts"][kind][ecosystem]
    except KeyError:
        raise UsageError(f"no framework for layout {kind!r} in ecosystem {ecosystem!r}") from None


def info(name):
    """The table entry of a framework name ("DeepSpeed ZeRO-2" -> the DeepSpeed entry)."""
    fws = table()["frameworks"]
    key = max((k for k in fws if name.startswith(k)), key=len, default=None)
    return (key, fws[key]) if key else (name, {})
