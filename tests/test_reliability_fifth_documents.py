"""Reliability, fifth pass (issue 44): the `--records jsonl` side file gets the checks the
inline document gets, in every reader and in `sweep --resume`; integers are integers; names
are printed as text. Each case through the real CLI on a small crafted document: one line,
exit 2 (never 70, never a hang), or, for names, output escaped."""
import copy
import json
import os
import time

import pytest

from cbtest import assert_no_traceback, run_cli
from test_hostile_figures import base

READERS = {"validate": ["validate", "r.json"], "report": ["report", "r.json"],
           "heatmap": ["heatmap", "r.json", "-o", "x.png"], "compare": ["compare", "r.json", "r.json"],
           "plot": ["plot", "r.json", "-o", "p.png"]}
RESUME = ["sweep", "-t", "tcp", "-N", "2", "--pattern", "pairwise", "-b", "1K", "-e", "4K", "-n", "2",
          "--no-progress", "--resume", "-o", "r.json"]


def doc6():
    doc = base()
    doc["world_size"] = 6
    return doc


def side_file(tmp_path, doc, lines=None, name="r.records.jsonl"):
    """The document as `sweep --records jsonl` writes it: a header naming `name`, the records
    one a line in that file (lines: the file's lines instead; None name: no file made)."""
    head = dict(doc, results=[], records_file=name)
    (tmp_path / "r.json").write_text(json.dumps(head, indent=1))
    if lines is None:
        lines = [json.dumps(r) for r in doc["results"]]
    if name is not None and "\0" not in name:
        (tmp_path / name).write_text("".join(line + "\n" for line in lines))
    return tmp_path / "r.json"


def refused(proc, *words):
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-600:])
    assert_no_traceback(proc)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr[-2000:]
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def record_lines(doc):
    return [json.dumps(r) for r in doc["results"]]


def deep(tmp_path):
    doc = doc6()
    lines = record_lines(doc)
    return side_file(tmp_path, doc, lines[:-1] + ['{"op": ' + "[" * 100_000 + "]" * 100_000 + "}"])


def digits_400(tmp_path):
    doc = doc6()
    lines = record_lines(doc)
    size = doc["results"][3]["size"]
    lines[3] = lines[3].replace(f'"size": {size}', '"size": 1' + "0" * 400)
    return side_file(tmp_path, doc, lines)


def folder(tmp_path):
    path = side_file(tmp_path, doc6(), name=None)
    json.loads(path.read_text())
    head = json.loads(path.read_text())
    head["records_file"] = "adir"
    path.write_text(json.dumps(head))
    (tmp_path / "adir").mkdir()
    return path


def nul_name(tmp_path):
    return side_file(tmp_path, doc6(), name="r\0.jsonl")


def fifo(tmp_path):
    path = side_file(tmp_path, doc6(), name=None)
    head = json.loads(path.read_text())
    head["records_file"] = "pipe"
    path.write_text(json.dumps(head))
    os.mkfifo(tmp_path / "pipe")
    return path


def float_field(key, value, which=0):
    def make(tmp_path):
        doc = doc6()
        doc["results"][which][key] = value
        return side_file(tmp_path, doc)
    return make


def float_world_size(value):
    def make(tmp_path):
        return side_file(tmp_path, dict(doc6(), world_size=value))
    return make


def rank_beyond(tmp_path):
    doc = doc6()
    doc["ranks"][0]["rank"] = 17
    return side_file(tmp_path, doc)


def long_line(tmp_path):
    """One record line of 2 MiB (a host name): past the 1 MiB a record line may hold."""
    doc = doc6()
    doc["results"][2]["src_host"] = "h" * (2 << 20)
    return side_file(tmp_path, doc)


def pair_kind_rank_target(tmp_path):
    """A confirm record of kind "pair" whose target names a rank (KeyError 'src' in validate)."""
    doc = doc6()
    rec = next(r for r in doc["results"] if "confirm" in r)
    rec["confirm"] = dict(rec["confirm"], kind="pair", target={"rank": 4})
    return side_file(tmp_path, doc)


# (name, how the files are made, what the one line names)
CASES = [
    ("nested-100k", deep, "too deeply"),
    ("size-400-digits", digits_400, "401 digits"),
    ("records-file-a-folder", folder, "is a folder"),
    ("records-file-name-with-nul", nul_name, "must name a file"),
    ("records-file-a-fifo", fifo, "is a FIFO"),
    ("size-3.0", float_field("size", 1048576.0), "results[0].size) is 1048576.0, not a whole number"),
    ("src-3.0", float_field("src", 3.0), "results[0].src) is 3.0, not a whole number"),
    ("dst-1e300", float_field("dst", 1e300), "results[0].dst) is 1e+300, not a whole number"),
    ("world-size-6.0", float_world_size(6.0), "world_size is 6.0, not a whole number"),
    ("world-size-1e300", float_world_size(1e300), "world_size is 1e+300"),
    ("rank-beyond-world-size", rank_beyond, "'ranks' lists rank 17, but the run had 6 rank(s)"),
    ("record-line-of-2-MiB", long_line, "longer than 1 MiB"),
    ("pair-confirm-naming-a-rank", pair_kind_rank_target, "of kind 'pair'"),
]


@pytest.mark.parametrize("name, make, words", CASES, ids=[c[0] for c in CASES])
def test_the_side_file_gets_the_documents_checks_in_every_reader(tmp_path, name, make, words):
    make(tmp_path)
    for reader, args in READERS.items():
        started = time.monotonic()
        proc = run_cli(*args, cwd=tmp_path, timeout=60)
        refused(proc, words)
        assert time.monotonic() - started < 20, (reader, "not refused at once")
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "p.png").exists()


def test_the_control_side_file_is_read_by_every_reader(tmp_path):
    side_file(tmp_path, doc6())
    for reader, args in READERS.items():
        proc = run_cli(*args, cwd=tmp_path, timeout=60)
        assert proc.returncode in (0, 1), (reader, proc.returncode, proc.stderr[-600:])


RESUME_CASES = ["nested-100k", "size-400-digits", "records-file-a-fifo", "records-file-a-folder",
                "records-file-name-with-nul", "src-3.0", "world-size-6.0", "rank-beyond-world-size"]


@pytest.mark.parametrize("name", RESUME_CASES)
def test_sweep_resume_refuses_the_side_file_and_keeps_it(tmp_path, name):
    """`sweep --resume` reads the earlier document through the same functions: exit 2, one
    line, before any rank starts; neither file is changed (before: a 400-digit size was
    accepted and the file rewritten into one every reader refuses; a FIFO hung)."""
    _, make, words = next(c for c in CASES if c[0] == name)
    make(tmp_path)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and not p.is_fifo()}
    started = time.monotonic()
    refused(run_cli(*RESUME, cwd=tmp_path, timeout=60), words)
    assert time.monotonic() - started < 20
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and not p.is_fifo()} == files


def hostile_host(doc, name):
    """Host node004 renamed `name` everywhere the document names it."""
    doc = copy.deepcopy(doc)
    for r in doc["results"]:
        for k in ("src_host", "dst_host"):
            if r.get(k) == "node004":
                r[k] = name
    for r in doc["ranks"] + doc["hosts"]:
        if r.get("host") == "node004":
            r["host"] = name
    return doc


OSC52 = "evil\x1b]52;c;cm0gLXJmIH4K\x07\x9b2J"


@pytest.mark.parametrize("layout", ["inline", "jsonl"])
@pytest.mark.parametrize("name, shown", [(OSC52, "evil\\u001b]52;c;cm0gLXJmIH4K\\u0007\\u009b2J"),
                                         ("node\ud800", "node\\ud800"), ("node\u202eexe.txt", "node\\u202eexe.txt")])
def test_names_are_printed_escaped_in_every_reader(tmp_path, layout, name, shown):
    """A host name holding an OSC 52 clipboard write, a lone surrogate or a right-to-left
    override: printed as its escape text in every reader's output and files (before: raw
    escape sequences from validate, exit 70 in heatmap and plot for a surrogate)."""
    doc = hostile_host(doc6(), name)
    if layout == "jsonl":
        side_file(tmp_path, doc)
    else:
        (tmp_path / "r.json").write_text(json.dumps(doc))
    for reader, args in {**READERS, "report --html": ["report", "r.json", "--html", "r.html"],
                         "heatmap html": ["heatmap", "r.json", "-o", "h.html"],
                         "prometheus": ["report", "r.json", "--prometheus", "m.prom"]}.items():
        proc = run_cli(*args, cwd=tmp_path, timeout=60)
        assert proc.returncode in (0, 1), (reader, proc.returncode, proc.stderr[-600:])
        assert_no_traceback(proc)
        out = proc.stdout + proc.stderr
        assert name not in out and "\x1b" not in out and "\x07" not in out, (reader, out[-600:])
    validate = run_cli("validate", "r.json", cwd=tmp_path, timeout=60)
    assert shown in validate.stdout, validate.stdout
    for f in ("r.html", "h.html", "m.prom"):
        text = (tmp_path / f).read_bytes()
        assert b"\x1b" not in text and b"\xed\xa0\x80" not in text, f


# ------------------------------------------------------------------ no data still passes
def no_figures(doc):
    """Every rate and latency null (time_us, which the schema requires, stays)."""
    doc = copy.deepcopy(doc)
    for r in doc["results"]:
        for k in ("busbw", "algbw", "bw_peak"):
            if k in r:
                r[k] = None
        r.pop("latency_us", None)
    return doc


@pytest.mark.parametrize("layout", ["inline", "jsonl"])
def test_a_document_with_no_figures_is_refused_by_every_reader(tmp_path, layout):
    """Before: heatmap wrote "0 panel(s)" (exit 0), compare said PASS against it, report and
    plot drew nothing with exit 0."""
    doc = no_figures(doc6())
    if layout == "jsonl":
        side_file(tmp_path, doc)
    else:
        (tmp_path / "r.json").write_text(json.dumps(doc))
    (tmp_path / "good.json").write_text(json.dumps(doc6()))
    wrong = {}
    for reader, args in {**READERS, "compare with a good run": ["compare", "good.json", "r.json"],
                         "select": ["select", "r.json", "--gpu", "H100", "--params", "1.5B"]}.items():
        proc = run_cli(*args, cwd=tmp_path, timeout=60)
        try:
            refused(proc, "not one measured figure")
        except AssertionError:
            wrong[reader] = (proc.returncode, proc.stderr.strip()[-200:] or proc.stdout.strip()[-200:])
    assert not wrong, wrong
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "p.png").exists()


def test_a_streamed_document_with_no_figures_is_refused(tmp_path, monkeypatch):
    """The streamed read (validate and heatmap past 64 MiB) says the same."""
    from comm_bench.errors import UsageError
    from comm_bench.results import stream_read
    from comm_bench.validate.checks import read

    monkeypatch.setattr(stream_read, "STREAM_FROM", 0)
    monkeypatch.setattr(stream_read, "CHUNK", 2000)
    side_file(tmp_path, no_figures(doc6()))
    with pytest.raises(UsageError, match="not one measured figure"):
        read(str(tmp_path / "r.json"))


def test_runs_sharing_no_op_or_size_have_nothing_in_common(tmp_path):
    """compare's refusal (results.records.nothing_in_common): runs that share no op, mode and
    size with a figure are nothing to compare (compare said PASS): exit 2, one line."""
    from comm_bench.results.records import nothing_in_common

    a = doc6()
    b = copy.deepcopy(a)
    for r in b["results"]:
        r["op"], r["size"] = "all_gather", r["size"] * 3
    line = nothing_in_common([("a.json", a), ("b.json", b)])
    assert "'b.json' shares no op, mode and size with 'a.json'" in line and "all_gather" in line
    assert nothing_in_common([("a.json", a), ("a2.json", copy.deepcopy(a))]) is None
    assert nothing_in_common([("a.json", a), ("n.json", no_figures(a))]) is not None
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    p = run_cli("compare", tmp_path / "a.json", tmp_path / "b.json")
    assert p.returncode == 2 and "shares no op, mode and size" in p.stderr and "Traceback" not in p.stderr, p
