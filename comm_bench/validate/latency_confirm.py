"""validate's latency findings, checked against the confirm phase of a `--mode lat` sweep
as findings.extend checks bandwidth's: the suspects were re-measured next to known-good
pairs (confirm.py, speeds = 1 / median one-way latency), so a first-pass latency finding
whose re-measurement runs like its references is withdrawn, a confirmed one says so, and
a confirmed suspect the first pass did not name becomes a finding only when it answers
at least outliers.latency_ratio x slower than its references, the first pass's own bar:
rank 0, which also serves the store and writes the results, answered 2x slower than its
references in all 8 alternations under a CPU hog on the netns fabric (a no-fault run), so
a smaller confirmed effect is the harness, not the link. For the same reason latency
suspects left unconfirmed do not make validate exit 3.
"""
from __future__ import annotations

from ..results.records import inverse_latency, latency_pair_records
from .finding_kinds import finding
from .findings import WITHDRAWN, _summary, apply_verdict
from .verdicts import judge


def confirm_latency(doc, rules, lm, latency, bar):
    """(latency findings, diagnosis: {"verdicts", "withdrawn"}); bar: the rules' latency_ratio."""
    recs = latency_pair_records(doc)
    confirm_recs = [r for r in recs if isinstance(r.get("confirm"), dict)]
    verdicts = judge(confirm_recs, rules, inverse_latency)
    out, withdrawn = [], []
    for f in latency:
        if apply_verdict(f, verdicts) is WITHDRAWN:   # re-measured next to good pairs, it answered like them
            withdrawn.append(f["message"])
            continue
        out.append(f)
    named = {r for f in out for r in f.get("ranks") or []} | {(f.get("src"), f.get("dst")) for f in out}
    slow = {v["target"]["rank"]: v for v in verdicts if v.get("slow") and v["kind"] == "rank"
            and v["target"]["rank"] not in named and 1.0 / v["ratio"] >= bar}
    for node, ranks, whole in lm.by_node(slow):
        for group in ([ranks] if whole else [[r] for r in ranks]):
            out.append(_confirmed(group, slow[group[0]], lm, node, whole))
    for v in verdicts:
        t = v["target"]
        if v["kind"] == "pair" and v.get("slow") and (t["src"], t["dst"]) not in named and 1.0 / v["ratio"] >= bar:
            out.append(_confirmed(None, v, lm, None, False))
    return out, {"verdicts": [_summary(v) for v in verdicts], "withdrawn": withdrawn}


def _confirmed(group, v, lm, node, whole):
    """A latency finding from a confirmed suspect: the first pass did not name it."""
    times = 1.0 / v["ratio"]
    how = (f"answers slowly: {times:.2g}x the one-way latency of known-good pairs measured alternately "
           f"with it ({1.0 / v['suspect_gbs']:.3g} us vs {1.0 / v['reference_gbs']:.3g} us, confirmed over "
           f"{v['alternations']} alternations)")
    common = dict(confirmed=True, confirm=_summary(v), confidence=v["slow_confidence"],
                  measured_us=1.0 / v["suspect_gbs"], peer_median_us=1.0 / v["reference_gbs"],
                  latency_ratio=round(times, 3))
    if group is None:
        s, d = v["target"]["src"], v["target"]["dst"]
        return finding("high-latency-pair", f"pair {lm.label(s)} -> {lm.label(d)} (ranks {s}->{d}) {how}",
                       src=s, dst=d, src_host=lm.node(s), dst_host=lm.node(d), **common)
    who = (f"host {node} (rank{'s' if len(group) > 1 else ''} {', '.join(map(str, group))})" if whole
           else f"rank {group[0]} on host {node}")
    return finding("high-latency-host" if whole else "high-latency-rank", f"{who} {how}", host=node, ranks=group,
                   rank=group[0] if len(group) == 1 else None, **common)
