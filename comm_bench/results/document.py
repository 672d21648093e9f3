"""The run's results document: one self-describing JSON file per run.

The writer keeps the document in memory and replaces the file atomically after
each record (safefile.Target), so the file on disk is always a complete, valid
document: a crash, a killed rank or a full disk loses nothing already written.
One writer per file (a lock beside it). Readers check every document against
the published schema (data/results.schema.json) before using it.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import gc
import json
import math
import os
import platform
import re
import socket
import uuid
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .. import __version__
from .doclimits import loads_json
from ..errors import RunFailed, UsageError
from .record_checks import RecordChecker, shown
from .stream import RecordStream, records as streamed_records, records_path, write_header
from .safefile import Target, claim_next_free, disk_full_error, read_bounded
from ..control.secret import PRIVATE_ENV

SCHEMA_VERSION = 1
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "results.schema.json")
_TAIL = "\n]}\n"
ENV_PREFIXES = ("NCCL_", "UCX_", "OMPI_MCA_", "GLOO_", "TORCH_NCCL_", "CUDA_VISIBLE_DEVICES",
                "COMM_BENCH_", "FI_", "RDMAV_", "MLX5_")
RUN_ID_ENV = "COMM_BENCH_RUN_ID"  # set by the spawner: which document is this run's own
OUTPUT_CLAIMED_ENV = "COMM_BENCH_OUTPUT_CLAIMED"  # set by the spawner, which holds -o's lock for its ranks
LARGE_READ = 10_000      # records: a document this large is read once and kept out of the collector's scans
BIG_DOCUMENT = 8 << 20   # past this size the file is replaced at most once a second
# what render() writes: the header opens with these two fields, the results list closes it
_OURS = re.compile(rb'^\{\s*"schema_version"\s*:\s*\d+\s*,\s*"tool"\s*:\s*"comm-bench"')
_OURS_TAIL = re.compile(rb"\]\s*\}\s*$")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def environment() -> dict[str, Any]:
    env = {k: v for k, v in sorted(os.environ.items())
           if k.startswith(ENV_PREFIXES) and k not in PRIVATE_ENV and k != OUTPUT_CLAIMED_ENV}
    return {"variables": env, "python": sys.version.split()[0], "platform": platform.platform(),
            "libraries": library_versions()}


def library_versions() -> dict[str, Any]:
    from importlib import metadata

    out = {}
    for dist in ("torch", "mpi4py", "grpcio", "nvidia-ml-py", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def new_document(*, transport: str, world_size: int, pattern: str, options: dict[str, Any],
                 ranks: list[Any], hosts: list[Any], link_kind: str,
                 command: list[str] | None = None) -> dict[str, Any]:
    """link_kind: what the transport's data crosses (its class's link_kind, links.LINK_KINDS),
    recorded here and in each record so that readers need no transport."""
    return {
        "schema_version": SCHEMA_VERSION, "tool": "comm-bench", "version": __version__,
        "command": list(command if command is not None else sys.argv),
        "started": now_iso(), "finished": None, "status": "running", "failure": None,
        "transport": transport, "link_kind": link_kind, "world_size": world_size, "pattern": pattern,
        "options": options, "hosts": hosts, "ranks": ranks, "environment": environment(),
        "writer_host": socket.gethostname(),
        "run_id": os.environ.get(RUN_ID_ENV) or uuid.uuid4().hex,
    }


class ResultsWriter:
    """Rank 0's results file: the document in memory, written whole after each record.
    keep: an earlier run's document at `path` is kept, this one goes to self.path (numbered)."""

    def __init__(self, path: str, doc: dict[str, Any], force: bool = False, records: Iterable[dict[str, Any]] = (),
                 keep: bool = False) -> None:
        self._target = output_target(path, force, keep)
        self.path = self._target.path
        self.meta = dict(doc)
        # the records as their lines: a record held as a dict takes ~8x the memory (4.3 kB against
        # 0.5 kB), so the confirm phase parses back the few it needs rather than all being kept twice
        self.records = [serialised(r, self.meta) for r in records]
        self.written = 0                     # records in the file on disk
        self._last = 0.0
        self._write()

    def append(self, record: dict[str, Any]) -> None:
        self.records.append(serialised(record, self.meta))
        if self._size < BIG_DOCUMENT or time.monotonic() - self._last >= 1.0:
            self._write()

    def close(self, status: str = "ok", failure: dict[str, Any] | None = None) -> None:
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


class StreamingWriter:
    """The sweep's writer for `--records jsonl`: what ResultsWriter offers (meta, records,
    append, close), but each record is appended to DOC.records.jsonl and the document
    itself (header only) is replaced just at the start and the end, so a 3-million-record
    run never rewrites gigabytes. records: the serialised records, for the confirm phase."""

    def __init__(self, path: str, doc: dict[str, Any], force: bool = False, records: Iterable[dict[str, Any]] = (),
                 keep: bool = False) -> None:
        self._target = output_target(path, force, keep)
        self.path = path = self._target.path       # the records file follows a numbered name
        try:
            # -o is ours (checked and locked): an earlier run's records file beside it goes
            self.stream = RecordStream(path, force=True)
        except BaseException:
            self._target.close()
            raise
        self.meta = dict(doc, records_file=self.stream.name)
        self.meta.pop("results", None)
        self.records: list[Any] = []
        self.written = 0
        self._header()
        for r in records:
            self.append(r)

    def _header(self, sync: bool = False) -> None:
        write_header(self._target, self.path, dict(self.meta, results=[]), sync=sync)   # full disk: in place

    def append(self, record: dict[str, Any]) -> None:
        line = serialised(record, self.meta)
        self.stream.append_lines([line])
        self.records.append(line)
        self.written += 1

    def close(self, status: str = "ok", failure: dict[str, Any] | None = None) -> None:
        if self._target.dfd is None:
            return
        self.meta.update(status=status, failure=failure, finished=now_iso())
        try:
            try:
                self.stream.close()
            except OSError as exc:      # a full disk: the header still says how the run ended
                if status == "ok":
                    raise disk_full_error(self.stream.path, exc, "") or RunFailed(
                        f"cannot write records to '{self.stream.path}': {exc.strerror}") from None
            self._header(sync=True)
        except RunFailed:
            if status == "ok":
                raise
        finally:
            self._target.close()


def serialised(record: dict[str, Any], meta: dict[str, Any]) -> str:
    """One record's line as the writers keep it, with the run's link_kind (a record kept from
    an earlier attempt of the same run gets it too)."""
    if meta.get("link_kind") is not None:
        record.setdefault("link_kind", meta["link_kind"])
    return json.dumps(record, separators=(",", ":"))


def render(meta: dict[str, Any], records: list[str]) -> bytes:
    """The document text: the header fields, then one serialised record per line."""
    head = json.dumps({k: v for k, v in meta.items() if k != "results"}, indent=1)[:-1].rstrip()
    body = "\n  " + ",\n  ".join(records) if records else ""
    return (head + ',\n "results": [' + body + _TAIL).encode()


def output_target(path: str, force: bool = False, keep: bool = False) -> Target:
    """-o for rank 0's writer: checked and locked here, or already by the spawner."""
    if os.environ.get(OUTPUT_CLAIMED_ENV) == os.path.abspath(path):
        return Target(path)      # the spawner checked it and holds its lock
    return claim_output(path, force, keep)


def claim_output(path: str, force: bool = False, keep: bool = False) -> Target:
    """The -o file, checked and locked for this run: UsageError if another run writes it,
    if it is a link, a device or a folder, or (without `force`) a file that is not a
    comm-bench document (an empty file is fine). keep (and no force): a comm-bench
    document there, or one another run writes now, is kept, and the Target returned is
    the next free numbered name (its .path: results.1.json, ...)."""
    keep = keep and not force
    target = Target(path)
    try:
        target.check_replaceable("-o")
        # locked first, then looked at: what is there cannot change under us
        taken = not target.lock(busy_ok=keep)
        st = target.lstat()
        if not taken and st is not None and st.st_size > 0:
            ours = _written_by_us(target, st.st_size)
            if not ours and not force:
                raise UsageError(f"-o '{path}' exists and is not a comm-bench results document; "
                                 "use --force to replace it, or choose another -o")
            taken = ours and keep
        if taken:
            target.close()
            return claim_next_free(path, siblings=lambda name: [records_path(name)])
    except BaseException:
        target.close()
        raise
    return target


def _written_by_us(target: Target, size: int) -> bool:
    """A document comm-bench wrote (so a run may replace it): its head and tail as render()
    makes them. A hand-made {"tool": "comm-bench"} with no results is not one."""
    head = target.read_head()
    if not _OURS.match(head):
        return False
    # a --records jsonl header ends in up to 5 KiB of padding (stream.write_header)
    tail = head if size <= len(head) else target.read_tail(8192)
    return bool(_OURS_TAIL.search(tail))


def finalize(path: str, status: str, failure: dict[str, Any] | None = None, authoritative: bool = False) -> None:
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


def _not_a_number(text: str) -> str:
    return f"{text} (not a finite number)"


def _float(text: str) -> float | str:
    v = float(text)
    return v if math.isfinite(v) else _not_a_number(text)


def _no_repeated_keys(path: str) -> Callable[[list[tuple[Any, Any]]], dict[Any, Any]]:
    """A key given twice (two 'results' lists: json keeps the last) makes the document ambiguous."""
    def build(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[Any] = set()
            key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise UsageError(f"'{path}' is not a valid comm-bench results document: the key {key!r} "
                             "appears twice in one object (which one counts is ambiguous)")
        return obj
    return build


def load(path: str) -> dict[str, Any]:
    """Read and check a results file; one clear UsageError if it is missing, unreadable,
    too large, not ours or not valid against the schema (naming the record)."""
    data = read_bounded(path, "results file")
    with collector_paused():
        try:
            # NaN/Infinity become strings, which the schema then refuses where a number belongs
            doc = loads_json(data.decode("utf-8"), "results file", path, walk=False,
                             parse_constant=_not_a_number, parse_float=_float,
                             object_pairs_hook=_no_repeated_keys(path))
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"'{path}' is not valid JSON ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:80]}); is it a comm-bench results file?") from None
        if isinstance(doc, dict) and doc.get("records_file") is not None and doc.get("results") == []:
            doc["results"] = streamed_records(doc, path, parse_float=_float, parse_constant=_not_a_number,
                                              object_pairs_hook=_no_repeated_keys(path))
        check_document(doc, path)
    if len(doc["results"]) >= LARGE_READ:
        gc.freeze()      # read once and kept: out of the collector's later scans
    return doc  # type: ignore[no-any-return]  # a dict: check_document refuses anything else


def load_measured(path: str) -> dict[str, Any]:
    """load, for the readers: a document with no records has nothing to show or check (a
    sweep stopped before its first size finished): one UsageError, exit 2, in every command.
    (`sweep --resume` reads such a document with load: it continues it.)"""
    doc = load(path)
    if not doc["results"]:
        raise UsageError(f"'{path}' holds no records: nothing to read (the sweep that wrote it "
                         f"finished no size; status {doc.get('status')!r})")
    from .records import has_figure, no_figures
    if not any(map(has_figure, doc["results"])):
        raise no_figures(path, len(doc["results"]))
    return doc


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """A large document is millions of small objects without cycles: the cyclic garbage
    collector would scan them again and again while they are built and each time the
    reader allocates afterwards (a third of validate's time at 1,024 ranks). Paused while
    reading; load then moves a large document out of its view (gc.freeze) for the rest of
    the process (the readers are one-shot commands; freed objects still go by reference
    count)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@functools.lru_cache(maxsize=1)
def _schema_check() -> Callable[[Any], Any]:
    import fastjsonschema  # compiled once: fast enough for 100,000s of records

    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return fastjsonschema.compile(json.load(f))


def check_document(doc: dict[str, Any], path: str = "results") -> None:
    """A results document this version reads, or one clear UsageError naming what is wrong."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) \
            or doc.get("tool", "comm-bench") != "comm-bench":
        raise UsageError(f"'{path}' is not a comm-bench results document (no 'results' list)")
    version = doc.get("schema_version") or 1
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise UsageError(f"'{path}' has schema_version {doc['schema_version']!r}; this comm-bench "
                         f"reads up to {SCHEMA_VERSION}: upgrade comm-bench")
    fast = _fast_schema_check()
    if fast is None or not fast.is_valid(doc):
        explain_schema_error(doc, path, fast)
    from .health_checks import check as check_health
    check_health(doc, path)
    from .topology_checks import check as check_topology
    check_topology(doc, path)
    checker = RecordChecker(doc, path)
    for i, rec in enumerate(doc["results"]):
        checker.check(i, rec)


@functools.lru_cache(maxsize=1)
def _fast_schema_check() -> Any:
    """jsonschema-rs (compiled): 16x fastjsonschema on 137,000 records, so a valid document,
    the usual case, is accepted in 0.2 s; None where it is not installed."""
    try:
        import jsonschema_rs
    except ImportError:
        return None
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return jsonschema_rs.validator_for(json.load(f))


def explain_schema_error(doc: dict[str, Any], path: str, fast: Any, offset: int = 0) -> None:
    """The first schema error as one UsageError naming the record (fastjsonschema's report);
    offset: the index of doc["results"][0] in the whole document (a streamed batch)."""
    from fastjsonschema import JsonSchemaValueException

    try:
        _schema_check()(doc)
    except JsonSchemaValueException as exc:
        name = exc.name or ""
        rule = exc.message[len(name):].strip() if exc.message.startswith(name) else exc.message
        raise UsageError(f"'{path}' is not a valid comm-bench results document: {_where(name, offset)}"
                         f"{rule} (got {shown(exc.value)}; see docs/reliability.md)") from None
    if fast is not None:       # the two libraries read a corner of JSON Schema differently: refuse
        err = next(iter(fast.iter_errors(doc)))
        steps = list(err.instance_path[1:])
        if steps and isinstance(steps[0], int):
            steps[0] += offset
        where = "results" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in steps) \
            if list(err.instance_path[:1]) == ["results"] else ".".join(map(str, err.instance_path)) or "data"
        raise UsageError(f"'{path}' is not a valid comm-bench results document: {_where('data.' + where, 0)}"
                         f"{err.message} (see docs/reliability.md)")


def _where(name: str, offset: int = 0) -> str:
    """'data.results[3].busbw' -> 'record 3 (results[3].busbw) ' (3 + offset)."""
    name = (name or "data").replace("data.", "", 1) if name != "data" else "the document"
    m = re.match(r"results\[(\d+)\]", name)
    if not m:
        return f"{name} "
    i = int(m.group(1)) + offset
    name = f"results[{i}]" + name[m.end():]
    return f"record {i} ({name}) "
