"""validate's latency check, on `--mode lat` pair records (src, dst and the median one-way
latency of a ping-pong): which host, rank or pair is slow to answer.

Per (op, size, link class) group, each pair's latency (the median over its repeats) is
taken relative to the group's median. A rank's score is the median of its pairs'
relative latencies, of every class; a rank is named when its score is a robust high
outlier among the ranks (z of the log > outliers.z) and at least outliers.latency_ratio x
their median, and a host when every rank of it is. A pair that no named rank explains is
named when it is such an outlier among its group's pairs, at latency_pair_ratio x, at
min_size_fraction or more of its sizes. Latency noise is multiplicative, as bandwidth's
is, so the bandwidth check's robust_low does the test, on 1 / latency. A finding's
confidence is 1 - p of a signed-rank test that its pairs' relative latencies are above 1.
"""
from __future__ import annotations

import math
import statistics
from typing import Any

from .stats import confidence, robust_low, signed_rank_p
from ..results.records import latency_pair_records, median_latency_us, superseded
from ..sizes import human_size
from .finding_kinds import finding


def check_latency(doc: dict[str, Any], lm: Any,
                  o: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(findings, checked) of the latency records; o: the transport's outlier rules.
    checked is None when the document holds no latency pair records; its ranks_compared
    is 0 when there are fewer than the min_peers ranks (3 at least) that a comparison needs."""
    recs = [r for r in latency_pair_records(doc) if superseded(r) is None and r["src"] != r["dst"]
            and not isinstance(r.get("confirm"), dict) and (median_latency_us(r) or 0) > 0]
    if not recs:
        return [], None
    groups: dict[tuple[Any, int, str], dict[tuple[int, int], list[float]]] = {}     # (op, size, class) -> {pair: [us]}
    for r in recs:
        key = (r.get("op"), r["size"], lm.classify(r["src"], r["dst"], r)[0])
        groups.setdefault(key, {}).setdefault((r["src"], r["dst"]), []).append(median_latency_us(r) or 0.0)
    obs = {key: {p: statistics.median(v) for p, v in pairs.items()} for key, pairs in groups.items()}
    gmed = {key: statistics.median(pairs.values()) for key, pairs in obs.items()}
    # a rank's pairs of every class, each relative to its own group: one slow rank of a
    # host then leaves its host-mate's score alone, though their one intra-host pair is slow
    per_rank: dict[int, list[float]] = {}   # rank -> [relative latency]
    for key, pairs in obs.items():
        for (s, d), v in pairs.items():
            for rank in (s, d):
                per_rank.setdefault(rank, []).append(v / gmed[key])
    slow: dict[int, tuple[float, float]] = {}       # rank -> (score, the ranks' median score)
    ranks = sorted(per_rank)
    compared = len(ranks) if len(ranks) >= max(3, int(o["min_peers"])) else 0
    if compared:
        scores = [statistics.median(per_rank[r]) for r in ranks]
        idx, med, _ = robust_low([1.0 / s for s in scores], o["z"], 1.0 / o["latency_ratio"])
        for i in idx:
            slow[ranks[i]] = (scores[i], 1.0 / med)  # type: ignore[operator]  # med: set when idx is
    flagged: dict[tuple[int, int], set[int]] = {}   # pair -> sizes where it is an outlier / measured
    sizes_of: dict[tuple[int, int], set[int]] = {}
    for key, pairs in obs.items():
        for p in pairs:
            sizes_of.setdefault(p, set()).add(key[1])
        rest = [p for p in pairs if p[0] not in slow and p[1] not in slow]
        if len(rest) < max(3, int(o["min_peers"])):
            continue
        idx, _, _ = robust_low([1.0 / pairs[p] for p in rest], o["z"], 1.0 / o["latency_pair_ratio"])
        for i in idx:
            flagged.setdefault(rest[i], set()).add(key[1])
    bad_pairs = sorted(p for p, s in flagged.items() if len(s) >= o["min_size_fraction"] * len(sizes_of[p]))
    findings = _rank_findings(slow, per_rank, lm, obs) + [_pair_finding(p, flagged[p], lm, obs, gmed)
                                                          for p in bad_pairs]
    checked = {"pairs": len(sizes_of), "ranks": len(per_rank),
               "ranks_compared": compared,
               "groups": [{"op": k[0], "size": k[1], "class": k[2], "pairs": len(v), "median_us": gmed[k]}
                          for k, v in sorted(obs.items(), key=lambda kv: (str(kv[0][0]), kv[0][1], kv[0][2]))]}
    return findings, checked


def us(v: float) -> str:
    """A latency for reading: 3 significant digits, whole microseconds from 1,000 up (no 1.45e+03)."""
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"


def times(r: float) -> str:
    """A ratio for reading: 2 significant digits, whole from 100 up (no 1.5e+02)."""
    return f"{r:.2g}" if r < 100 else f"{r:.0f}"


def _medians(obs: dict[tuple[Any, int, str], dict[tuple[int, int], float]],
             ranks: set[int]) -> tuple[float | None, float | None, int]:
    """The median latency of the pairs with an end in `ranks` at the smallest size, the
    others' median there, and that size."""
    size = min(k[1] for k in obs)
    mine = [v for k, pairs in obs.items() if k[1] == size for p, v in pairs.items() if set(p) & ranks]
    rest = [v for k, pairs in obs.items() if k[1] == size for p, v in pairs.items() if not set(p) & ranks]
    return (statistics.median(mine) if mine else None, statistics.median(rest) if rest else None, size)


def _above_one(rels: list[float]) -> float:
    """Confidence that relative latencies lie above 1."""
    return confidence(signed_rank_p([-math.log(x) for x in rels if x > 0]))


def _rank_findings(slow: dict[int, tuple[float, float]], per_rank: dict[int, list[float]], lm: Any,
                   obs: dict[tuple[Any, int, str], dict[tuple[int, int], float]]) -> list[dict[str, Any]]:
    out = []
    for node, rs, whole in lm.by_node(slow):
        for group in ([rs] if whole else [[r] for r in rs]):
            mine, rest, size = _medians(obs, set(group))
            ratio = statistics.median(slow[r][0] / slow[r][1] for r in group)
            who = (f"host {node} (rank{'s' if len(group) > 1 else ''} {', '.join(map(str, group))})" if whole
                   else f"rank {group[0]} on host {node}")
            at = (f": {mine:.3g} us one-way at {human_size(size)} where the others' pairs take {rest:.3g} us"
                  if mine is not None and rest is not None else "")
            out.append(finding("high-latency-host" if whole else "high-latency-rank",
                               f"{who} answers slowly{at} ({ratio:.2g}x its peers' latency over every size)",
                               host=node, ranks=group, rank=group[0] if len(group) == 1 else None,
                               measured_us=mine, peer_median_us=rest, size=size, latency_ratio=round(ratio, 3),
                               confidence=min(_above_one(per_rank[r]) for r in group)))
    return out


def _pair_finding(p: tuple[int, int], flagged: set[int], lm: Any,
                  obs: dict[tuple[Any, int, str], dict[tuple[int, int], float]],
                  gmed: dict[tuple[Any, int, str], float]) -> dict[str, Any]:
    """The pair's finding quotes the size where it is furthest above its group's median, of
    the sizes it was flagged at: the figure and the median the rule held it against there
    (quoting another size had a finding print 3.31 us against a median of 3.54 us)."""
    keys = sorted((k for k in obs if p in obs[k]), key=lambda k: k[1])
    key = max((k for k in keys if k[1] in flagged), key=lambda k: (obs[k][p] / gmed[k], -k[1]))
    v = obs[key][p]
    return finding("high-latency-pair", f"pair {lm.label(p[0])} -> {lm.label(p[1])} (ranks {p[0]}->{p[1]}): "
                   f"{us(v)} us one-way at {human_size(key[1])}, {times(v / gmed[key])}x the median of its "
                   f"{key[2]} peers there ({us(gmed[key])} us); an outlier at {len(flagged)} of {len(keys)} sizes",
                   src=p[0], dst=p[1], src_host=lm.node(p[0]), dst_host=lm.node(p[1]), link_class=key[2],
                   size=key[1], measured_us=v, peer_median_us=gmed[key], latency_ratio=round(v / gmed[key], 3),
                   flagged_sizes=sorted(flagged),
                   confidence=_above_one([obs[k][p] / gmed[k] for k in keys]))
