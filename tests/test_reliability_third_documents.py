"""Reliability, third pass (issue 27): hostile documents given to the readers end as one
line and exit 2, never as an internal error (exit 70), a hang, or a silent misreading:
nesting too deep, numbers too large for a float, FIFOs, and documents that contradict
themselves (docs/reliability.md, "Every document is checked on load")."""
import json
import os
import subprocess
import time

import pytest

from cbtest import COMM_BENCH, assert_no_traceback, run_cli
from test_failures import finish
from comm_bench.system.netutil import free_port

SWEEP = ["sweep", "-t", "tcp", "--nprocs", "2", "--pattern", "pairwise", "-b", "1K", "-e", "64K", "-n", "5",
         "--no-progress"]


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A real pairwise document (the text), which every reader below accepts."""
    path = tmp_path_factory.mktemp("good") / "good.json"
    run_cli(*SWEEP, "-o", path, timeout=120, check_rc=0)
    return path.read_text()


def readers(doc, rules=None):
    """Every command that reads a results document (or, given `rules`, a rules file)."""
    if rules is not None:
        return {"validate --rules": ["validate", doc, "--rules", rules],
                "select --rules": ["select", doc, "--gpu", "H100", "--params", "1.5B", "--rules", rules]}
    return {"validate": ["validate", doc], "report": ["report", doc], "report --html": ["report", doc, "--html", "x.html"],
            "heatmap": ["heatmap", doc, "-o", "x.png"], "compare": ["compare", doc, doc],
            "select": ["select", doc, "--gpu", "H100", "--params", "1.5B"], "plot": ["plot", doc, "-o", "x.png"]}


def refused(proc, *words):
    """Exit 2 with one line (no traceback) holding `words`."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-600:])
    assert_no_traceback(proc)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_the_good_document_is_read_by_every_reader(tmp_path, good):
    """The control: what the cases below corrupt is accepted as it is."""
    (tmp_path / "r.json").write_text(good)
    for name, args in readers("r.json").items():
        proc = run_cli(*args, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, (name, proc.stderr[-600:])


def with_options(text, extra):
    return text.replace('"options": {', '"options": {' + extra + ", ", 1)


# ----------------------------------------------------------------------------- nesting
@pytest.mark.parametrize("reader", list(readers("x")))
def test_results_nested_200k_deep_are_refused(tmp_path, good, reader):
    (tmp_path / "r.json").write_text(with_options(good, '"deep": ' + "[" * 200_000 + "]" * 200_000))
    refused(run_cli(*readers("r.json")[reader], cwd=tmp_path, timeout=120), "r.json", "too deeply")


@pytest.mark.parametrize("form", ["yaml", "json", "yaml-mapping"])
@pytest.mark.parametrize("reader", ["validate --rules", "select --rules"])
def test_rules_nested_100k_deep_are_refused(tmp_path, good, form, reader):
    (tmp_path / "r.json").write_text(good)
    depth = 100_000
    if form == "yaml-mapping":
        text = "".join(" " * i + f"k{i}:\n" for i in range(3000)) + " " * 3000 + "v: 1\n"
    else:
        text = "version: 1\nrules: " + "[" * depth + "]" * depth + "\n"
    rules = tmp_path / ("rules.json" if form == "json" else "rules.yaml")
    rules.write_text(text if form != "json" else '{"deep": ' + "[" * depth + "]" * depth + "}")
    refused(run_cli(*readers("r.json", rules.name)[reader], cwd=tmp_path, timeout=120), "rules.")


def test_sweep_resume_refuses_a_deep_document_and_keeps_it(tmp_path, good):
    text = with_options(good, '"deep": ' + "[" * 200_000 + "]" * 200_000)
    (tmp_path / "r.json").write_text(text)
    refused(run_cli(*SWEEP, "--resume", "-o", "r.json", cwd=tmp_path, timeout=120), "too deeply")
    assert (tmp_path / "r.json").read_text() == text


# ----------------------------------------------------------------------------- numbers too large
def huge_size(text):
    doc = json.loads(text)
    size = doc["results"][0]["size"]
    return text.replace(f'"size":{size},', f'"size":{"1" + "0" * 400},', 1)


@pytest.mark.parametrize("reader", list(readers("x")))
def test_a_size_of_10_to_the_400_is_refused(tmp_path, good, reader):
    (tmp_path / "r.json").write_text(huge_size(good))
    refused(run_cli(*readers("r.json")[reader], cwd=tmp_path, timeout=120), "r.json", "too large", "401 digits")


def test_sweep_resume_refuses_a_size_of_10_to_the_400(tmp_path, good):
    """It used to keep that record and mark the resumed run ok."""
    text = huge_size(good)
    (tmp_path / "r.json").write_text(text)
    refused(run_cli(*SWEEP, "--resume", "-o", "r.json", cwd=tmp_path, timeout=120), "too large")
    assert (tmp_path / "r.json").read_text() == text


@pytest.mark.parametrize("reader", ["validate --rules", "select --rules"])
def test_a_400_digit_integer_in_rules_is_refused(tmp_path, good, reader):
    (tmp_path / "r.json").write_text(good)
    big = "9" * 400
    text = {"validate --rules": f"version: 1\nmin_size: {big}\n",
            "select --rules": f"version: 1\nrules:\n  - if: \"nodes > {big} / 2\"\n    then: {{recommend: best}}\n"}[reader]
    (tmp_path / "rules.yaml").write_text(text)
    refused(run_cli(*readers("r.json", "rules.yaml")[reader], cwd=tmp_path, timeout=120), "rules.yaml")


@pytest.mark.parametrize("value", ["1e400", "-1e400", "nan", "inf"])
def test_select_params_too_large_for_a_float(tmp_path, good, value):
    (tmp_path / "r.json").write_text(good)
    refused(run_cli("select", "r.json", "--gpu", "H100", "--params", value, cwd=tmp_path, timeout=120), "--params")


# ----------------------------------------------------------------------------- FIFOs as input
@pytest.mark.parametrize("what", ["results", "rules", "select rules"])
def test_a_fifo_as_input_is_refused_not_waited_on(tmp_path, good, what):
    (tmp_path / "r.json").write_text(good)
    os.mkfifo(tmp_path / "pipe")
    args = {"results": ["validate", "pipe"], "rules": ["validate", "r.json", "--rules", "pipe"],
            "select rules": ["select", "r.json", "--gpu", "H100", "--params", "1.5B", "--rules", "pipe"]}[what]
    t = time.monotonic()
    try:
        proc = run_cli(*args, cwd=tmp_path, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a FIFO hung")
    refused(proc, "pipe", "FIFO")
    assert time.monotonic() - t < 30


# ----------------------------------------------------------------------------- self-contradictions
def edit(text, change):
    doc = json.loads(text)
    change(doc)
    return json.dumps(doc)


def _dup_record(d):
    d["results"].append(dict(d["results"][0]))


def _dup_rank(d):
    d["ranks"][1] = dict(d["ranks"][0])


def _pair_to_itself(d):
    d["results"][0]["dst"] = d["results"][0]["src"]


CONTRADICTIONS = {
    "a record given twice": (_dup_record, "record given twice"),
    "a rank listed twice": (_dup_rank, "rank 0 appears twice"),
    "world_size 1e9 with 2 ranks": (lambda d: d.update(world_size=10 ** 9), "lists 2 rank(s)"),
    "src == dst": (_pair_to_itself, "src == dst"),
    "an unknown dtype": (lambda d: d["results"][0].update(dtype="float7"), "'float7'"),
    "busbw 1e308": (lambda d: d["results"][0].update(busbw=1e308), "busbw"),
}


@pytest.mark.parametrize("case", list(CONTRADICTIONS))
def test_a_document_that_contradicts_itself_is_refused(tmp_path, good, case):
    change, words = CONTRADICTIONS[case]
    (tmp_path / "r.json").write_text(edit(good, change))
    for name in ("validate", "report", "heatmap"):
        refused(run_cli(*readers("r.json")[name], cwd=tmp_path, timeout=120), "r.json", words)


def test_a_second_results_key_is_refused(tmp_path, good):
    """JSON keeps the last of two keys: the document would read as empty."""
    (tmp_path / "r.json").write_text(good.rstrip().rstrip("}") + ', "results": []}')
    refused(run_cli("validate", "r.json", cwd=tmp_path, timeout=120), "'results' appears twice")
    refused(run_cli("report", "r.json", cwd=tmp_path, timeout=120), "'results' appears twice")


# ----------------------------------------------------------------------------- launchers
@pytest.mark.parametrize("sizes", [(2, 3), (3, 2)])
def test_ranks_launched_with_different_world_sizes_name_it(tmp_path, sizes):
    """A job script that hands rank 1 another WORLD_SIZE than rank 0: both ranks say so
    (exit 2), instead of blaming heartbeats or a timeout."""
    port = str(free_port())
    procs = []
    for rank, ws in enumerate(sizes):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ws), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ws),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([COMM_BENCH, "sweep", "-t", "tcp", "-b", "8", "-e", "64", "--no-progress",
                                       "--timeout", "10", "-o", "r.json"], env=env, cwd=tmp_path, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for code, _, err in finish(procs, 60):
        assert code == 2, err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and f"WORLD_SIZE={sizes[0]}" in lines[0] and f"WORLD_SIZE={sizes[1]}" in lines[0], err


def test_a_select_rule_expression_nested_50k_deep_is_refused(tmp_path, good):
    (tmp_path / "r.json").write_text(good)
    (tmp_path / "rules.yaml").write_text('version: 1\nrules:\n  - if: "' + "not " * 50_000 + 'true"\n'
                                         "    then: {recommend: best}\n")
    refused(run_cli("select", "r.json", "--gpu", "H100", "--params", "1.5B", "--rules", "rules.yaml", cwd=tmp_path, timeout=120),
            "nested too deeply")
