"""A large results document read record by record, never whole: memory grows with what the
reader keeps, not with the file (a 1,024-node pairwise run of 2 sizes is 2 million records,
over 1 GB; json.load of it took 4.4 GiB).

    doc, streamed = read(path, consume)   # consume(header) -> take(rec) -> True when it kept
                                  # the record's figures itself; the others stay in doc["results"]
                                  # (streamed False: read whole, every record in doc["results"]:
                                  # a small document, consume gave None, or not one record a line)

Every record is checked as load() checks it (the schema, then RecordChecker) before take
sees it, so a hostile figure is one line and exit 2 here too. Documents below STREAM_FROM,
or not in the layout the sweep writes (the header, then one record per line), are read
whole by load() as before; a records_file document's JSON Lines are streamed the same way.
"""
from __future__ import annotations

import functools
import json
import os
import stat
from array import array
from itertools import repeat

from ..errors import UsageError
from .doclimits import loads_json
from .record_checks import RecordChecker
from .safefile import MAX_READ
from . import document as D
from . import stream

STREAM_FROM = 64 << 20      # bytes: a document this large is streamed (whole, it takes ~6x)
MAX_KEPT = 200_000          # records kept whole (~1.5 KB each): confirm, collective, latency...
MAX_TAKEN = 16_000_000      # records a reader keeps the figures of (~40 bytes each)
MAX_HEADER = 64 << 20      # bytes before the records: hosts and their topology snapshots
CHUNK = 4 << 20             # bytes parsed per json.loads: one call per ~10,000 records
_RESULTS = b' "results": ['
# text the fast parse cannot take as it is: non-finite figures and long integers (load's
# hooks refuse them), and a space before a key's colon (it would hide a repeated key)
_SLOW = (b"NaN", b"Infinity", b'" :', b'"\t:', b'"\n:', b'"\r:')
_OBJECTS = (("extra",), ("extra", "buffer"), ("extra", "per_direction_gbps"), ("latency_us",), ("confirm",),
            ("confirm", "target"))     # where a record holds objects (the schema's record)
_DIGITS = bytes(48 if 48 <= c <= 57 else 46 for c in range(256))      # digits -> "0", the rest "."


def read(path: str, consume, stream_from: int | None = None):
    """(doc, streamed): the document's header with doc["results"] = the records take did
    not keep; streamed False where it was read whole (every record in doc["results"])."""
    stream_from = STREAM_FROM if stream_from is None else stream_from
    head = _source(path, stream_from)
    if head is None:
        return D.load_measured(path), False     # consume is not called: every record is kept
    doc, lines = head
    D.check_document(dict(doc, results=[]), path)
    take = consume(doc)
    if take is None:                        # the reader needs every record: read whole
        return D.load_measured(path), False
    try:
        return _stream(path, doc, lines, take), True
    except NotInLayout:
        # not one record per line after all (a pretty-printed document): read whole as
        # before where it is small enough, so load says what is wrong with it, if anything
        if os.stat(path).st_size > MAX_READ:
            raise
        return D.load_measured(path), False


class NotInLayout(UsageError):
    """The text after the header is not one JSON record per line."""


def _stream(path, doc, lines, take):
    checker = RecordChecker(doc, path, keys=array("q"))
    kept, taken, i = [], 0, 0
    with D.collector_paused():
        for recs in _chunks(lines, path):
            _check_schema(doc, recs, i, path)
            for rec in recs:
                checker.check(i, rec)
                i += 1
                if take(rec):
                    taken += 1
                    if taken > MAX_TAKEN:
                        raise _too_many(path, f"more than {MAX_TAKEN:,} pair records")
                else:
                    kept.append(rec)
                    if len(kept) > MAX_KEPT:
                        raise _too_many(path, f"more than {MAX_KEPT:,} records that are not plain pair records")
        checker.check_repeats()
    if not i:
        raise UsageError(f"'{path}' holds no records: nothing to read (the sweep that wrote it "
                         f"finished no size; status {doc.get('status')!r})")
    doc["results"] = kept
    return doc


def _too_many(path, what):
    return UsageError(f"'{path}' holds {what}: more than comm-bench keeps in memory; split the "
                      "run's records into several documents")


def _source(path, stream_from):
    """(header, record lines) of a document to stream, or None: read it whole."""
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
    if not isinstance(doc, dict) or doc.get("results") != [] or not isinstance(doc.get(stream.KEY), str):
        return None
    try:
        jsonl = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(doc[stream.KEY]))
        if os.stat(jsonl).st_size < stream_from:
            return None
    except OSError:
        return None
    return doc, _jsonl_lines(doc, path)


def _header(path):
    """(header, record lines) of a document in the sweep's layout, or None (read it whole)."""
    try:
        f = open(path, "rb")
    except OSError:
        return None
    head, size, found = [], 0, False
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
    return doc, _record_lines(f)


def _record_lines(f):
    """The record lines after the header, up to the closing ']}'."""
    with f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith(b"]"):
                rest = s + f.read(64)
                if rest.replace(b" ", b"").replace(b"\n", b"") != b"]}":
                    raise NotInLayout(f"'{f.name}' is not valid JSON after its records (got {rest[:40]!r})")
                return
            yield s[:-1] if s.endswith(b",") else s
    raise NotInLayout(f"'{f.name}' is not valid JSON: it ends before its records' closing ']}}' "
                     "(a copy cut short?)")


def _jsonl_lines(doc, path):
    """A records_file document's JSON Lines; a torn last line is dropped as stream.records does."""
    name = doc.get(stream.KEY)
    stream.check_name(name, path)
    full = os.path.join(os.path.dirname(os.path.abspath(path)), name)
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"'{path}': its records file '{name}': {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                try:
                    json.loads(line)
                except ValueError:
                    doc["records_dropped"] = 1
                    return
            yield line.strip()


def _chunks(lines, path):
    """Lists of parsed records, ~CHUNK bytes of text each."""
    batch, size, first = [], 0, 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size >= CHUNK:
            yield _parse(batch, first, path)
            first += len(batch)
            batch, size = [], 0
    if batch:
        yield _parse(batch, first, path)


def _parse(batch, first, path):
    """One json.loads for a batch of record lines. The fast parse runs with no hooks: where
    the text holds what load's hooks refuse, or more keys than the parsed objects (a key
    given twice), the batch is parsed again with load's hooks, line by line, so the error is
    load's and names the record."""
    text = b"[" + b",".join(batch) + b"]"
    if not any(s in text for s in _SLOW) and b"0" * 20 not in text.translate(_DIGITS):
        try:
            recs = json.loads(text)
        except (ValueError, RecursionError):
            recs = None
        try:
            if recs is not None and text.count(b'":') == _keys(recs):
                return recs
        except TypeError:       # not an object where the schema has one: the slow parse says so
            pass
    return [_loads(line, path, f"record {first + k}") for k, line in enumerate(batch)]


def _keys(recs):
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


def _loads(text, path, where=None):
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
def _records_schema():
    """The schema's record definition, for a list of records (jsonschema_rs; None without it)."""
    try:
        import jsonschema_rs
    except ImportError:
        return None
    with open(D.SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)
    return jsonschema_rs.validator_for({"type": "array", "items": {"$ref": "#/definitions/record"},
                                        "definitions": schema["definitions"]})


def _check_schema(doc, recs, first, path):
    """The schema's verdict on a batch of records; its first error names the record."""
    fast = _records_schema()
    if fast is not None and fast.is_valid(recs):
        return
    D.explain_schema_error(dict(doc, results=recs), path, D._fast_schema_check(), offset=first)
