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
import statistics

from .stats import robust_z


def first_pass(recs):
    """Pair records that are not confirm-phase re-measurements."""
    return [r for r in recs if not isinstance(r.get("confirm"), dict)]


def instability(rec):
    """log(max / median) of a record's per-iteration times, or None."""
    lat = rec.get("latency_us") if isinstance(rec.get("latency_us"), dict) else {}
    mx, med = lat.get("max"), lat.get("median")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (mx, med)):
        return None
    return math.log(mx / med)


class PairTable:
    """First-pass pair values per (op, size, class) group; ranks' scores per class."""

    def __init__(self, recs, lm, sizes, value, groups=None, medians=None):
        """groups: validate's own {(op, size, class): {pair: [GB/s]}} when it has them;
        medians: its (obs, gmed) of them, taken as they are when groups hold no pair of a
        rank with itself (137,000 medians at 1,024 ranks, not computed twice)."""
        self.groups = {}         # key -> {(src, dst): [GB/s]}
        self.inst = {}           # (src, dst) -> [instability]
        for r in recs:
            if r["size"] not in sizes or r["src"] == r["dst"]:
                continue
            if groups is None:
                cls, _ = lm.classify(r["src"], r["dst"], r)
                key = (r.get("op"), r["size"], cls)
                self.groups.setdefault(key, {}).setdefault((r["src"], r["dst"]), []).append(value(r))
            u = instability(r)
            if u is not None:
                self.inst.setdefault((r["src"], r["dst"]), []).append(u)
        if groups is not None:
            self.groups = {k: {p: v for p, v in ps.items() if p[0] != p[1]} for k, ps in groups.items()}
        self._rank_rels = None
        if medians is not None and sum(map(len, self.groups.values())) == sum(map(len, groups.values())):
            self.obs, self.gmed = medians
            return
        self.obs = {(k, p): statistics.median(v) for k, ps in self.groups.items() for p, v in ps.items()}
        self.gmed = {k: statistics.median(self.obs[(k, p)] for p in ps) for k, ps in self.groups.items()}

    def rel(self, key, pair):
        g = self.gmed[key]
        return self.obs[(key, pair)] / g if g > 0 else None

    def rank_rels(self):
        """(class, direction) -> rank -> [relative values of its pairs]; direction "out"
        (the rank sends), "in" (it receives) or "both": a NIC can fail one way only."""
        if self._rank_rels is not None:
            return self._rank_rels
        out = self._rank_rels = {}
        for (key, (s, d)) in self.obs:
            v = self.rel(key, (s, d))
            if v is None or v <= 0:
                continue
            for r, way in ((s, "out"), (d, "in")):
                for w in (way, "both"):
                    out.setdefault((key[2], w), {}).setdefault(r, []).append(v)
        return out

    def rank_instability(self):
        """direction -> rank -> median instability of its pairs"""
        per = {}
        for (s, d), us in self.inst.items():
            for r, way in ((s, "out"), (d, "in")):
                for w in (way, "both"):
                    per.setdefault(w, {}).setdefault(r, []).extend(us)
        return {w: {r: statistics.median(us) for r, us in rs.items()} for w, rs in per.items()}


def find(table, c, min_peers=3):
    """Suspects: [{"kind": "rank", "rank", "why": [...], ...} | {"kind": "pair", "src", "dst", ...}]
    at most c["max_suspects"], worst first, and the ranks that look best (references)."""
    z_lim, keep = c["suspect_z"], 1.0 - c["min_effect"]
    ranks = {}
    for cls, per in sorted(table.rank_rels().items(), key=lambda kv: str(kv[0])):
        rs = sorted(per)
        if len(rs) < max(3, min_peers):
            continue
        scores = [statistics.median(per[r]) for r in rs]
        zs, med = robust_z([math.log(s) for s in scores])
        for r, s, z in zip(rs, scores, zs):
            rel = s / math.exp(med)
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
    pairs = {}
    for key, ps in table.groups.items():
        rest = [p for p in ps if p[0] not in ranks and p[1] not in ranks]
        if len(rest) < max(3, min_peers):
            continue
        zs, med = robust_z([math.log(max(table.obs[(key, p)], 1e-12)) for p in rest])
        for p, z in zip(rest, zs):
            rel = table.obs[(key, p)] / math.exp(med)
            if -z > z_lim and rel < keep:
                pairs.setdefault(p, []).append(rel)
    nsizes = {}
    for key, ps in table.groups.items():
        for p in ps:
            nsizes[p] = nsizes.get(p, 0) + 1
    pairs = {p: v for p, v in pairs.items() if len(v) >= 0.5 * nsizes[p]}
    # several slow pairs sharing one end, while that end's median is fine: a link that is
    # slow only part of the time (the pairs measured then), so that end is the suspect
    while pairs:
        ends = {}
        for p in pairs:
            for r in p:
                ends[r] = ends.get(r, 0) + 1
        r, n = min(ends.items(), key=lambda kv: (-kv[1], kv[0]))
        if n < 3:       # two can be one slow pair and chance; a single slow pair stays a pair
            break
        ranks[r] = {"kind": "rank", "rank": r, "why": ["unstable"], "score": None, "slow_pairs": n}
        pairs = {p: v for p, v in pairs.items() if r not in p}
    # worst first: slow ranks, ranks with several slow pairs, then single pairs
    out = sorted(ranks.values(), key=lambda e: (e["score"] is None, e["score"] or 0.0, -e.get("slow_pairs", 0),
                                                e["rank"]))
    out += sorted(({"kind": "pair", "src": p[0], "dst": p[1], "why": ["slow"], "score": min(v)}
                   for p, v in pairs.items()),
                  key=lambda e: (e["score"], e["src"], e["dst"]))
    score = {}
    for per in table.rank_rels().values():
        for r, v in per.items():
            score[r] = min(score.get(r, math.inf), statistics.median(v))
    steady = table.rank_instability().get("both", {})
    out = out[:int(c["max_suspects"])]
    while True:      # the least suspect go back to the references until two are left
        sus = {r for e in out for r in ((e["rank"],) if e["kind"] == "rank" else (e["src"], e["dst"]))}
        good = sorted((r for r in score if r not in sus), key=lambda r: (-score[r], steady.get(r, 0.0), r))
        clean = [r for r in good if r not in ranks]    # flagged ranks left out by max_suspects
        good = clean if len(clean) >= 2 else good
        if len(good) >= 2 or not out:
            return out, good
        out = out[:-1]
