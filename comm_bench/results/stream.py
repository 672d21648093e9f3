"""Records streamed to a JSON Lines file beside the document, for runs too large to
rewrite whole after each round (a 4,096-node run): the document holds the header and
"records_file": the basename of the .jsonl beside it, and "results": [] (schema 1 still
reads it). Lines are only ever appended; a crash loses at most the line being written,
and a torn last line is dropped on reading (said in "records_dropped").

    stream = RecordStream(doc_path)      # creates DOC.records.jsonl (O_EXCL|O_NOFOLLOW)
    stream.append(records); stream.close()
    records(doc, doc_path)               # readers: one line at a time, never the whole text

The sweep's writer for such runs is results.StreamingWriter.
"""
from __future__ import annotations

import json
import os

from ..errors import UsageError

KEY = "records_file"
SUFFIX = ".records.jsonl"


def records_path(doc_path: str) -> str:
    base = doc_path[:-5] if doc_path.endswith(".json") else doc_path
    return base + SUFFIX


class RecordStream:
    def __init__(self, doc_path: str, force: bool = False):
        self.path = records_path(doc_path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        if force:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        try:
            self._fd = os.open(self.path, flags | os.O_EXCL, 0o666)
        except FileExistsError:
            raise UsageError(f"'{self.path}' exists: remove it, or give --force") from None
        except OSError as exc:
            raise UsageError(f"cannot write '{self.path}': {exc.strerror}") from None
        self.count = 0

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def append(self, recs) -> None:
        self.append_lines([json.dumps(r, separators=(",", ":")) for r in recs])

    def append_lines(self, lines) -> None:
        data = "".join(line + "\n" for line in lines).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        self.count += len(lines)

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None


def check_name(name, doc_path: str) -> None:
    """UsageError unless records_file is a plain file name (the file beside the document)."""
    if not isinstance(name, str) or not name or os.path.basename(name) != name or name in (".", ".."):
        raise UsageError(f"'{doc_path}': {KEY} must name a file beside the document (got {name!r})")


def records(doc: dict, doc_path: str, parse_float=float, parse_constant=None) -> list:
    """The document's records from its JSON Lines file, read line by line. UsageError if
    the name is not a plain file name beside the document, or a line (other than a
    torn last one) is not a JSON object."""
    name = doc.get(KEY)
    check_name(name, doc_path)
    path = os.path.join(os.path.dirname(os.path.abspath(doc_path)), name)
    out, dropped = [], 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"'{doc_path}': its records file '{name}': {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        for i, line in enumerate(f, 1):
            try:
                rec = json.loads(line, parse_float=parse_float, parse_constant=parse_constant)
            except ValueError:
                if line.endswith(b"\n"):
                    raise UsageError(f"'{name}' line {i} is not JSON: the records file is damaged") from None
                dropped += 1        # a torn last line: the writer died while writing it
                continue
            out.append(rec)
    if dropped:
        doc["records_dropped"] = dropped
    return out
