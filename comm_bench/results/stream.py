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

import errno
import json
import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import RunFailed, UsageError
from .doclimits import json_int, may_hold_unprintable, printable
from .safefile import MAX_READ, disk_full_error

if TYPE_CHECKING:
    from .safefile import Target

KEY = "records_file"
SUFFIX = ".records.jsonl"
MAX_LINE = 1 << 20      # bytes of one record line (a record is ~1.5 KB): a longer one is refused
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def records_path(doc_path: str) -> str:
    base = doc_path[:-5] if doc_path.endswith(".json") else doc_path
    return base + SUFFIX


class RecordStream:
    def __init__(self, doc_path: str, force: bool = False) -> None:
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
        self._size = 0      # bytes of whole lines written: a failed append is cut back to it

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def append(self, recs: list[dict[str, Any]]) -> None:
        self.append_lines([json.dumps(r, separators=(",", ":")) for r in recs])

    def append_lines(self, lines: list[str]) -> None:
        data = "".join(line + "\n" for line in lines).encode()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            # a full disk (or quota) mid-line: cut the torn line off (freeing its blocks for the
            # header's last word), then one line naming the file system (exit 1, never 70)
            try:
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass
            kept = f"the records file keeps the {self.count} record(s) written before"
            raise disk_full_error(self.path, exc, kept) or \
                RunFailed(f"cannot write records to '{self.path}': {exc.strerror}; {kept}") from None
        self._size += len(data)
        self.count += len(lines)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None  # type: ignore[assignment]
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


HEADER_SLACK = 1024     # bytes a header is padded with (to a 4 KiB block): room to say "failed" in place


def write_header(target: Target, path: str, header: dict[str, Any], sync: bool = False) -> None:
    """A --records jsonl document's header, replaced atomically (target: its safefile.Target),
    padded with blanks to a whole 4 KiB block with HEADER_SLACK to spare. On a full disk
    (ENOSPC, EDQUOT) the atomic replacement has no room for its temporary: the header is
    then rewritten in place, within the blocks the file already holds, so a run the disk
    stopped is still marked failed; RunFailed naming the file system if even that cannot be."""
    text = json.dumps(header, indent=1).encode()
    size = -(-(len(text) + HEADER_SLACK) // 4096) * 4096
    data = text + b" " * (size - len(text) - 1) + b"\n"
    try:
        target.replace(data, sync=sync)
        return
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not _in_place(target, text):
            kept = "its records file keeps the records written before"
            raise disk_full_error(path, exc, kept) or \
                RunFailed(f"cannot write results to '{path}': {exc.strerror}; {kept}") from None


def _in_place(target: Target, text: bytes) -> bool:
    """`text` over the document's own bytes (no new block: nothing to allocate on a full
    disk), padded to the file's length; False where it does not fit or cannot be written."""
    try:
        fd = os.open(target.name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=target.dfd)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or len(text) + 1 > st.st_size:
            return False
        data = text + b" " * (st.st_size - len(text) - 1) + b"\n"
        view = memoryview(data)
        at = 0
        while at < len(data):
            at += os.pwrite(fd, view[at:], at)
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def check_name(name: Any, doc_path: str) -> None:
    """UsageError unless records_file is a plain file name (the file beside the document):
    no folder part, no NUL byte, text a file name can hold (no unpaired surrogate)."""
    ok = isinstance(name, str) and name and os.path.basename(name) == name and name not in (".", "..") \
        and "\0" not in name and len(name) <= 255
    try:
        ok = ok and len(name.encode("utf-8")) <= 255
    except UnicodeEncodeError:
        ok = False
    if not ok:
        shown = ascii(name[:77]) + ("..." if len(name) > 77 else "") if isinstance(name, str) else repr(name)
        raise UsageError(f"'{doc_path}': {KEY} must name a file beside the document (got {shown})")


def side_path(doc: dict[str, Any], doc_path: str) -> str:
    """The path of a document's records file (its name checked)."""
    name = doc.get(KEY)
    check_name(name, doc_path)
    return os.path.join(os.path.dirname(os.path.abspath(doc_path)), str(name))  # a str: checked


def open_regular(path: str, doc_path: str) -> int:
    """A descriptor of the records file `path`, opened only if it is a regular file: a folder,
    FIFO, socket, device or link is refused at once (O_NONBLOCK: a FIFO is never waited on)."""
    name = os.path.basename(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "a symbolic link (comm-bench reads a records file only as a regular file)" \
            if os.path.islink(path) else exc.strerror
        raise UsageError(f"'{doc_path}': its records file '{name}': {why}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
        raise UsageError(f"'{doc_path}': its records file '{name}' is {kind}, not a regular file: "
                         "give the records file the sweep wrote beside the document")
    os.set_blocking(fd, True)
    return fd


def too_long(doc_path: str, name: str, where: str) -> UsageError:
    return UsageError(f"'{doc_path}': its records file '{name}' holds a line longer than {MAX_LINE >> 20} MiB "
                      f"({where}): a record is a few KB; the file is damaged or not comm-bench's")


def records(doc: dict[str, Any], doc_path: str, parse_float: Callable[[str], Any] = float,
            parse_constant: Callable[[str], Any] | None = None,
            object_pairs_hook: Callable[[list[tuple[Any, Any]]], Any] | None = None) -> list[Any]:
    """The document's records from its JSON Lines file, read line by line, each parsed as an
    inline document is (load's hooks: no number past 19 digits, no key twice; nesting past
    the parser's limit refused). UsageError if the name is not a plain file name beside the
    document, the file is not a regular file, is larger than the whole-read limit (1 GiB),
    holds a line longer than MAX_LINE, or a line (other than a torn last one) is not JSON."""
    path = side_path(doc, doc_path)
    name = os.path.basename(path)
    out: list[Any] = []
    dropped = 0
    fd = open_regular(path, doc_path)
    with os.fdopen(fd, "rb") as f:
        if os.fstat(fd).st_size > MAX_READ:
            raise UsageError(f"'{doc_path}': its records file '{name}' is larger than {MAX_READ >> 20} MiB: "
                             "more than comm-bench reads whole (validate and heatmap stream it)")
        parse_int = json_int("records file", name)
        i = 0
        while True:
            line = f.readline(MAX_LINE + 1)
            if not line:
                break
            i += 1
            if len(line) > MAX_LINE:
                raise too_long(doc_path, name, f"line {i}")
            try:
                rec = json.loads(line, parse_float=parse_float, parse_constant=parse_constant,
                                 parse_int=parse_int, object_pairs_hook=object_pairs_hook)
            except RecursionError:
                raise UsageError(f"'{name}' line {i} nests lists or objects too deeply: the records file "
                                 "is damaged or not comm-bench's") from None
            except ValueError:
                if line.endswith(b"\n"):
                    raise UsageError(f"'{name}' line {i} is not JSON: the records file is damaged") from None
                dropped += 1        # a torn last line: the writer died while writing it
                continue
            if may_hold_unprintable(line):
                rec = printable(rec)
            out.append(rec)
            if not i % 65536 and f.tell() > MAX_READ:       # grown while read
                raise UsageError(f"'{doc_path}': its records file '{name}' is larger than {MAX_READ >> 20} MiB")
    if dropped:
        doc["records_dropped"] = dropped
    return out
