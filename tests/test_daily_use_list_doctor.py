"""Issue 42: `list` shows every pattern sweep accepts and each missing-library reason once;
`doctor` keeps the parts of a multi-part error apart; both fit 80 columns."""
import json
import re

from cbtest import run_cli
from comm_bench.schedule import PATTERNS


def _flat(text):
    return " ".join(text.split())


def test_list_shows_every_pattern_sweep_accepts():
    rows = {r["transport"]: r for r in json.loads(run_cli("list", "--json", check_rc=0).stdout)}
    assert rows["gloo"]["patterns"] == list(PATTERNS)
    assert rows["tcp"]["patterns"] == [p for p in PATTERNS if p != "collective"]
    text = _flat(run_cli("list", check_rc=0).stdout)
    assert "patterns: pair, pairwise, pairwise-concurrent, matchings, topology; modes: bw, lat" in text
    # what list says a pattern accepts, sweep accepts (the tcp matchings pattern runs: a real run)
    help_text = _flat(run_cli("sweep", "--help", check_rc=0).stdout)
    for p in PATTERNS:
        assert p in help_text


def test_list_says_each_reason_once():
    rows = json.loads(run_cli("list", "--json", check_rc=0).stdout)
    text = _flat(run_cli("list", check_rc=0).stdout)
    reasons = {r["why"] for r in rows if not r["available"]}
    reasons |= {b["why"] for r in rows for b in r["buffers"] if not b["available"]}
    assert reasons, "nothing is missing here: nothing to check"
    for why in reasons:
        assert text.count(_flat(why)) == 1, why


def test_list_and_doctor_fit_80_columns():
    for cmd in ("list", "doctor"):
        out = run_cli(cmd).stdout
        assert out.strip()
        wide = [ln for ln in out.splitlines() if len(ln) > 80]
        assert not wide, (cmd, wide)


def test_doctor_keeps_the_libraries_tried_apart():
    checks = {c["name"]: c for c in json.loads(run_cli("doctor", "--json").stdout)}
    nccl = checks["NCCL library (loaded at run time)"]
    if nccl["ok"]:
        return
    detail = nccl["detail"]
    # each library tried and the advice: separate clauses, not "...directory libnccl.so: ..."
    assert not re.search(r"directory libnccl", detail), detail
    assert re.search(r"libnccl\.so\.2: [^;]+; libnccl\.so: [^;]+; install ", detail), detail
