"""Optional native modules: load them if they were built, say why if not."""
from __future__ import annotations

import importlib

from ..errors import TransportUnavailable


class NativeError(RuntimeError):
    """What every native module (_C, _cuda, _ibverbs) raises for a failed call: one class,
    so an `except mod.NativeError` catches it whichever module raised it."""


# The native parts, the one list: setup.py builds each from its csrc/ folder (it reads this
# literal with ast, without importing comm_bench), load() says why one is missing, doctor
# lists them. module -> (csrc/ folder, what it holds, why it is missing and what to do)
PARTS = {
    "_C": ("core", "core harness + tcp",
           "the core extension was not built: reinstall with `pip install -e .` (needs a C++17 compiler)"),
    "_ibverbs": ("ibverbs", "RDMA engine",
                 "built without rdma-core headers: `apt-get install libibverbs-dev` and reinstall"),
    "_cuda": ("cuda", "CUDA copies + NCCL",
              "built without nvcc: install the CUDA toolkit (or set CUDA_HOME) and reinstall"),
}


def load(name: str):
    """Return (module, "") or (None, reason) for comm_bench.<name>."""
    try:
        return importlib.import_module(f"comm_bench.{name}"), ""
    except ImportError as exc:
        why = PARTS[name][2] if name in PARTS else "not built"
        if "No module named" not in str(exc):
            why = f"{why} ({exc})"
        return None, why


def require(name: str):
    """The module, or a TransportUnavailable naming what to do."""
    mod, why = load(name)
    if mod is None:
        raise TransportUnavailable(f"comm_bench.{name} is not available: {why}")
    return mod
