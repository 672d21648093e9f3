"""Transports registered by name: every module in comm_bench.transports that
defines a Transport subclass with a `name` is found; no hand-kept list.

Transport modules import only the standard library at module level (heavy or
optional libraries are imported in probe/setup), so discovery is cheap and
never fails because an optional part is missing.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .errors import UsageError
from .transports import base


@cache
def transports() -> dict:
    from . import transports as pkg

    found = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, base.Transport)
                    and obj is not base.Transport and obj.name and obj.__module__ == module.__name__):
                found[obj.name] = obj
    return dict(sorted(found.items()))


def get(name: str):
    table = transports()
    if name not in table:
        raise UsageError(f"unknown transport '{name}'; choose one of: {', '.join(table)}")
    return table[name]


def all_options() -> list:
    """Every transport's Option, one per flag, with the transports that use it."""
    merged: dict = {}
    for name, cls in transports().items():
        for opt in cls.options:
            entry = merged.setdefault(opt.flag, (opt, []))
            entry[1].append(name)
    return list(merged.values())
