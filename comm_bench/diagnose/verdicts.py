"""What the confirm phase's records say about each suspect.

Per alternation k the suspect's measurement(s) and their reference(s) give one paired
difference: the mean log ratio of GB/s (suspect / reference, per direction), and the
difference of their instability (log of per-iteration max / median). A one-sided
Wilcoxon signed-rank test over the K differences gives p; confidence = 1 - p. A suspect
is slow when confidence >= rules.confirm.min_confidence and its median ratio is at most
1 - min_effect; unstable when its instability is higher with that confidence and its
per-iteration max/median is at least unstable_ratio x the references'.
"""
from __future__ import annotations

import math
import statistics

from .stats import confidence, signed_rank_p
from .suspects import instability


def _spread(values):
    return max(values) / min(values) if values and min(values) > 0 else None


def judge(recs, rules, value):
    """recs: the confirm-phase pair records; value(rec) -> GB/s. [verdict] by suspect id."""
    c = rules["confirm"]
    alpha = 1.0 - c["min_confidence"]
    by_id = {}
    for r in recs:
        by_id.setdefault(r["confirm"].get("id"), []).append(r)
    out = []
    for sid, rs in sorted(by_id.items(), key=lambda kv: str(kv[0])):
        tag = rs[0]["confirm"]
        alts = {}
        for r in rs:
            t = r["confirm"]
            alts.setdefault(t.get("alt"), {})[(t.get("role"), t.get("dir"))] = r
        bw_d, in_d, when = [], [], []
        sus_bw, ref_bw, sus_in, ref_in = {}, {}, [], []
        for k, m in sorted(alts.items(), key=lambda kv: str(kv[0])):
            db, di = [], []
            for d in ("out", "in"):
                s, g = m.get(("suspect", d)), m.get(("reference", d))
                if not (s and g):
                    continue
                vs, vg = value(s), value(g)
                if vs and vg and vs > 0 and vg > 0:
                    db.append(math.log(vs / vg))
                    sus_bw.setdefault(d, []).append(vs)
                    ref_bw.setdefault(d, []).append(vg)
                us, ug = instability(s), instability(g)
                if us is not None and ug is not None:
                    di.append(us - ug)
                    sus_in.append(us)
                    ref_in.append(ug)
                    if math.exp(us - ug) >= c["unstable_ratio"]:
                        when.append({"alt": k, "round": s.get("round"), "dir": d,
                                     "max_over_median": round(math.exp(us), 3)})
            if db:
                bw_d.append(statistics.fmean(db))
            if di:
                in_d.append(statistics.fmean(di))
        v = {"id": sid, "kind": tag.get("kind"), "target": tag.get("target") or {}, "why": tag.get("why") or [],
             "alternations": len(bw_d)}
        if bw_d:
            p = signed_rank_p(bw_d)
            ratio = math.exp(statistics.median(bw_d))
            v.update(ratio=round(ratio, 4), slow_confidence=confidence(p),
                     slow=p <= alpha and ratio <= 1.0 - c["min_effect"],
                     reproduced=ratio <= 1.0 - c["min_effect"],
                     suspect_gbs=statistics.median([x for xs in sus_bw.values() for x in xs]),
                     reference_gbs=statistics.median([x for xs in ref_bw.values() for x in xs]),
                     repeat_spread={d: _spread(xs) for d, xs in sus_bw.items()},
                     reference_repeat_spread={d: _spread(xs) for d, xs in ref_bw.items()})
        if in_d:
            p = signed_rank_p([-x for x in in_d])
            ratio = math.exp(statistics.median(sus_in) - statistics.median(ref_in))
            v.update(unstable_confidence=confidence(p), instability_ratio=round(ratio, 3),
                     max_over_median=round(math.exp(statistics.median(sus_in)), 3),
                     reference_max_over_median=round(math.exp(statistics.median(ref_in)), 3),
                     unstable=p <= alpha and ratio >= c["unstable_ratio"], when=when)
        out.append(v)
    return out
