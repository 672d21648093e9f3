"""Noise-aware comparison (#39): `compare` and `validate --baseline` call a change worse
only when a stated test supports it at a stated confidence; a change the data cannot
support is "within noise" (shown, never a FAIL). Crafted documents for the judgement,
two real local runs for the false alarm, a shaped namespace link for the real regression."""
import json
import sys
from pathlib import Path

import pytest

from cbtest import run_cli
from test_heatmap import make_doc, write

from comm_bench.validate import stats

SIZES = tuple(1 << k for k in range(20, 25))        # 1M .. 16M: the quick-start's judged sizes


def crafted(bw, cv=0.1, iters=20, sizes=SIZES, mode="bw", nodes=2):
    """A tcp run: bw(size) -> GB/s (mode lat: one-way us) per record, each record's
    per-iteration spread cv = stdev/avg over `iters` iterations. nodes > 2: pairwise (one
    record per pair and size), else one pair."""
    pairs = None if nodes > 2 else [(0, 1)]
    doc = make_doc(nodes=nodes, gpn=1, transport="tcp", sizes=sizes, pairs=pairs, topo=None, same_hostname=True,
                   pattern="pairwise" if nodes > 2 else "pair", value=lambda s, d, size, rnd: 1.0,
                   device=lambda r: f"10.0.0.{r + 1}")
    for k, r in enumerate(doc["results"]):
        v = bw(r["size"], k) if bw.__code__.co_argcount == 2 else bw(r["size"])
        t = v if mode == "lat" else r["size"] / v / 1e3
        c = cv(r["size"]) if callable(cv) else cv
        r.update(mode=mode, iters=iters, time_us=t, algbw=r["size"] / t / 1e3, busbw=r["size"] / t / 1e3,
                 latency_us={"min": t * 0.7, "median": t, "avg": t, "stdev": t * c, "p99": t * (1 + 3 * c),
                             "p999": t * (1 + 3.5 * c), "max": t * (1 + 4 * c)})
    return doc


def files(tmp_path, **docs):
    return {name: write(tmp_path, doc, f"{name}.json") for name, doc in docs.items()}


def compare_json(*paths, rc=None, args=()):
    p = run_cli("compare", *paths, "--json", *args, check_rc=rc)
    return json.loads(p.stdout)


# ------------------------------------------------------------------ the tests themselves
def test_student_t_and_rank_sum_against_known_values():
    for t, df, want in ((1.729, 19, 0.95), (2.093, 19, 0.975), (6.314, 1, 0.95), (3.365, 5, 0.99), (0.0, 7, 0.5)):
        assert stats.t_cdf(t, df) == pytest.approx(want, abs=2e-4)
        assert stats.t_cdf(-t, df) == pytest.approx(1 - want, abs=2e-4)
    assert stats.rank_sum_p([4, 5, 6], [1, 2, 3]) == pytest.approx(1 / 20)     # all below: 1 of C(6,3)
    assert stats.rank_sum_p([1, 2, 3], [4, 5, 6]) == 1.0
    assert stats.rank_sum_p([3, 1, 5, 2], [1, 2, 2]) == pytest.approx(0.2857, abs=1e-4)   # ties: average ranks
    big_a, big_b = list(range(30)), [x - 5.5 for x in range(30)]                # normal beyond 40 values
    assert stats.rank_sum_p(big_a, big_b) == pytest.approx(stats.rank_sum_p(big_a, big_b, exact_max=100), rel=0.05)
    # Welch: 0.3 apart with standard errors 0.1 -> t = -2.12 at ~38 df
    assert stats.welch_below_p(0, 0.1, 19, -0.3, 0.1, 19) == pytest.approx(0.0202, abs=1e-3)
    assert stats.welch_below_p(0, 0, 19, -0.3, 0, 19) is None


def test_consistent_drop_across_sizes_is_worse_with_its_confidence(tmp_path):
    """A link 20% slower: every judged size 20% down, each well beyond the tolerance given
    its iterations' spread: worse at confidence 1 - 2^-5 (the signed-rank test over 5 sizes)."""
    f = files(tmp_path, a=crafted(lambda s: 4.0), b=crafted(lambda s: 3.2))
    out = compare_json(f["a"], f["b"], rc=1)
    assert out["status"] == "fail" and out["confidence"] == 0.95
    assert set(out["test"]) >= {"row", "series", "rule", "assumptions"} and "signed-rank" in out["test"]["series"]
    judged = [r["change"][0] for r in out["rows"]]
    assert [c["verdict"] for c in judged] == ["worse"] * 5
    for c in judged:
        assert c["row_test"] == "welch-log" and c["p_row"] < 0.01
        assert c["p_series"] == pytest.approx(1 / 32) and c["confidence"] == pytest.approx(1 - 1 / 32, abs=1e-4)
    s = out["summary"][0]
    assert (s["worse"], s["noise"]) == (5, 0) and s["worst"]["confidence"] == pytest.approx(0.9688, abs=1e-4)
    text = run_cli("compare", f["a"], f["b"], "--wide", check_rc=1).stdout.splitlines()
    assert text[-1] == "# verdict: FAIL: B worse than A beyond 10% at confidence 0.95"
    assert text[-2].startswith("# test: worse or better = beyond 10% at confidence 0.95 by both")
    # asked for more confidence than 5 sizes can give (2^-5 > 0.01): said, and not a failure
    out = compare_json(f["a"], f["b"], rc=0, args=("--confidence", "0.99"))
    assert [r["change"][0]["verdict"] for r in out["rows"]] == ["noise"] * 5
    assert "needs 7 to reach confidence 0.99" in out["summary"][0]["notes"][0]


def test_a_run_shifted_at_some_sizes_is_within_noise(tmp_path):
    """What identical quick-start runs look like (docs/benchmarks/compare-noise.md): the
    scheduler slows a run at some sizes (-42% at 2M) and not at others. Each row alone is
    far beyond its iterations' spread; the sizes do not move together: within noise."""
    shift = {1 << 20: 0.75, 2 << 20: 0.58, 4 << 20: 0.8, 8 << 20: 1.03, 16 << 20: 1.05}
    f = files(tmp_path, a=crafted(lambda s: 4.0), b=crafted(lambda s: 4.0 * shift[s]))
    out = compare_json(f["a"], f["b"], rc=0)
    verdicts = [r["change"][0]["verdict"] for r in out["rows"]]
    assert verdicts == ["noise", "noise", "noise", "same", "same"]
    assert all(r["change"][0]["p_row"] < 0.01 for r in out["rows"][:3])   # the row test alone would say worse
    assert out["status"] == "pass" and out["summary"][0]["noise"] == 3
    text = run_cli("compare", f["a"], f["b"], check_rc=0).stdout
    assert "# B vs A: 0 worse, 0 better, 2 within 10%, 3 within noise" in text
    assert text.splitlines()[-1] == "# verdict: PASS: no run worse than A beyond 10% at confidence 0.95"


def test_a_noisy_row_is_within_noise_even_when_every_size_moved(tmp_path):
    """Every size 15-30% slower, but the 30% row's iterations spread 3x their mean: that
    row has no support of its own (Welch) and is within noise; the others are worse."""
    drop = {1 << 20: 0.7, 2 << 20: 0.8, 4 << 20: 0.78, 8 << 20: 0.85, 16 << 20: 0.8}
    f = files(tmp_path, a=crafted(lambda s: 4.0), b=crafted(lambda s: 4.0 * drop[s],
                                                             cv=lambda s: 3.0 if s == 1 << 20 else 0.1))
    rows = compare_json(f["a"], f["b"], rc=1)["rows"]
    assert [r["change"][0]["verdict"] for r in rows] == ["noise", "worse", "worse", "worse", "worse"]
    assert rows[0]["change"][0]["p_row"] > 0.05 and rows[0]["change"][0]["confidence"] < 0.95


def test_too_few_sizes_cannot_be_worse_and_say_why(tmp_path):
    f = files(tmp_path, a=crafted(lambda s: 4.0, sizes=SIZES[:2]), b=crafted(lambda s: 2.0, sizes=SIZES[:2]))
    p = run_cli("compare", f["a"], f["b"], check_rc=0)
    assert "# B vs A: 0 worse, 0 better, 0 within 10%, 2 within noise" in p.stdout
    assert "# B vs A: note: sendrecv bw: 2 judged size(s); the signed-rank test needs 5" in p.stdout


def test_pairwise_rows_are_judged_over_their_pairs(tmp_path):
    """Pairwise runs: one record per pair; the row test is a rank-sum over the pairs."""
    a = crafted(lambda s, k: 4.0 * (1 + 0.02 * (k % 12)), nodes=4)
    b = crafted(lambda s, k: 3.0 * (1 + 0.02 * (k % 12)), nodes=4)
    f = files(tmp_path, a=a, b=b)
    out = compare_json(f["a"], f["b"], rc=1)
    for r in out["rows"]:
        c = r["change"][0]
        assert r["runs"][0]["records"] == 12 and "values" not in r["runs"][0]
        assert c["row_test"] == "rank-sum" and c["p_row"] < 1e-5 and c["verdict"] == "worse"


def test_latency_rows_use_the_same_judgement(tmp_path):
    sizes = (8, 16, 32, 64, 128)
    f = files(tmp_path, a=crafted(lambda s: 5.0, sizes=sizes, mode="lat", iters=1000),
              b=crafted(lambda s: 6.5, sizes=sizes, mode="lat", iters=1000),
              c=crafted(lambda s: 5.0 * (1.4 if s in (8, 32) else 0.97), sizes=sizes, mode="lat", iters=1000))
    assert [r["change"][0]["verdict"] for r in compare_json(f["a"], f["b"], rc=1)["rows"]] == ["worse"] * 5
    assert [r["change"][0]["verdict"] for r in compare_json(f["a"], f["c"], rc=0)["rows"]] == \
        ["noise", "same", "noise", "same", "same"]


def test_validate_baseline_has_the_same_judgement(tmp_path):
    shift = {1 << 20: 0.75, 2 << 20: 0.58, 4 << 20: 0.8, 8 << 20: 1.03, 16 << 20: 1.05}
    f = files(tmp_path, a=crafted(lambda s: 4.0), noisy=crafted(lambda s: 4.0 * shift[s]),
              slow=crafted(lambda s: 3.2))
    p = run_cli("validate", f["noisy"], "--baseline", f["a"], "--json", check_rc=0)
    rep = json.loads(p.stdout)
    base = rep["checked"]["baseline"]
    assert rep["findings"] == [] and base["regressions"] == 0 and base["confidence"] == 0.95
    assert [n["size"] for n in base["within_noise"]] == list(SIZES[:3])
    assert all(n["confidence"] < 0.95 and "within noise" in n["message"] for n in base["within_noise"])
    text = run_cli("validate", f["noisy"], "--baseline", f["a"], check_rc=0).stdout
    assert "0 worse by more than 10% at confidence 0.95, 3 beyond 10% within noise" in text
    assert "  within noise: sendrecv 2M (bw): busbw 2.32 GB/s vs 4 GB/s in the baseline (-42.0%" in text
    rep = json.loads(run_cli("validate", f["slow"], "--baseline", f["a"], "--json", check_rc=1).stdout)
    assert [x["kind"] for x in rep["findings"]] == ["regression"] * 5
    for x in rep["findings"]:
        assert x["confidence"] == pytest.approx(0.9688, abs=1e-4) and x["p_series"] == pytest.approx(1 / 32)
        assert x["row_test"] == "welch-log" and x["change"] == pytest.approx(-0.2)
    # the same rows, the same verdicts as compare's
    cmp = compare_json(f["a"], f["noisy"], rc=0)
    assert [r["change"][0]["confidence"] for r in cmp["rows"]][:3] == [n["confidence"] for n in base["within_noise"]]


# ------------------------------------------------------------------ real processes
def test_two_identical_local_runs_pass(tmp_path):
    """The README's first command, twice, nothing changed: compare exits 0 (today's FAILs
    were 10 of 20 such pairs here) and validate --baseline finds nothing."""
    for name in ("a", "b"):
        run_cli("sweep", "--nprocs", "2", "-c", "-o", tmp_path / f"{name}.json", "--no-progress",
                timeout=300, check_rc=0)
    p = run_cli("compare", tmp_path / "a.json", tmp_path / "b.json")
    assert p.returncode == 0, p.stdout[-3000:]
    assert p.stdout.splitlines()[-1].startswith("# verdict: PASS")
    p = run_cli("validate", tmp_path / "b.json", "--baseline", tmp_path / "a.json")
    assert p.returncode == 0, p.stdout[-3000:]


TOOLS = Path(__file__).resolve().parent.parent / "tools"
sys.path.insert(0, str(TOOLS))
import bench_compare_noise  # noqa: E402
import netns_fabric  # noqa: E402

NS_OK, NS_WHY = netns_fabric.available()
WIRE = 1514 / 1448     # tc counts whole frames: wire bytes per TCP payload byte at MTU 1500


def ns_sweep(fab, out):
    """A tcp pair sweep between the two namespace hosts (one rank each), 1M-16M: the
    benchmark's own launcher (tools/bench_compare_noise.py)."""
    return bench_compare_noise.ns_sweep(fab, Path(out), ("-b", "1M", "-e", "16M"))


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.skipif(not NS_OK, reason=f"network namespaces: {NS_WHY}")
def test_a_link_shaped_20_percent_slower_fails_and_the_same_link_passes(tmp_path):
    """Two namespace hosts, their link at a base rate (tc tbf, 2 Gbit/s: the link, not the
    CPU, sets the pace), then shaped to 80% of what that run measured: FAIL; the base rate
    again: PASS."""
    with netns_fabric.Fabric(2, prefix="cbcmp", subnet="10.77.39", shape={0: "2gbit"}) as fab:
        base = ns_sweep(fab, tmp_path / "base.json")
        ns_sweep(fab, tmp_path / "again.json")
        measured = sorted(r["busbw"] for r in base["results"])[len(base["results"]) // 2]    # GB/s
        fab.set_rate(0, f"{int(measured * 0.8 * 8e3 * WIRE)}mbit")
        ns_sweep(fab, tmp_path / "slow.json")
    slow = run_cli("compare", tmp_path / "base.json", tmp_path / "slow.json", "--json")
    out = json.loads(slow.stdout)
    assert slow.returncode == 1 and out["rows"][-1]["change"][0]["verdict"] == "worse", slow.stdout[-3000:]
    assert all(-0.4 < r["change"][0]["busbw"] < -0.1 for r in out["rows"])     # ~20% (tbf bursts: 1M more)
    assert out["rows"][-1]["change"][0]["confidence"] >= 0.95 == out["confidence"]    # said how sure
    same = run_cli("compare", tmp_path / "base.json", tmp_path / "again.json")
    assert same.returncode == 0, same.stdout[-3000:]
    p = run_cli("validate", tmp_path / "slow.json", "--baseline", tmp_path / "base.json", "--json", check_rc=1)
    assert all(f["kind"] == "regression" and f["confidence"] >= 0.95 for f in json.loads(p.stdout)["findings"])
