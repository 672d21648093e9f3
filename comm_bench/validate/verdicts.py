"""What the confirm phase's records say about each suspect.

Per alternation k the suspect's measurement(s) and their references give one paired
comparison per direction:
- speed: log(GB/s of the suspect / GB/s of its reference);
- instability: u + d of the suspect minus that of its reference, where u = log(max /
  median) of the record's per-iteration times (within one measurement) and d = |log GB/s
  - the median of its K repeats| (between measurements: a link that toggles between two
  rates shows in one or the other).
A one-sided Wilcoxon signed-rank test over the K comparisons (directions averaged) gives
p; confidence = 1 - p. Slow: confidence >= rules.confirm.min_confidence, and both the median
of the paired ratios and the ratio of the medians (the two GB/s a finding prints) <= 1 -
min_effect: on a loaded host a few alternations that swing together can make the paired
median read 86% while the suspect's own median ran 99.6% of its references' (a recorded CI
run, 3 loopback ranks on 2 cores: rank 0 named "slow" at 0.947 GB/s against 0.951). A
device that is slow shows in both. A rank suspect's sending and receiving halves are also
judged each on its own (_slow_direction): a fault of one direction is slow there alone. Unstable: that confidence, an effect of at least
unstable_ratio (the median of its u + d over the references' median u + d, in exp, or the
spread of its K repeats over theirs, each without its highest and lowest), and unsteady (u
or d alone at least unstable_ratio x its reference's) in at least half of the alternations: an intermittent link shows in most of
them (8 of 8 in the netns test), while one jittery alternation of a pair with rank 0 (the
store's host and the writer) had made a no-fault pair read "unstable". The repeat spread
counts because on a loaded host the references' own per-iteration jitter (u) grows and can
hide a link that toggles between two rates (a recorded CI run: u + d ratio 1.34, repeats
2.1x apart against the references' 1.15x); it counts where a rank-sum test of the repeats'
deviations supports it (_wider_repeats).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from .stats import confidence, rank_sum_p, signed_rank_p
from .pair_obs import instability


def _spread(values: Sequence[float]) -> float | None:
    """How far apart K repeats are: max / min without the one highest and lowest when K >= 5.
    One odd repeat is not a spread: a CI run named a no-fault rank unstable on 8 repeats
    2.5x apart max / min, against its references' 1.5x; a link toggling between two rates
    keeps its spread after the trim."""
    if not values or min(values) <= 0:
        return None
    v = sorted(values)
    if len(v) >= 5:
        v = v[1:-1]
    return v[-1] / v[0]


def _deviations(values: Sequence[float]) -> list[float]:
    """|log value - the median log value| of each repeat: how far each lies from the rest."""
    logs = [math.log(x) for x in values]
    mid = statistics.median(logs)
    return [abs(x - mid) for x in logs]


def _wider_repeats(sus_bw: dict[Any, list[float]], ref_bw: dict[Any, list[float]],
                   ratios: dict[Any, float], alpha: float) -> float:
    """The largest repeat-spread ratio (suspect over references) of a direction whose repeats
    lie farther from their median than the references' do by a one-sided rank-sum test of the
    two sides' deviations, at alpha / the number of directions; 1.0 when none. A ratio of
    two trimmed ranges of 8 repeats is itself noisy: on CPU-bound links a clean rank's read
    1.49x its references' (unsteadiness 1.30) and it was named unstable; a link toggling
    between two rates moves every repeat away from the median, which the test sees.
    ratios: each direction's spread ratio, where both sides have one."""
    return max((r for d, r in ratios.items()
                if rank_sum_p(_deviations(sus_bw[d]), _deviations(ref_bw[d])) * len(ratios) <= alpha),
               default=1.0)


def _slow_direction(rows: dict[tuple[Any, Any], dict[str, Any]], c: dict[str, Any],
                    sus_bw: dict[Any, list[float]], ref_bw: dict[Any, list[float]]) -> dict[str, Any] | None:
    """A rank suspect is measured sending and receiving; pooling the two halves a fault
    of one direction (a CI run: rank 5 sending at 0.71-0.79x its references in 7 of 8
    alternations, receiving at 1.00x, pooled 0.87 and its median 1.00: withdrawn). Each
    direction is tested on its own, at alpha / the number of directions (Bonferroni), with
    the same two effect bars as the pooled test (sus_bw / ref_bw: each direction's GB/s, as
    _judge gathered them). The slowest such direction, or None."""
    dirs = sorted({d for _, d in rows}, key=str)
    if len(dirs) < 2:
        return None                  # one direction: the pooled test is this test
    alpha = (1.0 - c["min_confidence"]) / len(dirs)
    found = []
    for d in dirs:
        ms = [m for (_, dd), m in rows.items() if dd == d]
        diffs = [math.log(m["suspect"][0] / m["reference"][0]) for m in ms]
        p = signed_rank_p(diffs)
        ratio = math.exp(statistics.median(diffs))
        sus, ref = statistics.median(sus_bw[d]), statistics.median(ref_bw[d])
        if p <= alpha and max(ratio, sus / ref) <= 1.0 - c["min_effect"]:
            found.append({"direction": d, "ratio": round(ratio, 4), "slow_confidence": confidence(p * len(dirs)),
                          "suspect_gbs": sus, "reference_gbs": ref})
    return min(found, key=lambda f: f["ratio"], default=None)


def judge(recs: list[dict[str, Any]], rules: dict[str, Any],
          value: Callable[[dict[str, Any]], float | None]) -> list[dict[str, Any]]:
    """recs: the confirm-phase pair records; value(rec) -> GB/s. [verdict] by suspect id."""
    c = rules["confirm"]
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for r in recs:
        by_id.setdefault(r["confirm"].get("id"), []).append(r)
    return [_judge(rs, c, value) for _, rs in sorted(by_id.items(), key=lambda kv: str(kv[0]))]


def _judge(rs: list[dict[str, Any]], c: dict[str, Any],
           value: Callable[[dict[str, Any]], float | None]) -> dict[str, Any]:
    alpha = 1.0 - c["min_confidence"]
    tag = rs[0]["confirm"]
    rows: dict[tuple[Any, Any], dict[str, Any]] = {}      # (alt, dir) -> {role: (GB/s, u, record)}
    for r in rs:
        t = r["confirm"]
        gbs = value(r)
        if gbs and gbs > 0:
            rows.setdefault((t.get("alt"), t.get("dir")), {})[t.get("role")] = (gbs, instability(r), r)
    rows = {k: m for k, m in rows.items() if "suspect" in m and "reference" in m}
    logmed: dict[tuple[str, Any], float] = {}
    for role in ("suspect", "reference"):
        for d in {k[1] for k in rows}:
            logmed[(role, d)] = statistics.median(math.log(m[role][0]) for k, m in rows.items() if k[1] == d)
    speed: dict[Any, list[float]] = {}
    unsteady: dict[Any, list[float]] = {}
    when: list[dict[str, Any]] = []
    sus_bw: dict[Any, list[float]] = {}
    ref_bw: dict[Any, list[float]] = {}
    sus_u: list[float] = []
    ref_u: list[float] = []
    sus_ud: list[float] = []
    ref_ud: list[float] = []
    for (k, d), m in rows.items():
        (vs, us, rec), (vg, ug, _) = m["suspect"], m["reference"]
        speed.setdefault(k, []).append(math.log(vs / vg))
        sus_bw.setdefault(d, []).append(vs)
        ref_bw.setdefault(d, []).append(vg)
        if us is not None and ug is not None:
            sus_u.append(us)
            ref_u.append(ug)
            ds, dg = abs(math.log(vs) - logmed[("suspect", d)]), abs(math.log(vg) - logmed[("reference", d)])
            unsteady.setdefault(k, []).append((us + ds) - (ug + dg))
            sus_ud.append(us + ds)
            ref_ud.append(ug + dg)
            if math.exp(us - ug) >= c["unstable_ratio"] or math.exp(ds - dg) >= c["unstable_ratio"]:
                when.append({"alt": k, "round": rec.get("round"), "dir": d, "gbs": round(vs, 4),
                             "max_over_median": round(math.exp(us), 3)})
    v: dict[str, Any] = {"kind": tag.get("kind"), "target": tag.get("target") or {}, "why": tag.get("why") or [],
         "alternations": len(speed)}
    if not speed:
        return v
    diffs = [statistics.fmean(x) for _, x in sorted(speed.items(), key=lambda kv: str(kv[0]))]
    p = signed_rank_p(diffs)
    ratio = math.exp(statistics.median(diffs))
    sus_gbs = statistics.median([x for xs in sus_bw.values() for x in xs])
    ref_gbs = statistics.median([x for xs in ref_bw.values() for x in xs])
    effect = max(ratio, sus_gbs / ref_gbs) <= 1.0 - c["min_effect"]
    spread = {d: _spread(xs) for d, xs in sus_bw.items()}
    ref_spread = {d: _spread(xs) for d, xs in ref_bw.items()}
    v.update(ratio=round(ratio, 4), slow_confidence=confidence(p),
             slow=p <= alpha and effect, reproduced=effect, suspect_gbs=sus_gbs, reference_gbs=ref_gbs,
             repeat_spread=spread, reference_repeat_spread=ref_spread)
    one_way = _slow_direction(rows, c, sus_bw, ref_bw)
    if one_way and not v["slow"]:
        # the direction's own figures are what the finding quotes; the pooled ones are kept
        v["pooled"] = {k: v[k] for k in ("ratio", "slow_confidence", "suspect_gbs", "reference_gbs")}
        v.update(one_way, slow=True, reproduced=True)
    if unsteady:
        p = signed_rank_p([-statistics.fmean(x) for _, x in sorted(unsteady.items(), key=lambda kv: str(kv[0]))])
        it_ratio = math.exp(statistics.median(sus_u) - statistics.median(ref_u))
        ratios = {d: sp / rsp for d, sp in spread.items() if sp and (rsp := ref_spread.get(d))}
        rep_ratio = max(ratios.values(), default=1.0)
        wider = _wider_repeats(sus_bw, ref_bw, ratios, alpha)
        # the effect tested: typical unsteadiness (u + d) of the suspect over its references'
        unsteadiness = math.exp(statistics.median(sus_ud) - statistics.median(ref_ud))
        v.update(unstable_confidence=confidence(p), instability_ratio=round(it_ratio, 3),
                 repeat_spread_ratio=round(rep_ratio, 3), unsteadiness_ratio=round(unsteadiness, 3),
                 max_over_median=round(math.exp(statistics.median(sus_u)), 3),
                 reference_max_over_median=round(math.exp(statistics.median(ref_u)), 3),
                 unstable=(p <= alpha and max(unsteadiness, wider) >= c["unstable_ratio"]
                           and 2 * len({w["alt"] for w in when}) >= len(speed)),
                 when=sorted(when, key=lambda w: (str(w["alt"]), str(w["dir"]))))
    return v
