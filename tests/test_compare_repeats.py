"""Runs given as repeats (#39): `compare --repeats N` and several `validate --baseline`
files judge a change against the spread between whole runs, the noise one run's
iterations cannot show. Crafted documents for the judgement (run-level shifts are what
identical runs here show: docs/benchmarks/compare-noise.md), real local runs for the path."""
import json
import math
import statistics

import pytest

from cbtest import run_cli
from test_compare_noise import SIZES, crafted, compare_json, files

from comm_bench.validate import stats
from comm_bench.validate.compare import paired_below_p, repeats_below_p

# whole-run factors of identical runs: sd of log ~0.12, as measured on namespace tcp
WIGGLE_A = (1.0, 0.85, 1.1, 0.95, 1.05)
WIGGLE_B = (0.93, 1.04, 0.8, 1.06, 0.97)


def level(gbs):
    return lambda size: gbs


def group(tmp_path, name, factors, base=4.0, cv=0.05):
    """One run as repeats: each repeat the same link shifted as a whole by its factor."""
    docs = {f"{name}{i}": crafted(level(base * f), cv=cv) for i, f in enumerate(factors)}
    paths = files(tmp_path, **docs)
    return [paths[k] for k in docs]


def test_repeats_test_against_hand_computed_values():
    a, b = [0.0, 0.1, -0.1, 0.05], [-0.3, -0.2, -0.4]
    # Welch by hand: means 0.0125 and -0.3, variances over n
    va, vb = statistics.variance(a) / 4, statistics.variance(b) / 3
    t = (statistics.fmean(b) - statistics.fmean(a)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 2)
    assert repeats_below_p(a, b, 0.0) == pytest.approx(stats.t_cdf(t, df), rel=1e-9)
    # one side a single run: Student's t with the other side's spread, n - 1 df
    sd = statistics.stdev(a)
    t1 = (-0.3 - statistics.fmean(a)) / (sd * math.sqrt(1 / 4 + 1))
    assert repeats_below_p(a, [-0.3], 0.0) == pytest.approx(stats.t_cdf(t1, 3), rel=1e-9)
    assert repeats_below_p([0.0], [-0.3], 0.0) is None          # no spread known: no row test
    # the margin moves b: a drop just at the margin is a coin toss
    assert repeats_below_p(a, [x - 0.2 for x in a], -0.2) == pytest.approx(0.5, abs=1e-9)


def test_identical_runs_shifted_as_a_whole_pass_with_repeats(tmp_path):
    """Two single runs 20% apart at every size read as a slower link (and FAIL); the same
    runs among their repeats are within the between-run noise."""
    a, b = group(tmp_path, "a", WIGGLE_A), group(tmp_path, "b", WIGGLE_B)
    single = compare_json(a[0], b[2], rc=1)                      # factor 1.0 vs 0.8: the old false alarm
    assert single["summary"][0]["worse"] == 5
    out = compare_json(*a, *b, args=("--repeats", "5"), rc=0)
    assert [r["repeats"] for r in out["runs"]] == [5, 5]
    assert out["status"] == "pass" and out["summary"][0]["worse"] == 0
    assert {r["change"][0]["row_test"] for r in out["rows"]} == {"repeats-welch-log"}
    text = run_cli("compare", *a, *b, "--repeats", "5", "--wide", check_rc=0).stdout.splitlines()
    assert "5 repeats: geometric means" in text[0] and "between-run spread" in text[-2]


def test_a_slower_link_fails_with_repeats(tmp_path):
    """The same wiggle, the link 30% slower: every judged size worse, from the repeats."""
    a, b = group(tmp_path, "a", WIGGLE_A), group(tmp_path, "b", [0.7 * f for f in WIGGLE_B])
    out = compare_json(*a, *b, args=("--repeats", "5"), rc=1)
    judged = [r["change"][0] for r in out["rows"]]
    assert [c["verdict"] for c in judged] == ["worse"] * 5
    assert all(c["row_test"] == "repeats-welch-log" and c["p_row"] < 0.05 for c in judged)
    # 13.7% slower (geometric means) with this much run-to-run noise: beyond 10%, but the
    # repeats cannot support "beyond 10%": within noise
    b14 = group(tmp_path, "c", [0.9 * f for f in WIGGLE_B])
    out = compare_json(*a, *b14, args=("--repeats", "5"), rc=0)
    assert out["summary"][0]["worse"] == 0 and out["summary"][0]["noise"] == 5


# turns whose machine state moves both runs alike (a CPU-bound link: 1-3 GB/s run to run)
TURNS = (1.0, 0.6, 1.25, 0.7, 1.1, 0.55, 1.3, 0.8, 1.0, 0.65)


def test_paired_test_against_hand_computed_values():
    a, b = [0.0, 0.5, -0.4, 0.2], [-0.25, 0.2, -0.6, -0.1]
    d = [y - x for x, y in zip(a, b)]
    t = statistics.fmean(d) / (statistics.stdev(d) / 2)
    assert paired_below_p(a, b, 0.0) == pytest.approx(stats.t_cdf(t, 3), rel=1e-9)
    d = [y + 0.1 - x for x, y in zip(a, b)]          # the margin moves b
    assert paired_below_p(a, b, -0.1) == pytest.approx(stats.t_cdf(statistics.fmean(d) / (statistics.stdev(d) / 2), 3))


def test_paired_turns_see_a_slower_link_that_the_turns_spread_hides(tmp_path):
    """Runs made in turns, each turn's two runs moved alike by the machine: a link 20%
    slower is within noise for Welch's t over the groups (the turns' spread, sd of log
    0.3, swamps it) and worse at every size for the paired test; identical turns (3%
    apart) pass either way; --paired without repeats is bad input."""
    a = group(tmp_path, "a", TURNS)
    slow = group(tmp_path, "s", [0.8 * f * (1.02 if i % 2 else 0.98) for i, f in enumerate(TURNS)])
    same = group(tmp_path, "e", [f * (1.03 if i % 2 else 0.97) for i, f in enumerate(TURNS)])
    welch = compare_json(*a, *slow, args=("--repeats", "10"), rc=0)
    assert welch["summary"][0]["worse"] == 0 and welch["summary"][0]["noise"] == 5
    out = compare_json(*a, *slow, args=("--repeats", "10", "--paired"), rc=1)
    judged = [r["change"][0] for r in out["rows"]]
    assert [c["verdict"] for c in judged] == ["worse"] * 5 and out["paired"] is True
    assert {c["row_test"] for c in judged} == {"repeats-paired-log"}
    assert {c["series_test"] for c in judged} == {"repeats-paired-levels"}
    for args in (("--repeats", "10"), ("--repeats", "10", "--paired")):
        assert compare_json(*a, *same, args=args, rc=0)["summary"][0]["worse"] == 0
    text = run_cli("compare", *a, *slow, "--repeats", "10", "--paired", "--wide", check_rc=1).stdout
    assert "differences of the runs made in turns" in text
    p = run_cli("compare", a[0], slow[0], "--paired", check_rc=2)
    assert "--paired needs --repeats" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_validate_baseline_repeats(tmp_path):
    """Five baseline runs give the noise: a new run inside their spread passes, one far
    below it is a regression; the report says how many repeats."""
    base = group(tmp_path, "base", WIGGLE_A)
    inside = files(tmp_path, new=crafted(lambda s: 4.0 * 0.85))["new"]
    far = files(tmp_path, far=crafted(lambda s: 4.0 * 0.5))["far"]
    args = [x for b in base for x in ("--baseline", b)]
    p = run_cli("validate", inside, *args, "--json", check_rc=0)
    checked = json.loads(p.stdout)["checked"]["baseline"]
    assert checked["repeats"] == 5 and checked["regressions"] == 0 and checked["compared"] == 5
    # the same new run against one baseline run (factor 1.0): the whole-run shift reads as a regression
    run_cli("validate", inside, "--baseline", base[0], check_rc=1)
    p = run_cli("validate", far, *args, "--json", check_rc=1)
    found = [f for f in json.loads(p.stdout)["findings"] if f["kind"] == "regression"]
    assert len(found) == 5 and all(f["row_test"] == "repeats-welch-log" for f in found)


def test_repeats_must_divide_the_files(tmp_path):
    a = group(tmp_path, "a", WIGGLE_A[:4])
    p = run_cli("compare", *a[:3], "--repeats", "2", check_rc=2)
    assert p.stderr.strip().count("\n") == 0 and "--repeats 2: 3 files" in p.stderr


def test_identical_local_runs_as_repeats_pass(tmp_path):
    """The README's first command, three times a side, nothing changed: PASS."""
    paths = []
    for i in range(6):
        paths.append(tmp_path / f"r{i}.json")
        run_cli("sweep", "--nprocs", "2", "-c", "-o", paths[-1], "--no-progress", timeout=300, check_rc=0)
    p = run_cli("compare", *paths, "--repeats", "3")
    assert p.returncode == 0, p.stdout[-3000:]
    assert p.stdout.splitlines()[-1].startswith("# verdict: PASS")


def test_with_repeats_a_slower_link_need_not_be_beyond_the_tolerance_at_every_size(tmp_path):
    """A token bucket lets the smallest judged size through nearly at line rate (1M -5%)
    while 2M-16M are 25% slower: a single pair's signed-rank test needs all five sizes beyond
    the tolerance, so it is within noise; the repeats' levels carry the change."""
    def slower(f):
        return lambda size: 4.0 * f * (0.95 if size == SIZES[0] else 0.75)
    quiet = (1.0, 0.97, 1.02, 0.99, 1.03)
    a = group(tmp_path, "a", quiet)
    docs = {f"b{i}": crafted(slower(f), cv=0.05) for i, f in enumerate(quiet)}
    paths = files(tmp_path, **docs)
    b = [paths[k] for k in docs]
    single = compare_json(a[0], b[0], rc=0)
    assert single["summary"][0]["worse"] == 0 and single["summary"][0]["noise"] == 4
    out = compare_json(*a, *b, args=("--repeats", "5"), rc=1)
    verdicts = {r["size"]: r["change"][0] for r in out["rows"]}
    assert verdicts[SIZES[0]]["verdict"] == "same"
    assert all(verdicts[s]["verdict"] == "worse" and verdicts[s]["series_test"] == "repeats-welch-levels"
               for s in SIZES[1:])
