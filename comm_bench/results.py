"""The run's results document: one self-describing JSON file per run.

Records are appended as each size (or pair) finishes by rewriting only the
file's tail, so the file is valid JSON after every append and a crash or a
killed rank loses nothing already measured.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import sys

from . import __version__
from .errors import UsageError

SCHEMA_VERSION = 1
_TAIL = "\n]}\n"
ENV_PREFIXES = ("NCCL_", "UCX_", "OMPI_MCA_", "GLOO_", "TORCH_NCCL_", "CUDA_VISIBLE_DEVICES",
                "COMM_BENCH_", "FI_", "RDMAV_", "MLX5_")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def environment() -> dict:
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
    return {"variables": env, "python": sys.version.split()[0], "platform": platform.platform(),
            "libraries": library_versions()}


def library_versions() -> dict:
    from importlib import metadata

    out = {}
    for dist in ("torch", "mpi4py", "grpcio", "nvidia-ml-py", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def new_document(*, transport: str, world_size: int, pattern: str, options: dict,
                 ranks: list, hosts: list, command=None) -> dict:
    return {
        "schema_version": SCHEMA_VERSION, "tool": "comm-bench", "version": __version__,
        "command": list(command if command is not None else sys.argv),
        "started": now_iso(), "finished": None, "status": "running", "failure": None,
        "transport": transport, "world_size": world_size, "pattern": pattern,
        "options": options, "hosts": hosts, "ranks": ranks, "environment": environment(),
        "writer_host": socket.gethostname(),
    }


class ResultsWriter:
    """Writes the document header once, then appends records at the end."""

    def __init__(self, path: str, doc: dict):
        self.path = path
        self.count = 0
        head = json.dumps(doc, indent=1)
        assert head.endswith("}")
        try:
            self._f = open(path, "w+", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write results to '{path}': {exc.strerror}") from None
        self._f.write(head[:-1].rstrip() + ',\n "results": [' + _TAIL)
        self._f.flush()

    def append(self, record: dict) -> None:
        self._f.seek(0, os.SEEK_END)
        self._f.seek(self._f.tell() - len(_TAIL))
        sep = "\n  " if self.count == 0 else ",\n  "
        self._f.write(sep + json.dumps(record, separators=(",", ":")) + _TAIL)
        self._f.truncate()
        self._f.flush()
        self.count += 1

    def close(self, status: str = "ok", failure: dict | None = None) -> None:
        self._f.close()
        finalize(self.path, status, failure)


def finalize(path: str, status: str, failure: dict | None = None, authoritative: bool = False) -> None:
    """Set the final status of a results file (also used after a rank died).

    The first failure a rank records stands, unless `authoritative` (the local
    spawner, which saw which child died); the rank's own report is then kept
    as failure["reported"]."""
    try:
        doc = load(path)
    except UsageError:
        return
    if doc.get("status") == "failed" and status == "failed":
        if not authoritative:
            return
        failure = dict(failure or {}, reported=doc.get("failure"))
    doc.update(status=status, failure=failure, finished=now_iso())
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps({k: v for k, v in doc.items() if k != "results"}, indent=1)[:-1].rstrip())
        f.write(',\n "results": [\n  ' + ",\n  ".join(json.dumps(r, separators=(",", ":"))
                                                      for r in doc["results"]) + _TAIL)
    os.replace(tmp, path)


def load(path: str) -> dict:
    """Read a results file; one clear UsageError if it is missing, unreadable or not ours."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"results file '{path}' not found") from None
    except IsADirectoryError:
        raise UsageError(f"'{path}' is a folder, not a results file") from None
    except OSError as exc:
        raise UsageError(f"cannot read '{path}': {exc.strerror}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"'{path}' is not valid JSON ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:80]}); is it a comm-bench results file?") from None
    check_document(doc, path)
    return doc


def check_document(doc, path: str = "results") -> None:
    """A results document this version reads, or one clear UsageError."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) \
            or doc.get("tool", "comm-bench") != "comm-bench":
        raise UsageError(f"'{path}' is not a comm-bench results document (no 'results' list)")
    if (doc.get("schema_version") or 1) > SCHEMA_VERSION:
        raise UsageError(f"'{path}' has schema_version {doc['schema_version']!r}; this comm-bench "
                         f"reads up to {SCHEMA_VERSION}: upgrade comm-bench")
