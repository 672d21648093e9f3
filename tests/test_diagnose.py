"""Diagnosis without a fabric: the signed-rank confidence, topology findings on recorded
fixtures (a NIC at half its peers' speed, a GPU at PCIe x8 among x16 peers), confirm-phase
verdicts on synthetic records, and a real loopback sweep with --confirm."""
import copy
import json
import os
import random
import shutil
import statistics
from pathlib import Path

import pytest

from comm_bench.validate.confirm import plan, span_iters, suspects_of
from comm_bench.validate.stats import signed_rank_p
from comm_bench.errors import UsageError
from comm_bench.topology import snapshot
from comm_bench.validate.checks import check
from comm_bench.validate.rules import load_rules
from cbtest import run_cli
from test_heatmap import make_doc, write

FIXTURES = Path(__file__).resolve().parent.parent / "topology" / "fixtures"


def test_signed_rank_p_exact():
    assert signed_rank_p([-1.0] * 8) == pytest.approx(1 / 256)
    assert signed_rank_p([-3, -2, -4, -5, -6, -7, -8, 1]) == pytest.approx(2 / 256)   # W+ = 1
    assert signed_rank_p([1.0] * 8) == 1.0
    assert signed_rank_p([]) == 1.0
    assert signed_rank_p([-1, 1, -2, 2]) == pytest.approx(10 / 16)
    assert signed_rank_p([-0.1 * i for i in range(1, 40)]) < 1e-6                    # normal tail


# ----------------------------------------------------------------------------- topology
def _degraded_fixture(tmp_path, gpu_width=None, nic_rate=None):
    root = tmp_path / "fx"
    shutil.copytree(FIXTURES / "dgx-h100", root)
    if gpu_width:
        (next(root.rglob("0000:18:00.0/current_link_width"))).write_text(f"{gpu_width}\n")
    if nic_rate:
        (next(root.rglob("mlx5_3/ports/1/rate"))).write_text(nic_rate + "\n")
    return snapshot(str(root))


@pytest.mark.parametrize("fault", ["gpu", "nic"])
def test_topology_link_below_peers(tmp_path, fault):
    snap = _degraded_fixture(tmp_path, gpu_width=8 if fault == "gpu" else None,
                             nic_rate="200 Gb/sec (4X HDR)" if fault == "nic" else None)
    doc = make_doc(nodes=2, gpn=8)
    doc["hosts"][1]["topology"] = snap
    p = run_cli("validate", write(tmp_path, doc), "--json")
    assert p.returncode == 1, p.stdout[-2000:]
    f = json.loads(p.stdout)["findings"]
    assert [x["kind"] for x in f] == ["link-degraded"], f
    f = f[0]
    assert f["host"] == "node001" and f["confidence"] == 1.0
    if fault == "gpu":
        assert f["device"] == "GPU0" and (f["measured"], f["expected"]) == ("x8", "x16")
        assert "GPU0 on host node001 runs PCIe x8 where its peers run x16" in f["message"]
    else:
        assert f["device"] == "mlx5_3" and f["measured_gbs"] == 25.0 and f["expected_gbs"] == 50.0
        assert "200 Gb/s where its peers run 400 Gb/s" in f["message"]


def test_topology_fixtures_as_recorded_have_no_finding():
    for name in ("dgx-h100", "gpu-h200x2", "dev-vm"):
        doc = make_doc(nodes=2, gpn=8, topo=snapshot(str(FIXTURES / name)))
        assert not [f for f in check(doc)["findings"] if f["kind"] == "link-degraded"], name


# ----------------------------------------------------------------------------- confirm
def _with_confirm(doc, target_rank, ratio, seed=0, k=8, good=(0, 1, 2)):
    """Confirm-phase records as a sweep writes them: suspect rank `target_rank` runs at
    `ratio` x its references (+-5% noise)."""
    rnd = random.Random(seed)
    base = dict(doc["results"][0])
    rounds = plan([{"kind": "rank", "rank": target_rank, "why": ["slow"]}], list(good), k)
    for i, (s, d, tag, _) in enumerate(rounds):
        bw = 45.0 * rnd.uniform(0.95, 1.05) * (ratio if tag["role"] == "suspect" else 1.0)
        rec = dict(copy.deepcopy(base), src=s, dst=d, algbw=bw, busbw=bw, time_us=base["size"] / bw / 1e3,
                   src_host=f"node{s:03d}", dst_host=f"node{d:03d}", round=100 + i, confirm=tag)
        doc["results"].append(rec)
    return doc


def test_confirm_measurements_span_half_a_second():
    """A suspect's iterations come from its own first-pass time: a fast one gets enough for
    0.5 s (at most 4x --iters), a slow one keeps the sweep's own; a slow-named suspect is
    measured as long as an unstable-named one (a toggling link can read merely slow)."""
    assert span_iters(8, 17_500) == 29 and span_iters(8, 1_000) == 32 and span_iters(8, 200_000) == 8
    assert span_iters(8, None) is None and span_iters(8, 0) is None
    doc = _hosts_doc(lambda s, d, size, rnd: 45.0 * rnd.uniform(0.97, 1.03) * (0.5 if 4 in (s, d) else 1))
    sus, good, times = suspects_of(doc, load_rules(None))
    assert [s["rank"] for s in sus] == [4] and sus[0]["why"] == ["slow"] and 4 not in good
    size = max(r["size"] for r in doc["results"])
    mine = [r["time_us"] for r in doc["results"] if r["size"] == size and 4 in (r["src"], r["dst"])]
    assert times == [pytest.approx(statistics.median(mine))]
    sus[0]["iters"] = 29
    assert {it for *_, it in plan(sus, good, 4)} == {29}


def _hosts_doc(value=None):
    return make_doc(nodes=6, gpn=1, value=value or (lambda s, d, size, rnd: 45.0 * rnd.uniform(0.95, 1.05)))


def test_confirmed_slow_host_is_a_finding():
    """80%: below every first-pass threshold, found by the confirm phase."""
    doc = _with_confirm(_hosts_doc(lambda s, d, size, rnd: 45.0 * rnd.uniform(0.95, 1.05) * (0.8 if 4 in (s, d) else 1)),
                        4, 0.8)
    rep = check(doc)
    assert [f["kind"] for f in rep["findings"]] == ["bad-host"], rep["findings"]
    f = rep["findings"][0]
    assert f["ranks"] == [4] and f["confirmed"] and f["confidence"] >= 0.99
    assert 0.7 < f["confirm"]["ratio"] < 0.9


def test_paired_ratio_alone_does_not_name_a_host():
    """Alternations that swing together (levels 3, 1 and 2 GB/s): rank 4 reads 0.86x its
    reference in 6 of 8 (confident by the signed-rank test) yet its median GB/s is its
    references' median: not slow (the CI run that named rank 0 at 0.947 vs 0.951 GB/s).
    The same swings with rank 4 at 0.6x its references everywhere: a finding."""
    for scale, named in ((None, False), (0.6, True)):
        doc = _hosts_doc()
        base = dict(doc["results"][0])
        level, ratio = [3, 3, 3, 1, 1, 1, 2, 2], [0.86] * 6 + [1.05] * 2
        for i, (s, d, tag, _) in enumerate(plan([{"kind": "rank", "rank": 4, "why": ["slow"]}], [0, 1, 2], 8)):
            k = tag["alt"]
            bw = level[k] * ((scale or ratio[k]) if tag["role"] == "suspect" else 1.0)
            doc["results"].append(dict(copy.deepcopy(base), src=s, dst=d, algbw=bw, busbw=bw, round=100 + i,
                                       time_us=base["size"] / bw / 1e3, confirm=tag))
        rep = check(doc)
        v = rep["checked"]["diagnosis"]["verdicts"][0]
        assert v["slow_confidence"] >= 0.95, v
        if named:
            assert [f["kind"] for f in rep["findings"]] == ["bad-host"] and rep["findings"][0]["ranks"] == [4]
        else:
            assert v["ratio"] <= 0.9 and rep["findings"] == [], (v, rep["findings"])


def test_a_rank_slow_in_one_direction_is_named():
    """The CI run that withdrew a flapping host: rank 5 sending at ~0.75x its references in
    7 of 8 alternations, receiving at 1.0x in all: pooled, its paired ratio read 0.87 and
    its median GB/s its references' (9 of its 16 measurements fast), so not slow. Judged
    per direction it is slow sending. The same run with both directions at 1.0x: nothing."""
    for out_scale, named in ((0.75, True), (1.0, False)):
        doc = _hosts_doc()
        base = dict(doc["results"][0])
        rnd = random.Random(7)
        for i, (s, d, tag, _) in enumerate(plan([{"kind": "rank", "rank": 4, "why": ["slow"]}], [0, 1, 2], 8)):
            slow = tag["role"] == "suspect" and tag["dir"] == "out" and tag["alt"] != 0
            bw = 45.0 * rnd.uniform(0.97, 1.03) * (out_scale if slow else 1.0)
            doc["results"].append(dict(copy.deepcopy(base), src=s, dst=d, algbw=bw, busbw=bw, round=100 + i,
                                       time_us=base["size"] / bw / 1e3, confirm=tag))
        rep = check(doc)
        v = rep["checked"]["diagnosis"]["verdicts"][0]
        if not named:
            assert rep["findings"] == [] and not v["slow"], (v, rep["findings"])
            continue
        assert "pooled" in v and v["pooled"]["suspect_gbs"] / v["pooled"]["reference_gbs"] > 0.9, v   # pooled: missed
        assert v["slow"] and v["direction"] == "out" and 0.7 < v["ratio"] < 0.8 and v["slow_confidence"] >= 0.95, v
        assert [f["kind"] for f in rep["findings"]] == ["bad-host"] and rep["findings"][0]["ranks"] == [4], rep


@pytest.mark.parametrize("seed", range(5))
def test_suspect_not_reproduced_is_no_finding(seed):
    """The first pass saw rank 4 at 20% (a finding by the old rules); re-measured next to
    good pairs it runs like them: the finding is withdrawn, and says so."""
    doc = _with_confirm(_hosts_doc(lambda s, d, size, rnd: 45.0 * (0.2 if 4 in (s, d) else 1)), 4, 1.0, seed=seed)
    rep = check(doc)
    assert rep["findings"] == [], rep["findings"]
    assert len(rep["checked"]["diagnosis"]["withdrawn"]) == 1


def test_first_pass_findings_carry_a_confidence():
    rep = check(_hosts_doc(lambda s, d, size, rnd: 45.0 * rnd.uniform(0.95, 1.05) * (0.05 if 2 in (s, d) else 1)))
    assert [f["kind"] for f in rep["findings"]] == ["bad-host"]
    assert rep["findings"][0]["confidence"] >= 0.999          # 10 pairs x 2 sizes, all below
    assert "confirmed" not in rep["findings"][0]


def test_unconfirmed_suspect_is_not_a_pass(tmp_path):
    """A run without a confirm phase (sweep --confirm 0) whose first pass left a suspect:
    not a finding, not a PASS either: status "unconfirmed", exit 3, and the text says why."""
    doc = _hosts_doc(lambda s, d, size, rnd: 45.0 * rnd.uniform(0.99, 1.01) * (0.85 if 3 in (s, d) else 1))
    rep = check(doc)
    assert rep["findings"] == [] and rep["checked"]["diagnosis"]["unconfirmed_suspects"] == ["rank 3"]
    assert rep["status"] == "unconfirmed"
    p = run_cli("validate", write(tmp_path, doc))
    assert p.returncode == 3 and "validate: UNCONFIRMED" in p.stdout and "PASS" not in p.stdout, p.stdout
    assert "UNCONFIRMED suspects" in p.stdout and "rank 3" in p.stdout and "--confirm 0" in p.stdout
    j = run_cli("validate", write(tmp_path, doc), "--json")
    assert j.returncode == 3 and json.loads(j.stdout)["status"] == "unconfirmed"
    # the control: the same run without the slow rank has no suspect and passes
    clean = _hosts_doc(lambda s, d, size, rnd: 45.0 * rnd.uniform(0.99, 1.01))
    assert run_cli("validate", write(tmp_path, clean)).returncode == 0


def test_confirm_rules_checked(tmp_path):
    p = tmp_path / "r.yaml"
    for text, msg in (("confirm: {min_confidence: 1.5}\n", "confirm.min_confidence must be below 1"),
                      ("confirm: {alpha: 1}\n", "unknown key confirm.alpha"),
                      ("confirm: {suspect_z: .nan}\n", "confirm.suspect_z must be a number")):
        p.write_text(text)
        with pytest.raises(UsageError, match=msg):
            load_rules(str(p))


def test_sweep_confirm_phase_on_loopback(tmp_path):
    """Real ranks: with rules that make every below-median rank a suspect, the sweep
    re-measures them in alternation with references and validate reads the verdicts."""
    rules = tmp_path / "loose.yaml"
    rules.write_text("confirm: {suspect_z: 0, min_effect: 0}\n")
    out = tmp_path / "r.json"
    p = run_cli("sweep", "-t", "tcp", "--pattern", "pairwise", "-N", "4", "-b", "256K", "-e", "256K", "-n", "4",
                "-w", "1", "--confirm", "3", "--no-progress", "-o", out, env={"COMM_BENCH_RULES": str(rules)},
                check_rc=0, timeout=180)
    doc = json.loads(out.read_text())
    conf = [r for r in doc["results"] if "confirm" in r]
    first = [r for r in doc["results"] if "confirm" not in r]
    assert len(first) == 12 and conf, "no suspect re-measured"
    ids = {r["confirm"]["id"] for r in conf}
    for i in ids:
        mine = [r for r in conf if r["confirm"]["id"] == i]
        # a rank: out and in, suspect and reference, per alternation; a pair (the loose rules
        # can make one a suspect, validate_named): its link and its reference's
        per_alt = 4 if mine[0]["confirm"]["kind"] == "rank" else 2
        assert len(mine) == 3 * per_alt and {r["confirm"]["role"] for r in mine} == {"suspect", "reference"}
        assert [r["confirm"]["alt"] for r in mine] == sorted(r["confirm"]["alt"] for r in mine)
    # every suspect, named slow or unstable, and its references are measured long enough to
    # span a link's swings: 256 KiB on loopback is far below half a second, so 4x --iters
    assert {r["iters"] for r in conf} == {16} and {r["iters"] for r in first} == {4}
    rep = json.loads(run_cli("validate", out, "--json", "--rules", rules).stdout)
    assert len(rep["checked"]["diagnosis"]["verdicts"]) == len(ids)
    assert all(v["alternations"] == 3 for v in rep["checked"]["diagnosis"]["verdicts"])
    # the sweep ends its confirm phase with a verdict line, one verdict per suspect, saying what
    # validate makes of each (a finding, unconfirmed, or not), and its run with validate's verdict
    verdict = [line for line in p.stdout.splitlines() if line.startswith("# confirm verdict: ")]
    assert len(verdict) == 1, p.stdout[-3000:]
    said = verdict[0][len("# confirm verdict: "):].split("; ")
    assert len(said) == len(ids)
    for v, text in zip(rep["checked"]["diagnosis"]["verdicts"], said):
        t = v["target"]
        assert text.startswith(f"rank {t['rank']} " if "rank" in t else f"pair {t['src']}->{t['dst']} ")
        about = [f for f in rep["findings"] if (t.get("rank") in (f.get("ranks") or []) if "rank" in t
                                                else (f.get("src"), f.get("dst")) == (t["src"], t["dst"]))]
        assert ("(a finding)" in text) == bool(about), (text, rep["findings"])
    closing = [line for line in p.stdout.splitlines() if line.startswith("# verdict: ")]
    assert len(closing) == 1 and closing[0].startswith(f"# verdict: {rep['status'].upper()}"), (closing, rep["status"])


def test_sweep_confirm_without_suspects_says_so(tmp_path):
    rules = tmp_path / "strict.yaml"
    # (a MAD of 0 among 3 ranks makes z infinite: the effects, not z, rule suspects out here)
    rules.write_text("confirm: {suspect_z: 1000, min_effect: 0.99, unstable_ratio: 1000000000}\n")
    p = run_cli("sweep", "-t", "tcp", "--pattern", "pairwise", "-N", "3", "-b", "64K", "-e", "64K", "-n", "3",
                "-w", "1", "--confirm", "2", "--no-progress", "-o", tmp_path / "r.json",
                env={"COMM_BENCH_RULES": str(rules)}, check_rc=0, timeout=180)
    said = [line for line in p.stdout.splitlines() if line.startswith("# confirm")]   # (the results line names a path)
    assert said == ["# confirm verdict: no suspects: every rank and pair ran like its peers in the first pass"], said


# ----------------------------------------------------------------------------- check
@pytest.mark.parametrize("args, msg", [
    (["-t", "tcp"], "check needs a transport with the collective 'all_reduce' and sendrecv"),
    (["-t", "gloo", "--expect-busbw", "-1"], "--expect-busbw must be a number of GB/s above 0"),
    (["-t", "gloo", "--op", "sendrecv"], "--op sendrecv is not a collective"),
    (["-t", "gloo", "--rules", "/nonexistent.yaml"], "rules file"),
])
def test_check_bad_input(args, msg, tmp_path):
    p = run_cli("check", *args, "-N", "2", "-o", tmp_path / "c.json")
    assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_check_above_expectation_does_not_localize(tmp_path):
    out = tmp_path / "c.json"
    p = run_cli("check", "-t", "gloo", "-N", "3", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1",
                "--expect-busbw", "1e-6", "--no-progress", "-o", out, timeout=180)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert "at or above the expected" in p.stdout and "not localizing" in p.stdout and "no findings" in p.stdout
    doc = json.loads(out.read_text())
    assert [r["pattern"] for r in doc["results"]] == ["collective"] and doc["status"] == "ok"


def test_check_localize_always_runs_n_minus_1_rounds(tmp_path):
    out = tmp_path / "c.json"
    p = run_cli("check", "-t", "gloo", "-N", "4", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1",
                "--localize", "always", "--confirm", "0", "--no-progress", "-o", out, "--json", timeout=180)
    # loopback pairs are noisy: with --confirm 0 a suspect is left unconfirmed (exit 3)
    assert p.returncode in (0, 1, 3), (p.stdout[-2000:], p.stderr[-2000:])
    rep = json.loads(p.stdout[p.stdout.index("{\n"):])
    doc = json.loads(out.read_text())
    pairs = [r for r in doc["results"] if r["pattern"] == "pairwise-concurrent"]
    assert len(pairs) == 12 and len({r["round"] for r in pairs}) == 2 * 3     # 3 rounds, both directions
    assert rep["checked"]["collectives"][0]["op"] == "all_reduce" and rep["checked"]["pairs"] == 12


def _lat(median, max_over_median):
    return {"min": median * 0.9, "median": median, "max": median * max_over_median, "avg": median,
            "stdev": 0.0, "p99": median * max_over_median, "p999": median * max_over_median}


def test_an_unsteady_rank_does_not_hide_its_slow_pair():
    """Rank 4's sends read unsteady (per-iteration max/median 3x against 1.2x) and its pair
    4->2 runs at 10%: both are suspects. A CI run flagged rank 4 unsteady, left its pairs out
    of the pair search as if it were slow, and reported that pair (4->6 there) unconfirmed."""
    doc = _hosts_doc(lambda s, d, size, rnd: 45.0 * rnd.uniform(0.97, 1.03) * (0.1 if (s, d) == (4, 2) else 1))
    for r in doc["results"]:
        r["latency_us"] = _lat(r["time_us"], 3.0 if r["src"] == 4 else 1.2)
    sus, good, _ = suspects_of(doc, load_rules())
    named = {("rank", s["rank"]) if s["kind"] == "rank" else ("pair", s["src"], s["dst"]): s["why"] for s in sus}
    assert named.get(("rank", 4)) == ["unstable"], sus
    assert ("pair", 4, 2) in named and 2 not in good and 4 not in good, (sus, good)


def test_a_pair_as_slow_as_a_finding_goes_before_unsteady_ranks():
    """8 hosts: rank 1 at 50%, ranks 2, 3 and 5 unsteady (max/median 3x against 1.2x), pair
    4->0 at 5%, which validate names: of the 4 suspects re-measured, the pair is one; it used
    to be cut by max_suspects behind the three unsteady ranks."""
    def gbs(s, d, size, rnd):
        return 45.0 * rnd.uniform(0.97, 1.03) * (0.5 if 1 in (s, d) else 1) * (0.05 if (s, d) == (4, 0) else 1)
    doc = make_doc(nodes=8, gpn=1, value=gbs)
    rnd = random.Random(1)
    for r in doc["results"]:
        r["latency_us"] = _lat(r["time_us"], (3.0 if r["src"] in (2, 3, 5) else 1.2) * rnd.uniform(0.95, 1.05))
    sus, good, _ = suspects_of(doc, load_rules())
    names = [("rank", s["rank"]) if s["kind"] == "rank" else ("pair", s["src"], s["dst"]) for s in sus]
    assert names[:2] == [("rank", 1), ("pair", 4, 0)] and len(names) == 4, names
    assert set(names[2:]) <= {("rank", 2), ("rank", 3), ("rank", 5)} and good == [6, 7], (names, good)


@pytest.mark.parametrize("toggling", [True, False])
def test_instability_verdict(toggling):
    """A host whose re-measurements swing between fast and slow (and whose iterations do):
    unstable-host, with how unstable and when; a steady one: nothing."""
    doc = _hosts_doc()
    rnd = random.Random(3)
    base = dict(doc["results"][0])
    for i, (s, d, tag, _) in enumerate(plan([{"kind": "rank", "rank": 4, "why": ["unstable"]}], [0, 1, 2], 8)):
        sus = tag["role"] == "suspect"
        slow = toggling and sus and tag["alt"] % 2 == 0
        bw = 45.0 * rnd.uniform(0.97, 1.03) * (0.3 if slow else 1.0)
        t = base["size"] / bw / 1e3
        rec = dict(copy.deepcopy(base), src=s, dst=d, algbw=bw, busbw=bw, time_us=t, round=100 + i, confirm=tag,
                   latency_us=_lat(t, (3.0 if toggling and sus else 1.2) * rnd.uniform(0.9, 1.1)))
        doc["results"].append(rec)
    rep = check(doc)
    unstable = [f for f in rep["findings"] if f["kind"].startswith("unstable")]
    if not toggling:
        assert rep["findings"] == [], rep["findings"]
        return
    assert [f["kind"] for f in unstable] == ["unstable-host"] and unstable[0]["ranks"] == [4], rep["findings"]
    u = unstable[0]
    assert u["confidence"] >= 0.99 and u["unsteadiness_ratio"] >= 1.4 and u["max_over_median"] >= 2.5
    assert {w["alt"] for w in u["confirm"]["when"]} == set(range(8))   # per-iteration swings every time
    assert "as unsteady as known-good pairs" in u["message"]


def _jumpy_suspect(bw_of, jumpy):
    """A rank 4 instability suspect re-measured 8 times beside its references:
    bw_of(tag) its GB/s per record; per-iteration max/median 1.25 and, in every other
    alternation, `jumpy` (the references: 1.2). check()'s report and its verdict on rank 4."""
    doc = _hosts_doc()
    base = dict(doc["results"][0])
    for i, (s, d, tag, _) in enumerate(plan([{"kind": "rank", "rank": 4, "why": ["unstable"]}], [0, 1, 2], 8)):
        bw = bw_of(tag)
        t = base["size"] / bw / 1e3
        mom = (jumpy if tag["alt"] % 2 else 1.25) if tag["role"] == "suspect" else 1.2
        doc["results"].append(dict(copy.deepcopy(base), src=s, dst=d, algbw=bw, busbw=bw, time_us=t, round=100 + i,
                                   confirm=tag, latency_us=_lat(t, mom)))
    rep = check(doc)
    return rep, next(v for v in rep["checked"]["diagnosis"]["verdicts"] if v["target"] == {"rank": 4})


def test_one_odd_repeat_is_not_instability():
    """A suspect a little jumpier than its references in every alternation (max/median 1.25
    and, in half of them, 1.75 against 1.2) whose one repeat of 8 ran at 40%: confident, and
    unsteady in half, yet its typical unsteadiness is 1.2x. Its max/min repeat spread (2.5x)
    made it read unstable-host; without the extremes it is 1.0x and nothing is named."""
    rnd = random.Random(5)
    rep, v = _jumpy_suspect(lambda tag: 45.0 * rnd.uniform(0.99, 1.01) * (
        0.4 if tag["role"] == "suspect" and tag["alt"] == 3 and tag["dir"] == "out" else 1.0), 1.75)
    assert v["unstable_confidence"] >= 0.95 and v["unsteadiness_ratio"] < 1.4 and len(v["when"]) >= 4, v
    assert v["repeat_spread_ratio"] < 1.1 and not v["unstable"], v
    assert rep["findings"] == [], rep["findings"]


def test_a_wide_repeat_range_alone_needs_its_own_test():
    """A suspect a little jumpier than its references (max/median 1.25 and, in half of the
    alternations, 1.7 against 1.2; unsteadiness under 1.4) whose 8 repeats sending are
    steady but for two at 65%: without the highest and lowest they range 1.5x against the
    references' 1.06x, a ratio of 1.43, but six of its eight repeats lie closer to their
    median than the references' do, so the rank-sum test of the deviations does not support
    a wider spread and nothing is named. (On CPU-bound links a clean rank read so: spread
    ratio 1.49, unsteadiness 1.30, named unstable-host.)"""
    sus_out = [1.0, 1.0, 0.65, 1.0, 1.0, 0.66, 1.0, 1.01]
    ref_all = [1.0, 0.97, 1.03, 0.98, 1.02, 0.96, 1.04, 1.0]

    def bw_of(tag):
        if tag["role"] != "suspect":
            return 45.0 * ref_all[tag["alt"]]
        return 45.0 * (sus_out[tag["alt"]] if tag["dir"] == "out" else 1.0)
    rep, v = _jumpy_suspect(bw_of, 1.7)
    assert v["unstable_confidence"] >= 0.95 and v["unsteadiness_ratio"] < 1.4 and len(v["when"]) >= 4, v
    assert v["repeat_spread_ratio"] >= 1.4 and not v["unstable"], v
    assert not [f for f in rep["findings"] if f["kind"].startswith("unstable")], rep["findings"]


@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])
def test_check_under_launchers(tmp_path, launcher):
    """The same workflow when torchrun or mpirun starts the ranks: rank 0 prints the report
    once, and the document holds the collective and the pair rounds."""
    import os
    import subprocess
    import sys

    from comm_bench.system.netutil import free_port
    from cbtest import COMM_BENCH
    out = tmp_path / "c.json"
    args = ["check", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1", "--localize", "always", "--confirm", "0",
            "--no-progress", "-o", str(out)]
    bin_dir = Path(sys.executable).parent
    if launcher == "torchrun":
        cmd = [str(bin_dir / "torchrun"), "--nproc-per-node", "3", "--master-port", str(free_port()), "--no-python",
               COMM_BENCH, *args, "-t", "gloo"]
    else:
        cmd = [str(bin_dir / "mpirun"), "-np", "3", "--oversubscribe", COMM_BENCH, *args, "-t", "mpi"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    # --confirm 0: a suspect of loopback noise is left unconfirmed (exit 3)
    assert p.returncode in (0, 1, 3), p.stderr[-3000:]
    assert p.stdout.count("validate: ") == 1 and "localizing with pairwise-concurrent" in p.stdout, p.stdout[-3000:]
    doc = json.loads(out.read_text())
    assert [r["pattern"] for r in doc["results"]].count("collective") == 1
    assert len([r for r in doc["results"] if r["pattern"] == "pairwise-concurrent"]) == 6


@pytest.mark.parametrize("name, kinds", [
    # CI, netns fabric: a 6% host and a slow pair, plus pair 3->0 (rank 0 hosts the store and
    # writes the results) unsteady in 1 of its 8 alternations: it used to read "unstable-pair"
    ("rank0_jitter_with_6pct_host", ["bad-host", "bad-pair"]),
    # the toggling host of test_netns_diagnose: unsteady in 8 of 8 alternations
    ("intermittent_host", ["bad-host", "unstable-host"]),
    # the same test in CI on a loaded machine: unsteady in 8 of 8 and its repeats 2.1x apart
    # (references 1.15x), but the references' own jitter put the u + d ratio at 1.34 < 1.4,
    # and it read only "bad-host"
    ("intermittent_host_loaded_ci", ["bad-host", "unstable-host"]),
])
def test_instability_needs_most_alternations(name, kinds):
    """Recorded runs: instability is a finding only where it shows in at least half of the
    alternations, so one jittery alternation is not a fault and a toggling link still is."""
    from comm_bench.results.document import load

    doc = load(os.path.join(os.path.dirname(__file__), "data", "diagnose", f"{name}.json"))
    assert sorted(f["kind"] for f in check(doc, load_rules())["findings"]) == kinds


def _leaf_doc(slow):
    """12 one-rank nodes on 3 leaves of 4 (fabric.switch_of, routes unknown: a real run's
    --groups), every pair measured; slow(s, d) -> factor."""
    doc = make_doc(nodes=12, gpn=1, topo=False, sizes=(1 << 20,),
                   value=lambda s, d, size, rnd: 45.0 * rnd.uniform(0.97, 1.03) * slow(s, d))
    doc["fabric"] = {"switch_of": {f"node{i:03d}": f"leaf{i // 4}" for i in range(12)}}
    return doc


def test_a_leaf_uplink_is_named_where_routes_are_unknown():
    """Pairs leaving leaf0 at 30%, inside it normal: one bad-switch-port (its uplinks as one
    port), its four hosts not blamed; with the leaves unknown, its hosts are what is named."""
    doc = _leaf_doc(lambda s, d: 0.3 if (s // 4 == 0) != (d // 4 == 0) else 1.0)
    rep = check(copy.deepcopy(doc))
    assert [(f["kind"], f["switch"], f["port"]) for f in rep["findings"]] == [("bad-switch-port", "leaf0", "uplinks")]
    assert 0.25 < rep["findings"][0]["measured_gbs"] / rep["findings"][0]["peer_median_gbs"] < 0.35
    del doc["fabric"]
    named = {r for f in check(doc)["findings"] for r in f.get("ranks") or []}
    assert named == {0, 1, 2, 3}


def test_two_slow_hosts_on_a_leaf_are_not_its_uplink():
    """Hosts 0 and 1 at 30% (their pairs inside the leaf too): the hosts are named, not leaf0."""
    rep = check(_leaf_doc(lambda s, d: 0.3 if {s, d} & {0, 1} else 1.0))
    assert {f["kind"] for f in rep["findings"]} == {"bad-host"}, rep["findings"]
    assert {r for f in rep["findings"] for r in f["ranks"]} == {0, 1}


def test_confirm_references_are_links_of_the_suspects_class():
    """2 ranks a host: a cross-host suspect is re-measured against cross-host pairs, a rank
    across nodes, never against a same-host (loopback) pair; the naive turn order here would
    pick same-host ones. With no reference of its class, a suspect gets no rounds (a clean
    k8s run of 2 pods x 2 ranks named "host ... is slow: 57%" against loopback references)."""
    from comm_bench.topology.linkmap import LinkMap

    lm = LinkMap(make_doc(nodes=3, gpn=2, transport="tcp", topo=False, device=lambda r: "cpu"))
    cls = lambda a, b: lm.classify(a, b)[0]  # noqa: E731
    assert cls(0, 1) == "loopback" and cls(0, 2) != "loopback"
    pair = {"kind": "pair", "src": 0, "dst": 2, "why": ["slow"]}
    naive = {(s, d) for s, d, tag, _ in plan([pair], [4, 5, 1, 3], 4) if tag["role"] == "reference"}
    assert (4, 5) in naive      # what the plan did without the link map
    rounds = plan([pair], [4, 5, 1, 3], 8, lm)
    refs = [(s, d) for s, d, tag, _ in rounds if tag["role"] == "reference"]
    assert len(rounds) == 16 and len(refs) == 8 and all(cls(s, d) == cls(0, 2) for s, d in refs)
    rank = {"kind": "rank", "rank": 0, "why": ["slow"]}
    rounds = plan([rank], [1, 2, 3, 4, 5], 8, lm)
    sus = [(s, d) for s, d, tag, _ in rounds if tag["role"] == "suspect"]
    assert len(sus) == 16 and all(lm.node(d if s == 0 else s) != lm.node(0) for s, d in sus)
    for k in range(8):
        alt = [(s, d, tag["role"], tag["dir"]) for s, d, tag, _ in rounds if tag["alt"] == k]
        by = {(role, dr): cls(s, d) for s, d, role, dr in alt}
        assert by[("suspect", "out")] == by[("reference", "out")] and by[("suspect", "in")] == by[("reference", "in")]
    same_host = {"kind": "pair", "src": 0, "dst": 1, "why": ["slow"]}
    assert plan([same_host], [2, 4], 8, lm) == []
    assert plan([same_host], [2, 4], 8) != []
