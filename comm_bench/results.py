"""The run's results document: one self-describing JSON file per run.

The writer keeps the document in memory and replaces the file atomically after
each record (safefile.Target), so the file on disk is always a complete, valid
document: a crash, a killed rank or a full disk loses nothing already written.
One writer per file (a lock beside it). Readers check every document against
the published schema (data/results.schema.json) before using it.
"""
from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
import platform
import re
import socket
import stat
import uuid
import sys
import time

from . import __version__
from .errors import RunFailed, UsageError
from .safefile import Target, disk_full_error, read_bounded
from .secret import PRIVATE_ENV

SCHEMA_VERSION = 1
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "results.schema.json")
_TAIL = "\n]}\n"
ENV_PREFIXES = ("NCCL_", "UCX_", "OMPI_MCA_", "GLOO_", "TORCH_NCCL_", "CUDA_VISIBLE_DEVICES",
                "COMM_BENCH_", "FI_", "RDMAV_", "MLX5_")
RUN_ID_ENV = "COMM_BENCH_RUN_ID"  # set by the spawner: which document is this run's own
OUTPUT_CLAIMED_ENV = "COMM_BENCH_OUTPUT_CLAIMED"  # set by the spawner, which holds -o's lock for its ranks
BIG_DOCUMENT = 8 << 20   # past this size the file is replaced at most once a second
_OURS = re.compile(rb'^\s*\{[^\0]*?"tool"\s*:\s*"comm-bench"')


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def environment() -> dict:
    env = {k: v for k, v in sorted(os.environ.items())
           if k.startswith(ENV_PREFIXES) and k not in PRIVATE_ENV and k != OUTPUT_CLAIMED_ENV}
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
        "run_id": os.environ.get(RUN_ID_ENV) or uuid.uuid4().hex,
    }


class ResultsWriter:
    """Rank 0's results file: the document in memory, written whole after each record."""

    def __init__(self, path: str, doc: dict, force: bool = False, records=()):
        self.path = path
        if os.environ.get(OUTPUT_CLAIMED_ENV) == os.path.abspath(path):
            self._target = Target(path)      # the spawner checked it and holds its lock
        else:
            self._target = claim_output(path, force)
        self.meta = dict(doc)
        self.records = [json.dumps(r, separators=(",", ":")) for r in records]  # serialised
        self.written = 0                     # records in the file on disk
        self._last = 0.0
        self._write()

    def append(self, record: dict) -> None:
        self.records.append(json.dumps(record, separators=(",", ":")))
        if self._size < BIG_DOCUMENT or time.monotonic() - self._last >= 1.0:
            self._write()

    def close(self, status: str = "ok", failure: dict | None = None) -> None:
        if self._target.dfd is None:
            return  # closed already (a failure after a failed final write)
        self.meta.update(status=status, failure=failure, finished=now_iso())
        try:
            self._write(sync=True)
        except RunFailed:
            if status == "ok":
                raise
            # a failure already being reported (a full disk, say): the last version stays
        finally:
            self._target.close()

    def _write(self, sync: bool = False) -> None:
        data = render(self.meta, self.records)
        try:
            self._target.replace(data, sync=sync)
        except OSError as exc:
            kept = f"the file keeps the {self.written} record(s) written before"
            raise disk_full_error(self.path, exc, kept) or \
                RunFailed(f"cannot write results to '{self.path}': {exc.strerror}; {kept}") from None
        self._size, self._last, self.written = len(data), time.monotonic(), len(self.records)


def render(meta: dict, records: list) -> bytes:
    """The document text: the header fields, then one serialised record per line."""
    head = json.dumps({k: v for k, v in meta.items() if k != "results"}, indent=1)[:-1].rstrip()
    body = "\n  " + ",\n  ".join(records) if records else ""
    return (head + ',\n "results": [' + body + _TAIL).encode()


def claim_output(path: str, force: bool = False) -> Target:
    """The -o file, checked and locked for this run: UsageError if another run writes it,
    if it is a link, a device or a folder, or (without `force`) a file that is not a
    comm-bench document (an empty file is fine)."""
    target = Target(path)
    try:
        st = target.lstat()
        if st is not None:
            if stat.S_ISLNK(st.st_mode):
                raise UsageError(f"-o '{path}' is a symbolic link: give the file's own path "
                                 "(comm-bench replaces the file; it never writes through links)")
            if not stat.S_ISREG(st.st_mode):
                kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                raise UsageError(f"-o '{path}' is {kind}: give the path of a results file")
            if not force and st.st_size > 0 and not _OURS.match(target.read_head()):
                raise UsageError(f"-o '{path}' exists and is not a comm-bench results document; "
                                 "use --force to replace it, or choose another -o")
        target.lock()
    except BaseException:
        target.close()
        raise
    return target


def finalize(path: str, status: str, failure: dict | None = None, authoritative: bool = False) -> None:
    """Set the final status of a results file (also used after a rank died).

    The first failure a rank records stands, unless `authoritative` (the local
    spawner, which saw which child died); the rank's own report is then kept
    as failure["reported"]. A file that cannot be read or rewritten is left as it is."""
    try:
        doc = load(path)
    except UsageError:
        return
    if doc.get("status") == "failed" and status == "failed":
        if not authoritative:
            return
        failure = dict(failure or {}, reported=doc.get("failure"))
    doc.update(status=status, failure=failure, finished=now_iso())
    records = [json.dumps(r, separators=(",", ":")) for r in doc.pop("results")]
    if doc.get("records_file") is not None:
        records = []        # they stay in their JSON Lines file: only the header is rewritten
    try:
        target = Target(path)
    except UsageError:
        return
    try:
        target.replace(render(doc, records), sync=True)
    except OSError:
        pass  # a full disk: the previous version stays, and the run's own error says why
    finally:
        target.close()


def _not_a_number(text):
    return f"{text} (not a finite number)"


def _float(text):
    v = float(text)
    return v if math.isfinite(v) else _not_a_number(text)


def load(path: str) -> dict:
    """Read and check a results file; one clear UsageError if it is missing, unreadable,
    too large, not ours or not valid against the schema (naming the record)."""
    data = read_bounded(path, "results file")
    try:
        # NaN/Infinity become strings, which the schema then refuses where a number belongs
        doc = json.loads(data.decode("utf-8"), parse_constant=_not_a_number, parse_float=_float)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"'{path}' is not valid JSON ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:80]}); is it a comm-bench results file?") from None
    if isinstance(doc, dict) and doc.get("records_file") is not None and doc.get("results") == []:
        from .results_stream import records       # a large run's records, streamed beside it
        doc["results"] = records(doc, path, parse_float=_float, parse_constant=_not_a_number)
    check_document(doc, path)
    return doc


@functools.lru_cache(maxsize=1)
def _schema_check():
    import fastjsonschema  # compiled once: fast enough for 100,000s of records

    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return fastjsonschema.compile(json.load(f))


def check_document(doc, path: str = "results") -> None:
    """A results document this version reads, or one clear UsageError naming what is wrong."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) \
            or doc.get("tool", "comm-bench") != "comm-bench":
        raise UsageError(f"'{path}' is not a comm-bench results document (no 'results' list)")
    version = doc.get("schema_version") or 1
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise UsageError(f"'{path}' has schema_version {doc['schema_version']!r}; this comm-bench "
                         f"reads up to {SCHEMA_VERSION}: upgrade comm-bench")
    from fastjsonschema import JsonSchemaException

    try:
        _schema_check()(doc)
    except JsonSchemaException as exc:
        rule = exc.message[len(exc.name):].strip() if exc.message.startswith(exc.name) else exc.message
        raise UsageError(f"'{path}' is not a valid comm-bench results document: {_where(exc.name)}"
                         f"{rule} (got {_short(exc.value)}; see docs/reliability.md)") from None
    _check_values(doc, path)


def _where(name: str) -> str:
    """'data.results[3].busbw' -> 'record 3 (results[3].busbw) '."""
    name = (name or "data").replace("data.", "", 1) if name != "data" else "the document"
    m = re.match(r"results\[(\d+)\]", name)
    return f"record {m.group(1)} ({name}) " if m else f"{name} "


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_values(doc, path):
    """What JSON Schema cannot say: ranks below world_size, numbers finite in memory."""
    n = doc.get("world_size")
    for i, rec in enumerate(doc["results"]):
        for key in ("src", "dst", "root"):
            v = rec.get(key)
            if n is not None and v is not None and v >= n:
                raise UsageError(f"'{path}' is not a valid comm-bench results document: record {i} "
                                 f"(results[{i}].{key}) names rank {v}, but the run had {n} rank(s)")
        for key in ("time_us", "algbw", "busbw", "bw_peak"):
            v = rec.get(key)
            if isinstance(v, float) and not math.isfinite(v):
                raise UsageError(f"'{path}' is not a valid comm-bench results document: record {i} "
                                 f"(results[{i}].{key}) is {v}, not a finite number")
