"""validate on --mode lat pair records (comm_bench/validate/latency.py): a host, a rank
or a pair that answers slowly is named, nothing else is, and noise is not a finding.
The live path (a host delayed with netem on a namespace fabric) is in test_netns_latency.py."""
import json

import pytest

from cbtest import run_cli
from test_heatmap import make_doc, write

SIZES = (8, 64, 1024)


def lat_doc(nodes=8, gpn=1, transport="tcp", us=None, seed=0):
    """Latency records as a `--mode lat` pairwise sweep writes them; us(src, dst, size,
    rnd) -> one-way median latency (default ~20 us, +-10%)."""
    doc = make_doc(nodes=nodes, gpn=gpn, transport=transport, sizes=SIZES, seed=seed, topo=None,
                   value=lambda s, d, size, rnd: 1.0)
    import random
    rnd = random.Random(seed)
    for r in doc["results"]:
        t = (us or (lambda s, d, size, rnd: 20.0 * rnd.uniform(0.9, 1.1)))(r["src"], r["dst"], r["size"], rnd)
        r.update(mode="lat", time_us=t, algbw=r["size"] / t / 1e3, busbw=r["size"] / t / 1e3,
                 latency_us={"min": 0.9 * t, "median": t, "max": 3 * t, "avg": t, "stdev": 0.1 * t,
                             "p99": 2 * t, "p999": 3 * t})
    return doc


def validate(tmp_path, doc, *args, rc=None):
    p = run_cli("validate", write(tmp_path, doc), "--json", *args)
    assert p.returncode == rc if rc is not None else p.returncode in (0, 1), (p.stdout[-2000:], p.stderr)
    return json.loads(p.stdout)


def test_steady_latency_passes(tmp_path):
    rep = validate(tmp_path, lat_doc(), rc=0)
    assert rep["findings"] == [] and rep["checked"]["latency"]["ranks_compared"] == 8
    assert [g["size"] for g in rep["checked"]["latency"]["groups"]] == list(SIZES)
    text = run_cli("validate", write(tmp_path, lat_doc(), "t.json")).stdout
    assert "latency of 56 pairs, 8 ranks" in text and "us one-way" in text and "PASS" in text


@pytest.mark.parametrize("transport,factor,named", [("tcp", 5.0, True), ("tcp", 1.6, False),
                                                    ("nccl", 2.5, True), ("nccl", 1.6, False)])
def test_slow_host_named_above_its_ratio(tmp_path, transport, factor, named):
    """A host whose every pair answers factor x slower: named at or above the transport's
    latency_ratio (tcp 3, others 2), not below it (a loaded host's noise)."""
    doc = lat_doc(transport=transport, us=lambda s, d, size, rnd: 20.0 * rnd.uniform(0.9, 1.1) * (factor if 5 in (s, d) else 1))
    rep = validate(tmp_path, doc, rc=1 if named else 0)
    if not named:
        assert rep["findings"] == []
        return
    assert [f["kind"] for f in rep["findings"]] == ["high-latency-host"], rep["findings"]
    f = rep["findings"][0]
    assert f["host"] == "node005" and f["ranks"] == [5] and f["confidence"] >= 0.95
    assert f["measured_us"] / f["peer_median_us"] == pytest.approx(factor, rel=0.2)
    assert "node005" in f["message"] and "answers slowly" in f["message"]


def test_slow_rank_of_a_host_is_a_rank(tmp_path):
    doc = lat_doc(nodes=4, gpn=2, us=lambda s, d, size, rnd: 20.0 * rnd.uniform(0.9, 1.1) * (6 if 3 in (s, d) else 1))
    rep = validate(tmp_path, doc, rc=1)
    assert [(f["kind"], f["ranks"]) for f in rep["findings"]] == [("high-latency-rank", [3])], rep["findings"]


def test_one_slow_pair_named_alone(tmp_path):
    doc = lat_doc(us=lambda s, d, size, rnd: 20.0 * rnd.uniform(0.9, 1.1) * (10 if (s, d) == (2, 6) else 1))
    rep = validate(tmp_path, doc, rc=1)
    assert [f["kind"] for f in rep["findings"]] == ["high-latency-pair"], rep["findings"]
    f = rep["findings"][0]
    assert (f["src"], f["dst"]) == (2, 6) and f["size"] in f["flagged_sizes"] and f["confidence"] > 0.8
    assert f["measured_us"] / f["peer_median_us"] == pytest.approx(f["latency_ratio"], rel=1e-3)
    assert f["latency_ratio"] > 6
    p = run_cli("validate", write(tmp_path, doc, "j.json"), "--junit", tmp_path / "j.xml")
    assert p.returncode == 1
    junit = (tmp_path / "j.xml").read_text()
    assert 'name="high-latency-pair"' in junit and junit.count("<failure") == 1 and "latency" in junit


def test_a_pair_finding_quotes_a_size_it_was_flagged_at(tmp_path):
    """A pair slow at two sizes of three and faster than its peers at the third: the finding
    quotes the size where it is furthest above its group's median, with that size's median
    (a CI run printed '3.31 us one-way at 8B, an outlier ... (median 3.54 us)')."""
    slow = {8: 0.8, 64: 12.0, 1024: 9.0}
    doc = lat_doc(us=lambda s, d, size, rnd: 20.0 * rnd.uniform(0.95, 1.05) * (slow[size] if (s, d) == (2, 6) else 1))
    rep = validate(tmp_path, doc, rc=1)
    [f] = rep["findings"]
    assert f["kind"] == "high-latency-pair" and f["size"] == 64 and f["flagged_sizes"] == [64, 1024], f
    assert f["measured_us"] > 10 * f["peer_median_us"], f
    assert "at 64 B" in f["message"].replace("64B", "64 B") and "2 of 3 sizes" in f["message"], f["message"]


def test_two_ranks_have_no_peers(tmp_path):
    p = run_cli("validate", write(tmp_path, lat_doc(nodes=2)))
    assert p.returncode == 2 and "latency records of 2 ranks" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("rule", ["latency_ratio: 0.5", "latency_pair_ratio: -1", "latency_ratio: .nan"])
def test_latency_rules_checked(tmp_path, rule):
    rules = tmp_path / "r.yaml"
    rules.write_text(f"outliers: {{{rule}}}\n")
    p = run_cli("validate", write(tmp_path, lat_doc()), "--rules", rules)
    assert p.returncode == 2 and "latency" in p.stderr and "Traceback" not in p.stderr, p.stderr
