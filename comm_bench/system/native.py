"""Optional native modules: load them if they were built, say why if not."""
from __future__ import annotations

import importlib


class NativeError(RuntimeError):
    """What every native module (_C, _cuda, _ibverbs) raises for a failed call: one class,
    so an `except mod.NativeError` catches it whichever module raised it."""

_WHY_MISSING = {
    "_C": "the core extension was not built: reinstall with `pip install -e .` (needs a C++17 compiler)",
    "_ibverbs": "built without rdma-core headers: `apt-get install libibverbs-dev` and reinstall",
    "_cuda": "built without nvcc: install the CUDA toolkit (or set CUDA_HOME) and reinstall",
}


def load(name: str):
    """Return (module, "") or (None, reason) for comm_bench.<name>."""
    try:
        return importlib.import_module(f"comm_bench.{name}"), ""
    except ImportError as exc:
        why = _WHY_MISSING.get(name, "not built")
        if "No module named" not in str(exc):
            why = f"{why} ({exc})"
        return None, why


def require(name: str):
    """The module, or a TransportUnavailable naming what to do."""
    mod, why = load(name)
    if mod is None:
        from ..transports.base import TransportUnavailable
        raise TransportUnavailable(f"comm_bench.{name} is not available: {why}")
    return mod
