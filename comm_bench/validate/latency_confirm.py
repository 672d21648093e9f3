"""validate's latency findings, checked against the confirm phase of a `--mode lat` sweep
as findings.extend checks bandwidth's: the suspects were re-measured next to known-good
pairs (confirm.py, speeds = 1 / median one-way latency; a pair at the size its finding
quotes), so a first-pass latency finding stands only when its re-measurement confirms it at
outliers.latency_ratio x its references' latency or more; below that, or like them, it is
withdrawn. A confirmed suspect the first pass did not name becomes a finding on the same
bar: rank 0, which also serves the store and writes the results, answered 2x slower than
its references in all 8 alternations under a CPU hog on the netns fabric (a no-fault run),
so a smaller confirmed effect is the harness, not the link. Latency suspects that are no
would-be finding and were left unconfirmed do not make validate exit 3; would-be findings
left unconfirmed do.
"""
from __future__ import annotations

from typing import Any

from ..results.records import inverse_latency, latency_pair_records
from .finding_kinds import finding
from .latency import times, us
from .findings import WITHDRAWN, _summary, apply_verdict, confirm_phase_ran, needs_confirming
from .verdicts import judge


def confirm_latency(doc: dict[str, Any], rules: dict[str, Any], lm: Any, latency: list[dict[str, Any]],
                    bar: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(latency findings, diagnosis: {"verdicts", "withdrawn", "unconfirmed_findings"}); bar:
    the rules' latency_ratio. A first-pass finding stands when its re-measurement confirms it
    at bar x its references' latency or more; re-measured below that (or like them), it is
    withdrawn; not re-measured, or not at the confidence, in a run that had a confirm phase,
    it is unconfirmed (exit 3): one verdict, whatever the first pass said."""
    recs = latency_pair_records(doc)
    confirm_recs = [r for r in recs if isinstance(r.get("confirm"), dict)]
    verdicts = judge(confirm_recs, rules, inverse_latency)
    out: list[dict[str, Any]] = []
    withdrawn: list[str] = []
    unconfirmed: list[dict[str, Any]] = []
    ran = confirm_phase_ran(doc)
    for f in latency:
        judged = apply_verdict(f, verdicts)
        if judged is WITHDRAWN or (judged and 1.0 / f["confirm"]["ratio"] < bar):
            withdrawn.append(f["message"])     # re-measured next to good pairs: like them, or not enough slower
            continue
        if judged:
            c = f["confirm"]
            f["message"] += (f"; re-measured: {times(1.0 / c['ratio'])}x the latency of known-good pairs measured "
                             f"alternately with it ({us(1.0 / c['suspect_gbs'])} vs {us(1.0 / c['reference_gbs'])} us, "
                             f"{c['alternations']} alternations)")
        if ran and needs_confirming(f):
            unconfirmed.append(f)
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
    return out, {"verdicts": [_summary(v) for v in verdicts], "withdrawn": withdrawn,
                 "unconfirmed_findings": unconfirmed}


def _confirmed(group: list[int] | None, v: dict[str, Any], lm: Any, node: Any, whole: bool) -> dict[str, Any]:
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
