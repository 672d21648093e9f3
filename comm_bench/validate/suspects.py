"""Suspects of a sweep's first pass: ranks a little slower or less steady than their peers,
and single pairs slower than theirs. A suspect is not a finding: the confirm phase
(confirm.py) re-measures it alternating with known-good pairs and decides (verdicts.py).

Per (op, size, link class) of the first pass at the checked sizes: each pair's median GB/s
relative to the group median; a rank's score is the median of its pairs' relative values
(both directions), so one bad host cannot drag the reference down. Instability of a record
is log(max / median) of its per-iteration times (latency_us, already in every record).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .pair_obs import Observations, PairColumns, segment_medians
from .stats import robust_z


def first_pass(recs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pair records that are not confirm-phase re-measurements."""
    return [r for r in recs if not isinstance(r.get("confirm"), dict)]


class PairTable:
    """First-pass pair values per (op, size, class) group; ranks' scores per class."""

    def __init__(self, cols: PairColumns, sizes: Iterable[int], obs: Observations | None = None) -> None:
        """cols: the first pass's PairColumns; obs: validate's Observations of them at these
        sizes, taken as they are when they hold no pair of a rank with itself (2 million
        medians at 1,024 ranks, not computed twice)."""
        if obs is None or (obs.s == obs.d).any():
            obs = Observations(cols, set(sizes), skip_self=True)
        self.obs = obs
        s, d, u = obs.inst
        keep = ~np.isnan(u) & (s != d)
        self.inst = (s[keep], d[keep], u[keep])     # each record's instability, by its pair
        self._scores: dict[tuple[Any, str], dict[int, float]] | None = None

    def rel(self) -> np.ndarray:
        """Each pair's value relative to its group's median (NaN where that median is 0)."""
        g = self.obs.gmed[self.obs.g]
        rel: np.ndarray = np.divide(self.obs.v, g, out=np.full(len(g), np.nan), where=g > 0)
        return rel

    def rank_scores(self) -> dict[tuple[Any, str], dict[int, float]]:
        """(class, direction) -> rank -> the median of its pairs' relative values; direction
        "out" (the rank sends), "in" (it receives) or "both": a NIC can fail one way only."""
        if self._scores is not None:
            return self._scores
        obs, rel = self.obs, self.rel()
        out: dict[tuple[Any, str], dict[int, float]] = {}
        ok = rel > 0
        for cls in sorted({k[2] for k in obs.keys}, key=str):
            m = ok & np.isin(obs.g, [g for g, k in enumerate(obs.keys) if k[2] == cls])
            s, d, v = obs.s[m], obs.d[m], rel[m]
            for way, ranks, vals in (("out", s, v), ("in", d, v), ("both", np.concatenate([s, d]),
                                                                   np.concatenate([v, v]))):
                if len(ranks):
                    out[(cls, way)] = dict(zip(*(x.tolist() for x in segment_medians(ranks, vals))))
        self._scores = out
        return out

    def rank_instability(self) -> dict[str, dict[int, float]]:
        """direction -> rank -> median instability of its pairs"""
        s, d, u = self.inst
        if not len(u):
            return {}
        return {way: dict(zip(*(x.tolist() for x in segment_medians(ranks, vals))))
                for way, ranks, vals in (("both", np.concatenate([s, d]), np.concatenate([u, u])),
                                         ("in", d, u), ("out", s, u))}

    def pair_counts(self, pairs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], int]:
        """pair -> how many groups measured it, for the given pairs."""
        obs, out = self.obs, {p: 0 for p in pairs}
        code, n = obs.codes()
        want = np.array([a * n + b for a, b in pairs], dtype=code.dtype)
        for a, b in zip(obs.s[np.isin(code, want)].tolist(), obs.d[np.isin(code, want)].tolist()):
            out[(a, b)] += 1
        return out


def suspect_key(s: dict[str, Any]) -> tuple[Any, ...]:
    """("rank", r) or ("pair", src, dst): one suspect's identity, whatever else it carries."""
    return ("rank", s["rank"]) if s["kind"] == "rank" else ("pair", s["src"], s["dst"])


def _worst_first(e: dict[str, Any], pair_ratio: float) -> tuple[Any, ...]:
    """Sort key of a suspect: slow ranks, ranks shared by several slow pairs, pairs as slow
    as a finding (at or below pair_ratio), ranks only unsteady, then the other pairs."""
    if e["kind"] == "pair":
        return (2 if e["score"] <= pair_ratio else 4, e["score"], e["src"], e["dst"])
    tier = 0 if e["score"] is not None else 1 if e.get("slow_pairs") else 3
    return (tier, e["score"] or 0.0, -e.get("slow_pairs", 0), e["rank"])


def find(table: PairTable, c: dict[str, Any], min_peers: int = 3, named: Iterable[dict[str, Any]] = (),
         pair_ratio: float = 0.0) -> tuple[list[dict[str, Any]], list[int]]:
    """Suspects: [{"kind": "rank", "rank", "why": [...], ...} | {"kind": "pair", "src", "dst", ...}]
    worst first, and the ranks that look best (references).
    named: suspects of that form that validate's first pass would report; they go first, up
    to c["max_named"] of them, and lesser suspects fill the list up to c["max_suspects"]: no
    would-be finding is left unconfirmed while lesser suspects are re-measured (a CI run
    reported a no-fault pair at 3x its peers' latency that was never re-measured).
    pair_ratio: pairs at or below this share of their group's median (as slow as validate
    names a pair) go before ranks that are only unsteady (a CI run's 4 suspects were a slow
    rank, two ranks unsteady at 1.41x and 1.43x, and a pair at 9%)."""
    z_lim, keep = c["suspect_z"], 1.0 - c["min_effect"]
    ranks: dict[int, dict[str, Any]] = {}
    for cls, per in sorted(table.rank_scores().items(), key=lambda kv: str(kv[0])):
        rs = sorted(per)
        if len(rs) < max(3, min_peers):
            continue
        scores = [per[r] for r in rs]
        zs, med = robust_z([math.log(s) for s in scores])
        for r, x, z in zip(rs, scores, zs):
            rel = x / math.exp(med)
            if -z > z_lim and rel < keep:
                e = ranks.setdefault(r, {"kind": "rank", "rank": r, "why": [], "score": rel})
                if "slow" not in e["why"]:
                    e["why"].append("slow")
                e["score"] = min(e["score"], rel)
    for way, inst in sorted(table.rank_instability().items()):
        if len(inst) < max(3, min_peers):
            continue
        rs = sorted(inst)
        zs, med = robust_z([inst[r] for r in rs])
        for r, z in zip(rs, zs):
            ratio = math.exp(inst[r] - med)
            if z > z_lim and ratio >= c["unstable_ratio"]:
                e = ranks.setdefault(r, {"kind": "rank", "rank": r, "why": [], "score": None})
                if "unstable" not in e["why"]:
                    e["why"].append("unstable")
                e["instability_ratio"] = max(ratio, e.get("instability_ratio", 0))
    pairs: dict[tuple[int, int], list[float]] = {}
    obs = table.obs
    # a slow rank explains its pairs, as in validate's check; an unsteady one does not: a CI
    # run flagged rank 4 unsteady and so never re-measured its pair 4->6 at 10%
    flagged = np.zeros(int(max(obs.s.max(initial=0), obs.d.max(initial=0))) + 1, dtype=bool)
    flagged[[r for r, e in ranks.items() if "slow" in e["why"] and r < len(flagged)]] = True
    for gi in range(len(obs.keys)):
        sl = obs.group(gi)
        s, d, gv = obs.s[sl], obs.d[sl], obs.v[sl]
        peers = np.flatnonzero(~flagged[s] & ~flagged[d])
        if len(peers) < max(3, min_peers):
            continue
        zs, med = robust_z(np.log(np.maximum(gv[peers], 1e-12)))
        prel = gv[peers] / math.exp(med)
        for i in np.flatnonzero((-np.array(zs) > z_lim) & (prel < keep)).tolist():
            pairs.setdefault((int(s[peers[i]]), int(d[peers[i]])), []).append(float(prel[i]))
    nsizes = table.pair_counts(list(pairs))
    pairs = {p: v for p, v in pairs.items() if len(v) >= 0.5 * nsizes[p]}
    # several slow pairs sharing one end, while that end's median is fine: a link that is
    # slow only part of the time (the pairs measured then), so that end is the suspect
    while pairs:
        ends: dict[int, int] = {}
        for p in pairs:
            for r in p:
                ends[r] = ends.get(r, 0) + 1
        r, n = min(ends.items(), key=lambda kv: (-kv[1], kv[0]))
        if n < 3:       # two can be one slow pair and chance; a single slow pair stays a pair
            break
        e = ranks.setdefault(r, {"kind": "rank", "rank": r, "why": [], "score": None})
        if "unstable" not in e["why"]:
            e["why"].append("unstable")
        e["slow_pairs"] = n
        pairs = {p: v for p, v in pairs.items() if r not in p}
    out = sorted([*ranks.values(), *({"kind": "pair", "src": p[0], "dst": p[1], "why": ["slow"], "score": min(v)}
                                     for p, v in pairs.items())], key=lambda e: _worst_first(e, pair_ratio))
    by_key = {suspect_key(e): e for e in named}
    first = list(by_key.values())[:int(c["max_named"])]
    rest = [e for e in out if suspect_key(e) not in {suspect_key(e) for e in first}]
    out = first + rest[:max(0, int(c["max_suspects"]) - len(first))]
    score: dict[int, float] = {}
    for per in table.rank_scores().values():
        for r, v in per.items():
            score[r] = min(score.get(r, math.inf), v)
    steady = table.rank_instability().get("both", {})
    while True:      # the least suspect go back to the references until two are left
        sus = {r for e in out for r in ((e["rank"],) if e["kind"] == "rank" else (e["src"], e["dst"]))}
        good = sorted((r for r in score if r not in sus), key=lambda r: (-score[r], steady.get(r, 0.0), r))
        clean = [r for r in good if r not in ranks]    # flagged ranks left out by max_suspects
        good = clean if len(clean) >= 2 else good
        if len(good) >= 2 or not out:
            return out, good
        out = out[:-1]
