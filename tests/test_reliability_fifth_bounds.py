"""Reliability, fifth pass (issue 44): what a reader reads and keeps is bounded in bytes. A
record line has a stated maximum (1 MiB), the records a streamed reader keeps whole are
capped in bytes as well as in number, a side file read whole obeys the 1 GiB limit, finding
the records' closing bracket is one pass, and a damaged line in a streamed file is said at
once instead of reading the whole file again."""
import json
import time

import pytest

from cbtest import run_cli
from comm_bench.errors import UsageError
from comm_bench.results import stream_read
from comm_bench.results.document import render
from comm_bench.validate.checks import read
from test_hostile_figures import base
from test_reliability_fifth_documents import doc6, refused, side_file


@pytest.fixture
def streamed(monkeypatch):
    monkeypatch.setattr(stream_read, "STREAM_FROM", 0)
    monkeypatch.setattr(stream_read, "CHUNK", 1 << 16)
    monkeypatch.setattr(stream_read, "SPLIT_FROM", 1 << 62)


def never_whole(monkeypatch):
    def whole(*a, **k):
        raise AssertionError("read whole")
    monkeypatch.setattr(stream_read.D, "load_measured", whole)


@pytest.mark.parametrize("layout", ["jsonl", "inline"])
def test_a_record_line_past_1_mib_is_refused_at_once(tmp_path, streamed, monkeypatch, layout):
    """One 40 MB record line: refused after reading about a MiB of it (before: 300 MB took
    11.7 s and 1.85 GB, the buffer copied again every 4 MB)."""
    monkeypatch.setattr(stream_read, "CHUNK", 4 << 20)
    doc = doc6()
    doc["results"][5]["src_host"] = "h" * (40 << 20)
    if layout == "jsonl":
        side_file(tmp_path, doc)
    else:
        (tmp_path / "r.json").write_bytes(render(doc, [json.dumps(r) for r in doc["results"]]))
    never_whole(monkeypatch)
    started = time.monotonic()
    with pytest.raises(UsageError, match="longer than 1 MiB"):
        read(str(tmp_path / "r.json"))
    assert time.monotonic() - started < 3


def test_records_kept_whole_are_capped_in_bytes(tmp_path, streamed, monkeypatch):
    monkeypatch.setattr(stream_read, "MAX_KEPT_BYTES", 20_000)
    doc = base()
    doc["results"] = [dict(r, wrong=1) for r in doc["results"]]      # kept whole: named in findings
    side_file(tmp_path, doc)
    with pytest.raises(UsageError, match="more than 0 MiB of records that are not plain pair records"):
        read(str(tmp_path / "r.json"))


def test_a_side_file_past_1_gib_is_not_read_whole(tmp_path):
    """report and compare read a records file whole: past 1 GiB (the whole-read limit),
    refused at once (before: a 1.2 GiB side file was read whole). A sparse file: no disk."""
    side_file(tmp_path, doc6())
    with open(tmp_path / "r.records.jsonl", "r+b") as f:
        f.truncate((1 << 30) + 4096)
    for args in (["report", "r.json"], ["compare", "r.json", "r.json"]):
        started = time.monotonic()
        refused(run_cli(*args, cwd=tmp_path, timeout=60), "larger than 1024 MiB")
        assert time.monotonic() - started < 20


def test_finding_the_closing_bracket_is_one_pass():
    """300,000 ']' on one record line: each looked back to its line's start (quadratic)."""
    text = b'{"a": [' + b"[]," * 300_000 + b'[]]},\n  ]}\n'
    started = time.monotonic()
    assert stream_read._closing(text) == text.index(b"\n") + 1
    assert time.monotonic() - started < 0.5
    assert stream_read._closing(b"x\n \t]}\n") == 2 and stream_read._closing(b"x]\n") == -1


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_damaged_line_in_json_lines_does_not_switch_to_a_whole_read(tmp_path, streamed, monkeypatch, where):
    """A damaged line (ending in a newline: not a torn last line) in a streamed JSON Lines
    file is one line at once (before: validate read the whole file again, 131 MB to 780 MB)."""
    doc = doc6()
    lines = [json.dumps(r) for r in doc["results"]]
    at = len(lines) - 1 if where == "last" else len(lines) // 2
    lines[at] = lines[at][: len(lines[at]) // 2]
    side_file(tmp_path, doc, lines)
    never_whole(monkeypatch)
    with pytest.raises(UsageError, match="not valid JSON"):
        read(str(tmp_path / "r.json"))


def test_a_torn_last_line_is_still_dropped(tmp_path, streamed):
    """The writer died mid-line: the line is dropped and said, as before (also a deep one)."""
    doc = doc6()
    side_file(tmp_path, doc)
    with open(tmp_path / "r.records.jsonl", "ab") as f:
        f.write(b'{"op": ' + b"[" * 5000)
    head, _ = read(str(tmp_path / "r.json"))
    assert head.get("records_dropped") == 1
