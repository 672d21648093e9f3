"""Input that used to give wrong results or crashes (docs/reliability.md, "Input"):
sizes that are not whole elements, results records that break the schema, and rules
values that are not numbers."""
import json

import pytest

from comm_bench.errors import UsageError
from comm_bench.topology.linkmap import LinkMap
from comm_bench.validate.checks import check
from comm_bench.validate.rules import load_rules

from cbtest import assert_no_traceback, run_cli
from test_heatmap import make_doc
from test_validate import collective_doc


def one_line(proc):
    assert_no_traceback(proc)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("args,fragment", [
    (["-b", "7", "-e", "7"], "size 7 B is not a whole number of float32 elements (4 B each)"),
    (["-b", "8", "-e", "64", "-f", "1.5"], "size 18 B is not a whole number of float32"),
    (["-d", "float64", "-b", "4", "-e", "4"], "float64 elements (8 B each)"),
])
def test_sizes_must_be_whole_elements(tmp_path, args, fragment):
    proc = run_cli("sweep", "--nprocs", "2", *args, "-n", "2", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-1000:]
    assert fragment in one_line(proc)
    assert not (tmp_path / "results.json").exists()


# ----------------------------------------------------------------------------- the results schema
BAD_RECORDS = [  # (field, JSON text put in record 3, what the message says)
    ("busbw", "NaN", "busbw"), ("busbw", "Infinity", "busbw"), ("busbw", "1e999", "busbw"),
    ("busbw", '"fast"', "busbw"), ("algbw", "-3.0", "algbw"), ("src", "99", "names rank 99"),
    ("dst", "-1", "dst"), ("size", '"1M"', "size"), ("wrong", "0.5", "wrong"),
]


def full_doc():
    """A synthetic document with every field the readers print."""
    doc = make_doc(nodes=1, gpn=4)
    for r in doc["results"]:
        r["latency_us"] = {"min": 1.0, "max": 2.0, "avg": 1.5, "stdev": 0.1, "median": 1.5, "p99": 2.0,
                           "p999": 2.0}
    return doc


def bad_results(tmp_path, field, literal):
    doc = full_doc()
    doc["results"][3][field] = "@@"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc).replace('"@@"', literal))
    return path


@pytest.mark.parametrize("field,literal,fragment", BAD_RECORDS)
def test_validate_names_the_bad_record(tmp_path, field, literal, fragment):
    path = bad_results(tmp_path, field, literal)
    line = one_line(run_cli("validate", path, check_rc=2))
    assert "record 3" in line and fragment in line, line


@pytest.mark.parametrize("command", [["report"], ["report", "--format", "csv"], ["heatmap", "-o", "h.png"]])
@pytest.mark.parametrize("field,literal", [("busbw", '"fast"'), ("busbw", "NaN"), ("src", "99")])
def test_readers_refuse_bad_records_instead_of_crashing(tmp_path, command, field, literal):
    path = bad_results(tmp_path, field, literal)
    proc = run_cli(command[0], path, *command[1:], cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout[-500:], proc.stderr[-500:])
    assert "record 3" in one_line(proc)


def test_schema_accepts_what_the_readers_accept(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(full_doc()))
    run_cli("validate", path, check_rc=0)
    assert "4->" not in run_cli("report", path, check_rc=0).stdout  # 4 ranks: 0..3 only


# ----------------------------------------------------------------------------- validate rules
def test_floor_on_a_collective_without_a_theoretical_rate(tmp_path):
    doc = collective_doc(20.0)
    for h in doc["hosts"]:
        h["topology"] = None             # no topology: no theoretical rate for the ring's link
    with pytest.raises(UsageError, match="nothing to check"):   # no rate, no floor: not a pass
        check(doc)
    cls, theo = LinkMap(doc).classify(0, 1)
    assert theo is None
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"classes:\n  {cls}: {{floor_gbs: 100}}\n")
    rep = check(doc, load_rules(str(rules)))
    (f,) = rep["findings"]
    assert f["kind"] == "collective-below-expected" and "theoretical unknown" in f["message"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    proc = run_cli("validate", path, "--rules", rules, check_rc=1)
    assert_no_traceback(proc)
    assert "FINDING [collective-below-expected]" in proc.stdout


@pytest.mark.parametrize("text,fragment", [
    ("outliers: {z: .nan}\n", "outliers.z must be a number"),
    ("outliers: {ratio: .inf}\n", "outliers.ratio must be a number"),
    ("classes:\n  ib: {floor_gbs: .nan}\n", "classes.ib.floor_gbs must be a number"),
    ("min_size: .nan\n", "bad size"),
    ("version: 99\n", "version 99"),
    ("version: '1'\n", "version '1'"),
])
def test_rules_values_that_are_not_numbers_are_refused(tmp_path, text, fragment):
    doc = tmp_path / "r.json"
    doc.write_text(json.dumps(make_doc(nodes=1, gpn=2)))
    rules = tmp_path / "rules.yaml"
    rules.write_text(text)
    proc = run_cli("validate", doc, "--rules", rules)
    assert proc.returncode == 2, (proc.stdout[-500:], proc.stderr[-500:])
    assert fragment in one_line(proc)
