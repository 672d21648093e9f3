"""A large results document read record by record, never whole: memory grows with what the
reader keeps, not with the file (a 1,024-node pairwise run of 2 sizes is 2 million records,
over 1 GB; json.load of it took 4.4 GiB).

    doc, streamed = read(path, consume)   # consume(header) -> a reader, or None
                                  # reader.take(rec) -> True when it kept the record's figures
                                  # itself; the others stay in doc["results"]. A reader may also
                                  # have take_columns(recs, cols) -> True when it took every
                                  # record of a batch at once (cols: below), False: offer them
                                  # one by one. (streamed False: read whole, every record in
                                  # doc["results"]: a small document, consume gave None, or not
                                  # one record a line)

A batch of records that all hold the same keys is also given as columns, {key: tuple of
its values in record order}, so the checks and the readers work on it at C speed (numpy);
where a column holds what the fast path does not take, the records go one by one.

Every record is checked as load() checks it (the schema, then RecordChecker) before take
sees it, so a hostile figure is one line and exit 2 here too. Documents below STREAM_FROM,
or not in the layout the sweep writes (the header, then one record per line), are read
whole by load() as before; a records_file document's JSON Lines are streamed the same way.
"""
from __future__ import annotations

import functools
import json
import os
import pickle
import re
import signal
import stat
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from operator import itemgetter
from typing import Any

try:        # 2-3x json's speed on the records (an optional dependency: json without it)
    from orjson import loads as _fast_loads
except ImportError:
    _fast_loads = json.loads  # type: ignore[assignment]

from ..errors import UsageError
from .doclimits import loads_json, may_hold_unprintable, printable
from .record_checks import RecordChecker
from .records import has_figure, no_figures
from .safefile import MAX_READ
from . import document as D
from . import stream

STREAM_FROM = 64 << 20      # bytes: a document this large is streamed (whole, it takes ~6x)
SPLIT_FROM = 128 << 20      # bytes of records read in two halves at once (two processes)
MAX_KEPT = 200_000          # records kept whole (~1.5 KB each): confirm, collective, latency...
MAX_TAKEN = 16_000_000      # records a reader keeps the figures of (~40 bytes each)
MAX_KEPT_BYTES = 256 << 20  # bytes of record text kept whole (what MAX_KEPT records of ~1.3 KB hold)
MAX_HEADER = 64 << 20      # bytes before the records: hosts and their topology snapshots
CHUNK = 4 << 20             # bytes parsed per json.loads: one call per ~10,000 records
_RESULTS = b' "results": ['
# text the fast parse cannot take as it is, found in one pass of bytes.translate: long
# integers (load's hooks refuse them; orjson reads integers past 64 bits as floats: 19
# digits or more go the slow way) and whitespace after a quote (before a key's colon it
# would hide a repeated key from the count of '":'); and with json, non-finite figures
# (orjson refuses them itself)
_SHAPE = bytes(48 if 48 <= c <= 57 else 32 if c in b" \t\r\n" else c if c == 34 else 46 for c in range(256))
_SLOW_SHAPES = (b"0" * 19, b'" ')
_SLOW = () if _fast_loads is not json.loads else (b"NaN", b"Infinity")
_OBJECTS = (("extra",), ("extra", "buffer"), ("extra", "per_direction_gbps"), ("latency_us",), ("confirm",),
            ("confirm", "target"))     # where a record holds objects (the schema's record)


def read(path: str, consume: Callable[[dict[str, Any]], Any],
         stream_from: int | None = None) -> tuple[dict[str, Any], bool]:
    """(doc, streamed): the document's header with doc["results"] = the records take did
    not keep; streamed False where it was read whole (every record in doc["results"])."""
    stream_from = STREAM_FROM if stream_from is None else stream_from
    head = _source(path, stream_from)
    if head is None:
        return D.load_measured(path), False     # consume is not called: every record is kept
    doc, records = head
    D.check_document(dict(doc, results=[]), path)
    reader = consume(doc)
    if reader is None:                      # the reader needs every record: read whole
        return D.load_measured(path), False
    try:
        return _stream(path, doc, records, reader), True
    except NotInLayout as exc:
        # not one record per line after all (a pretty-printed document): read whole as
        # before where it is small enough, so load says what is wrong with it, if anything.
        # Never for JSON Lines (one record a line by definition), nor once records were read
        # in the layout (a damaged line, not another layout): that reads gigabytes to say the same
        if records.jsonl or exc.after or os.stat(path).st_size > MAX_READ:
            raise UsageError(str(exc)) from None
        return D.load_measured(path), False


class NotInLayout(UsageError):
    """The text after the header is not one JSON record per line. after: records read
    before it in the layout (so the layout holds, and this is damage)."""
    after = 0


def _stream(path: str, doc: dict[str, Any], records: _Records, reader: Any) -> dict[str, Any]:
    """The records read into reader; doc["results"] = those it did not take. A large
    document is read in two halves at once where there are two cores (the second in a
    forked process whose reader is merged into this one after the first half)."""
    cut = records.middle() if records.size >= SPLIT_FROM and _cores() > 1 and hasattr(reader, "merge") else None
    with D.collector_paused():
        if cut is None:
            part = _Part(path, doc, reader).read(records.blocks())
        else:
            part = _read_halves(path, doc, records, reader, cut)
        part.checker.check_repeats()
    if not part.count:
        raise UsageError(f"'{path}' holds no records: nothing to read (the sweep that wrote it "
                         f"finished no size; status {doc.get('status')!r})")
    if not part.figures:
        raise no_figures(path, part.count)
    doc["results"] = part.kept
    return doc


class _Part:
    """What the records of one part of a document gave: the reader's figures, the records
    it did not take, the checker's identity hashes, how many records (first: the index of
    the part's first record in the document)."""

    def __init__(self, path: str, doc: dict[str, Any], reader: Any, first: int = 0) -> None:
        self.path, self.doc, self.reader = path, doc, reader
        self.checker = RecordChecker(doc, path, keys=array("q"))
        self.kept: list[dict[str, Any]] = []
        self.taken, self.first, self.count = 0, first, 0
        self.kept_bytes = 0
        self.figures = False        # a record with a measured figure was read

    def read(self, blocks: Iterable[tuple[bytes, bytes]]) -> _Part:
        try:
            return self._read(blocks)
        except NotInLayout as exc:
            exc.after = self.first + self.count
            raise

    def _read(self, blocks: Iterable[tuple[bytes, bytes]]) -> _Part:
        take, take_columns = self.reader.take, getattr(self.reader, "take_columns", None)
        path, kept = self.path, self.kept
        for recs, size in _chunks(blocks, path, self.first):
            i = self.first + self.count
            _check_schema(self.doc, recs, i, path)
            if not self.figures:
                self.figures = any(map(has_figure, recs))
            cols = columns(recs)
            self.checker.check_batch(i, recs, cols)
            self.count += len(recs)
            if cols is not None and take_columns is not None and take_columns(recs, cols):
                self.taken += len(recs)
            else:
                before = len(kept)
                for rec in recs:
                    if take(rec):
                        self.taken += 1
                    else:
                        kept.append(rec)
                if len(kept) > MAX_KEPT:
                    raise _too_many(path, f"more than {MAX_KEPT:,} records that are not plain pair records")
                # what is kept, in bytes: its share of the batch's text
                self.kept_bytes += size * (len(kept) - before) // max(1, len(recs))
                if self.kept_bytes > MAX_KEPT_BYTES:
                    raise _too_many(path, f"more than {MAX_KEPT_BYTES >> 20} MiB of records that are not plain "
                                          "pair records")
            if self.taken > MAX_TAKEN:
                raise _too_many(path, f"more than {MAX_TAKEN:,} pair records")
        return self

    def join(self, later: _Part) -> _Part:
        """This part followed by a later one (read in another process)."""
        self.reader.merge(later.reader)
        self.kept += later.kept
        self.checker.keys += later.checker.keys
        self.taken += later.taken
        self.count += later.count
        self.kept_bytes += later.kept_bytes
        self.figures = self.figures or later.figures
        if len(self.kept) > MAX_KEPT:
            raise _too_many(self.path, f"more than {MAX_KEPT:,} records that are not plain pair records")
        if self.kept_bytes > MAX_KEPT_BYTES:
            raise _too_many(self.path, f"more than {MAX_KEPT_BYTES >> 20} MiB of records that are not plain "
                                       "pair records")
        if self.taken > MAX_TAKEN:
            raise _too_many(self.path, f"more than {MAX_TAKEN:,} pair records")
        return self


def _read_halves(path: str, doc: dict[str, Any], records: _Records, reader: Any, cut: int) -> _Part:
    """The first half read here while a forked process reads the second; its part comes
    back pickled. Where the second half holds an error, it is read again here after the
    first, so the error names the record by its index in the document, as read in order."""
    rfd: int | None
    pid: int | None
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the second half's process
        os.close(rfd)
        code = 0
        try:
            part = _Part(path, doc, reader).read(records.blocks(start=cut))
            part.path = part.doc = part.checker.path = None  # type: ignore[assignment]
            out = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # noqa: BLE001 - said again by the reader in order
            out, code = b"", 1
        with os.fdopen(wfd, "wb") as w:
            w.write(out)
        os._exit(code)
    os.close(wfd)
    try:
        first = _Part(path, doc, reader).read(records.blocks(stop=cut))
        with os.fdopen(rfd, "rb") as r:
            rfd = None
            data = r.read()
        _, status = os.waitpid(pid, 0)
        pid = None
    finally:
        if rfd is not None:
            os.close(rfd)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if status != 0 or not data:     # the second half again, here, after the first: as read in order
        return first.read(records.blocks(start=cut))
    second: _Part = pickle.loads(data)
    return first.join(second)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def columns(recs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """{key: tuple of the records' values} where every record holds the same keys (two or
    more), else None."""
    if not recs or type(recs[0]) is not dict or len(recs[0]) < 2:
        return None
    keys = tuple(recs[0])
    try:
        rows = list(map(itemgetter(*keys), recs))
    except (KeyError, TypeError):
        return None
    if set(map(len, recs)) != {len(keys)}:
        return None
    return dict(zip(keys, zip(*rows)))


def _too_many(path: str, what: str) -> UsageError:
    return UsageError(f"'{path}' holds {what}: more than comm-bench keeps in memory; split the "
                      "run's records into several documents")


def _source(path: str, stream_from: int) -> tuple[dict[str, Any], _Records] | None:
    """(header, _Records) of a document to stream, or None: read it whole."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None         # load refuses it, without opening a FIFO that would block
    size = st.st_size
    head = _header(path) if size >= stream_from else None
    if head is not None or size > 1 << 20:
        return head
    with open(path, "rb") as f:
        text = f.read()
    if b'"records_file"' not in text:
        return None
    # the sweep's --records jsonl: a small header, and its records beside it
    doc = _loads(text, path)
    if not isinstance(doc, dict) or doc.get("results") != [] or doc.get(stream.KEY) is None:
        return None
    jsonl = stream.side_path(doc, path)          # a name with a folder part or a NUL byte: refused
    fd = stream.open_regular(jsonl, path)        # a folder, FIFO, socket, device: refused at once
    try:
        if os.fstat(fd).st_size < stream_from:
            return None                          # small: load reads it whole, with the same checks
    finally:
        os.close(fd)
    return doc, _Records(jsonl, 0, jsonl=True, doc=doc, of=path)


def _header(path: str) -> tuple[dict[str, Any], _Records] | None:
    """(header, _Records) of a document in the sweep's layout, or None (read it whole)."""
    try:
        f = open(path, "rb")
    except OSError:
        return None
    head: list[bytes] = []
    size, found = 0, False
    for line in f:
        if line.rstrip(b"\r\n") == _RESULTS:
            found = True
            break
        head.append(line)
        size += len(line)
        if size > MAX_HEADER:
            break
    if not found:
        f.close()
        # not our layout: a header-only records_file document is small; any other is read whole
        return None
    text = b"".join(head).rstrip()
    if not text.endswith(b","):
        f.close()
        return None
    try:
        doc = _loads(text[:-1] + b"\n}", path)
    except UsageError:
        doc = None          # load says what is wrong with it
    if not isinstance(doc, dict):
        f.close()
        return None
    start = f.tell()
    f.close()
    return doc, _Records(path, start, jsonl=False, doc=doc, of=path)


class _Records:
    """Where a document's record lines lie: a file from byte `start` on, in the sweep's
    layout (each line ends in a comma, then the closing ']}') or JSON Lines (a records_file;
    a torn last line is dropped as stream.records does)."""

    def __init__(self, path: str, start: int, jsonl: bool, doc: dict[str, Any], of: str) -> None:
        self.path, self.start, self.jsonl, self.doc, self.of = path, start, jsonl, doc, of
        fd = self._open()
        self.size = os.fstat(fd).st_size - start
        os.close(fd)

    def _open(self) -> int:
        """Only a regular file is read (a FIFO put in its place is refused, never waited on)."""
        return stream.open_regular(self.path, self.of)

    def middle(self) -> int | None:
        """The start of the first line after the middle of the records, or None."""
        with open(self.path, "rb") as f:
            f.seek(self.start + self.size // 2)
            f.readline()
            at = f.tell()
        return at if self.start < at < self.start + self.size else None

    def blocks(self, start: int | None = None, stop: int | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Blocks of whole record lines from byte start (a line's start) up to stop (the last
        part reads to the end): (the records joined as JSON array items, the block's text)."""
        fd = self._open()
        with os.fdopen(fd, "rb") as f:
            f.seek(self.start if start is None else start)
            left = None if stop is None else stop - f.tell()
            rest = b""
            while True:
                data = f.read(CHUNK if left is None else min(CHUNK, left))
                if left is not None:
                    left -= len(data)
                text = rest + data
                cut = text.rfind(b"\n") + 1 if data else len(text)
                text, rest = text[:cut], text[cut:]
                if len(rest) > stream.MAX_LINE:     # one line past the bound: refused, not gathered
                    raise stream.too_long(self.of, os.path.basename(self.path),
                                          f"from byte {f.tell() - len(rest)}")
                if self.jsonl:
                    if not data and stop is None and text and not text.endswith(b"\n"):
                        text = self._torn(text)
                else:
                    end = _closing(text)
                    if end >= 0:
                        tail = text[end:] + rest + (f.read(64) if stop is None else b"x")
                        if b"".join(tail.split()) != b"]}":
                            raise NotInLayout(f"'{self.of}' is not valid JSON after its records (got "
                                              f"{tail.strip()[:40]!r})")
                        if text[:end].strip():
                            yield _block(text[:end], jsonl=False)
                        return
                if text.strip():
                    yield _block(text, self.jsonl)
                if not data:
                    break
        if not self.jsonl and stop is None:
            raise NotInLayout(f"'{self.of}' is not valid JSON: it ends before its records' closing ']}}' "
                              "(a copy cut short?)")

    def _torn(self, text: bytes) -> bytes:
        last = text.rfind(b"\n") + 1
        try:
            json.loads(text[last:])
        except (ValueError, RecursionError):
            self.doc["records_dropped"] = 1
            return text[:last]
        return text


_CLOSING = re.compile(rb"^[ \t\r\x0b\x0c]*\]", re.MULTILINE)


def _closing(text: bytes) -> int:
    """Where the line that closes the records (']' first on its line) starts, or -1. One
    pass over the text (a line of many ']' was quadratic, looking back for each)."""
    m = _CLOSING.search(text)
    return -1 if m is None else m.start()


def _block(text: bytes, jsonl: bool) -> tuple[bytes, bytes]:
    """(the block's records as JSON array items, its text): the sweep's lines end in a
    comma, JSON Lines do not."""
    body = text.strip()
    if jsonl:
        body = body.replace(b"\n", b",")
    elif body.endswith(b","):
        body = body[:-1]
    return body, text


def _block_lines(text: bytes) -> list[bytes]:
    """A block's record lines, each without its trailing comma, blank lines left out."""
    lines = (line.strip() for line in text.split(b"\n"))
    return [s[:-1] if s.endswith(b",") else s for s in lines if s]


def _chunks(blocks: Iterable[tuple[bytes, bytes]], path: str, first: int = 0) -> Iterator[tuple[list[Any], int]]:
    """Lists of parsed records, one a block (~CHUNK bytes of text); first: the index of the
    first record in the document."""
    for body, text in blocks:
        recs = _parse(body, text, first, path)
        first += len(recs)
        yield recs, len(text)


def _parse(body: bytes, text: bytes, first: int, path: str) -> list[Any]:
    """One parse for a block of record lines. The fast parse runs with no hooks: where the
    text holds what load's hooks refuse, or more keys than the parsed objects (a key given
    twice), the block is parsed again with load's hooks, line by line, so the error is
    load's and names the record."""
    items = b"[" + body + b"]"
    shape = items.translate(_SHAPE)
    if not any(s in shape for s in _SLOW_SHAPES) and not any(s in items for s in _SLOW):
        try:
            recs = _fast_loads(items)
        except (ValueError, RecursionError):
            recs = None
        try:
            if type(recs) is list and items.count(b'":') == _keys(recs):
                return printable(recs) if may_hold_unprintable(items) else recs
        except TypeError:       # not an object where the schema has one: the slow parse says so
            pass
    return [_loads(line, path, f"record {first + k}") for k, line in enumerate(_block_lines(text))]


def _keys(recs: list[dict[str, Any]]) -> int:
    """How many keys the records hold, their objects within objects too, counted at C
    speed along the paths where the schema has objects; a key elsewhere (or a path that is
    not an object) makes the count differ from the text's, and the batch is parsed again."""
    n = sum(map(len, recs))
    for path in _OBJECTS:
        objs = recs
        for key in path:
            objs = list(filter(None, map(dict.get, objs, repeat(key))))
        n += sum(map(len, objs))
    return n


def _loads(text: bytes, path: str, where: str | None = None) -> Any:
    try:
        return loads_json(text.decode("utf-8"), "results file", path, walk=where is None,
                          parse_constant=D._not_a_number, parse_float=D._float,
                          object_pairs_hook=D._no_repeated_keys(path))
    except (ValueError, UnicodeDecodeError) as exc:
        at = f" at {where}" if where else ""
        raise (NotInLayout if where else UsageError)(
            f"'{path}' is not valid JSON{at} ({type(exc).__name__}: {str(exc).splitlines()[0][:80]}); "
            "is it a comm-bench results file?") from None


@functools.lru_cache(maxsize=1)
def _records_schema() -> Any:
    """The schema's record definition, for a list of records (jsonschema_rs; None without it)."""
    try:
        import jsonschema_rs
    except ImportError:
        return None
    with open(D.SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)
    return jsonschema_rs.validator_for({"type": "array", "items": {"$ref": "#/definitions/record"},
                                        "definitions": schema["definitions"]})


def _check_schema(doc: dict[str, Any], recs: list[dict[str, Any]], first: int, path: str) -> None:
    """The schema's verdict on a batch of records; its first error names the record."""
    fast = _records_schema()
    if fast is not None and fast.is_valid(recs):
        return
    D.explain_schema_error(dict(doc, results=recs), path, D._fast_schema_check(), offset=first)
