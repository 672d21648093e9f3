"""Issue 31: every figure a document carries is checked before any reader uses it. Hostile
confirm-phase documents (ids of the wrong type, targets naming no rank of the run, latencies
that underflow or overflow, rates of 0, negative or subnormal) end as one line and exit 2
naming the record, never exit 70, never a finding about a rank that does not exist, never a
silent drop; `sweep --resume` refuses them before any rank starts. The control (the same
document unharmed) is read by every reader."""
import json

import pytest

from cbtest import assert_no_traceback, run_cli
from comm_bench.errors import UsageError
from comm_bench.results.document import load
from test_diagnose import _hosts_doc, _with_confirm
from test_heatmap import write


def base():
    """6 hosts, rank 4 at 80% and confirmed so (a finding), with per-iteration latencies."""
    doc = _with_confirm(_hosts_doc(lambda s, d, size, rnd: 45.0 * rnd.uniform(0.95, 1.05) * (0.8 if 4 in (s, d) else 1)),
                        4, 0.8)
    for r in doc["results"]:
        t = r["time_us"]
        r["latency_us"] = {"min": t * 0.9, "max": t * 1.2, "avg": t, "stdev": t * 0.05, "median": t,
                           "p99": t * 1.15, "p999": t * 1.2}
    return doc


def confirm_rec(doc):
    return next(r for r in doc["results"] if "confirm" in r)


def first_rec(doc):
    return next(r for r in doc["results"] if "confirm" not in r)


def _set(path, value, which=confirm_rec):
    def harm(doc):
        obj = which(doc)
        *head, last = path.split(".")
        for k in head:
            obj = obj[k]
        obj[last] = value
    return harm


# (name, how the document is harmed, what the one line must name)
CASES = [
    ("id-dict", _set("confirm.id", {"a": 1}), "confirm.id"),
    ("id-list", _set("confirm.id", [1, 2]), "confirm.id"),
    ("id-string", _set("confirm.id", "0"), "confirm.id"),
    ("id-negative", _set("confirm.id", -1), "confirm.id"),
    ("target-string", _set("confirm.target", "rank 4"), "confirm.target"),
    ("target-empty", _set("confirm.target", {}), "confirm.target"),
    ("target-list", _set("confirm.target", [4]), "confirm.target"),
    ("target-rank-99", _set("confirm.target", {"rank": 99}), "names rank 99"),
    ("target-rank-minus-1", _set("confirm.target", {"rank": -1}), "confirm.target"),
    ("target-pair-99", _set("confirm.target", {"src": 1, "dst": 99}), "names rank 99"),
    ("target-pair-self", _set("confirm.target", {"src": 1, "dst": 1}), "to itself"),
    ("target-rank-bool", _set("confirm.target", {"rank": True}), "confirm.target"),
    ("role-unknown", _set("confirm.role", "boss"), "confirm.role"),
    ("alt-string", _set("confirm.alt", "1"), "confirm.alt"),
    ("busbw-zero", _set("busbw", 0.0), "busbw"),
    ("busbw-negative", _set("busbw", -45.0), "busbw"),
    ("busbw-subnormal", _set("busbw", 5e-324), "busbw"),
    ("algbw-zero", _set("algbw", 0), "algbw"),
    ("busbw-absurd", _set("busbw", 1e300), "busbw"),
    ("first-pass-busbw-subnormal", _set("busbw", 5e-324, first_rec), "busbw"),
    ("first-pass-busbw-zero", _set("busbw", 0, first_rec), "busbw"),
    ("latency-max-underflow", _set("latency_us.max", 5e-324), "latency_us.max"),
    ("latency-median-huge", _set("latency_us.median", 1e308), "latency_us.median"),
    ("latency-exp-overflow", _set("latency_us.max", 1e300), "latency_us.max"),
    ("latency-min-zero", _set("latency_us.min", 0.0), "latency_us.min"),
    ("latency-min-negative", _set("latency_us.min", -3.0), "latency_us.min"),
    ("latency-max-below-median", _set("latency_us.max", 1.0), "not in that order"),
    ("latency-stdev-negative", _set("latency_us.stdev", -1.0), "latency_us.stdev"),
    ("time-zero", _set("time_us", 0.0), "time_us"),
    ("time-negative", _set("time_us", -5.0), "time_us"),
    ("time-subnormal", _set("time_us", 5e-324), "time_us"),
]


def test_the_control_document_is_a_finding_not_an_error(tmp_path):
    p = run_cli("validate", write(tmp_path, base()), "--json")
    assert p.returncode == 1, p.stderr
    rep = json.loads(p.stdout)
    assert [(f["kind"], f["ranks"]) for f in rep["findings"]] == [("bad-host", [4])]


@pytest.mark.parametrize("name,harm,names", CASES, ids=[c[0] for c in CASES])
def test_hostile_figure_is_refused_naming_the_record(tmp_path, name, harm, names):
    doc = base()
    harm(doc)
    path = write(tmp_path, doc)
    with pytest.raises(UsageError, match="record [0-9]+ ") as exc:
        load(path)
    assert names in str(exc.value), str(exc.value)


@pytest.mark.parametrize("name,harm,names",
                         [c for c in CASES if c[0] in ("id-dict", "target-rank-99", "latency-exp-overflow",
                                                       "busbw-subnormal", "latency-min-zero")],
                         ids=lambda c: c if isinstance(c, str) else "")
def test_every_reader_refuses_it_with_one_line(tmp_path, name, harm, names):
    doc = base()
    harm(doc)
    path = write(tmp_path, doc)
    for args in (["validate", path], ["validate", path, "--json"], ["report", path], ["heatmap", path, "-o", "x.png"],
                 ["compare", path, path], ["plot", path, "-o", "p.png"]):
        p = run_cli(*args, cwd=tmp_path)
        assert p.returncode == 2, (args, p.returncode, p.stdout[-500:], p.stderr[-500:])
        assert_no_traceback(p)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and names in lines[0] and "record" in lines[0], (args, p.stderr)


def test_resume_refuses_a_hostile_document_before_any_rank_starts(tmp_path):
    """`sweep --resume` given a confirm record naming rank 99: exit 2, one line, and the
    document is left as it was (not "running", nothing appended)."""
    doc = base()
    doc["world_size"], doc["status"] = 6, "failed"
    _set("confirm.target", {"rank": 99})(doc)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    p = run_cli("sweep", "-t", "tcp", "-N", "6", "--pattern", "pairwise", "-b", "1M", "-e", "4M", "--resume",
                "--confirm", "2", "--no-progress", "-o", path, timeout=60)
    assert p.returncode == 2, (p.stdout[-800:], p.stderr[-800:])
    assert_no_traceback(p)
    assert "names rank 99" in p.stderr and path.read_bytes() == before


def test_json_report_is_strict_json(tmp_path):
    """--json never writes NaN or Infinity (json.loads would take them; a strict parser does not)."""
    doc = base()
    p = run_cli("validate", write(tmp_path, doc), "--json")
    json.loads(p.stdout, parse_constant=lambda c: pytest.fail(f"--json wrote {c}"))


def test_an_empty_document_is_bad_input_in_every_command(tmp_path):
    """No records: exit 2 with one line in every reader (a 0 x 0 heatmap was written before)."""
    doc = base()
    doc["results"] = []
    path = write(tmp_path, doc)
    for args in (["validate", path], ["report", path], ["heatmap", path, "-o", "x.png"], ["compare", path, path],
                 ["plot", path, "-o", "p.png"], ["select", path, "--gpu", "H100", "--params", "1.5B"]):
        p = run_cli(*args, cwd=tmp_path)
        assert p.returncode == 2 and "holds no records" in p.stderr, (args, p.returncode, p.stderr[-500:])
        assert_no_traceback(p)
    assert not (tmp_path / "x.png").exists()
