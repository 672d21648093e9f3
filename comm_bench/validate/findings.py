"""validate's findings, checked again: confirm-phase verdicts confirm, add or withdraw
them, instability and topology findings join them, and every finding gets a confidence.

Confidence = 1 - p of a one-sided Wilcoxon signed-rank test (stats.py): over the confirm
phase's K paired comparisons where the suspect was re-measured, else over the
first-pass values the finding rests on (each pair's GB/s relative to its group's median);
facts read directly (wrong data, a failed run, a link's trained width) have 1.0.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..results.records import measured_gbs, pair_records
from ..errors import EXIT_UNCONFIRMED
from .finding_kinds import finding
from .rules import document_outlier_rules
from . import fabric, trained_links as topology
from .stats import confidence, signed_rank_p
from .pair_obs import Observations, PairColumns
from .suspects import PairTable, find
from .verdicts import judge

RANK_KINDS = ("bad-host", "bad-device", "bad-rank")
# the findings a confirm verdict about a rank / a pair speaks to (bandwidth or latency)
VERDICT_RANK_KINDS = RANK_KINDS + ("high-latency-host", "high-latency-rank")
VERDICT_PAIR_KINDS = ("bad-pair", "high-latency-pair")
CERTAIN = ("wrong-data", "superseded-method", "run-failed", "link-degraded")


def needs_confirming(f: dict[str, Any]) -> bool:
    """A finding that rests on a first pass's comparison with peers (a rank, device, host or
    pair slower than them): the confirm phase's re-measurement decides it."""
    return f["kind"] in VERDICT_RANK_KINDS + VERDICT_PAIR_KINDS and not f.get("confirmed")


def confirm_phase_ran(doc: dict[str, Any]) -> bool:
    """Whether the run re-measured its suspects (`--confirm K`, K > 0, a pair pattern): then a
    first-pass finding it did not confirm is reported as unconfirmed (exit 3), not as a finding."""
    k = (doc.get("options") or {}).get("confirm")
    return type(k) is int and k > 0 and doc.get("pattern") not in (None, "collective")




def extend(doc: dict[str, Any], rules: dict[str, Any], lm: Any, cols: PairColumns | None, sizes: Iterable[int],
           findings: list[dict[str, Any]], all_recs: list[dict[str, Any]] | None = None,
           obs: Observations | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(findings, diagnosis) for validate.check; cols: the first pass's PairColumns (None:
    no first-pass pair records), all_recs: pair_records(doc), obs: validate's Observations
    of cols at `sizes` (built again when not given)."""

    all_recs = pair_records(doc) if all_recs is None else all_recs
    confirm_recs = [r for r in all_recs if isinstance(r.get("confirm"), dict)]
    verdicts = judge(confirm_recs, rules, measured_gbs)
    table = PairTable(cols, sizes, obs) if cols is not None and cols.count else None
    out: list[dict[str, Any]] = []
    withdrawn: list[str] = []
    for f in findings:
        judged = apply_verdict(f, verdicts)
        if judged is WITHDRAWN:
            withdrawn.append(f["message"])
            continue
        if not judged:              # no verdict: the first pass's own confidence
            f["confidence"] = 1.0 if f["kind"] in CERTAIN else _first_pass_confidence(f, table)
        out.append(f)
    named_ranks = {r for f in out if f["kind"] in RANK_KINDS for r in f.get("ranks") or []}
    named_pairs = {(f["src"], f["dst"]) for f in out if f["kind"] == "bad-pair"}
    slow = [v for v in verdicts if v.get("slow") and v["kind"] == "rank" and v["target"]["rank"] not in named_ranks]
    out += _rank_findings(slow, lm, finding, "bad")
    out += _rank_findings([v for v in verdicts if v.get("unstable") and v["kind"] == "rank"], lm, finding, "unstable")
    for v in verdicts:
        t = v["target"]
        if v["kind"] == "pair" and (t["src"], t["dst"]) not in named_pairs and (v.get("slow") or v.get("unstable")):
            out.append(_pairfinding(v, lm, finding))
    o = document_outlier_rules(rules, doc)
    rel = table.rel() if table else None

    def below(ratio: float) -> list[tuple[int, int]]:
        if table is None or rel is None:
            return []
        return list(zip(table.obs.s[rel < ratio].tolist(), table.obs.d[rel < ratio].tolist()))

    # every measured pair and its value: only a document that places hosts on switches reads them
    # (a table is made of cols: both are there when routed is True)
    routed = table is not None and bool(fabric.switch_of(doc))
    out, placed = fabric.localize(doc, lm, out, cols.pairs() if routed and cols is not None else set(),
                                  rules["blame"]["min_share"], below(o["pair_ratio"]),
                                  table.obs.values() if routed and table is not None else None,
                                  slow=below(o["ratio"]))
    out += topology.findings(doc, finding)
    # one verdict: after a confirm phase, what it did not confirm is unconfirmed (exit 3), not a
    # finding; a switch port or a named end that explains pairs has taken them in above
    unconfirmed = [f for f in out if needs_confirming(f)] if confirm_phase_ran(doc) else []
    held_back = {id(u) for u in unconfirmed}
    out = [f for f in out if id(f) not in held_back]
    diagnosis: dict[str, Any] = {"confirm_records": len(confirm_recs), "verdicts": [_summary(v) for v in verdicts],
                 "withdrawn": withdrawn, "fabric": placed, "unconfirmed_findings": unconfirmed}
    if not confirm_recs and table is not None:
        sus, _ = find(table, rules["confirm"], int(rules["outliers"]["min_peers"]), pair_ratio=o["pair_ratio"])
        diagnosis["unconfirmed_suspects"] = [_name(s) for s in sus]
    return out, diagnosis


def _name(s: dict[str, Any]) -> str:
    t = s.get("target") or s
    return f"rank {t['rank']}" if "rank" in t else f"pair {t['src']}->{t['dst']}"


WITHDRAWN = "withdrawn"


def apply_verdict(f: dict[str, Any], verdicts: list[dict[str, Any]]) -> bool | str:
    """Mark finding f with its confirm verdict: WITHDRAWN when, re-measured next to good
    pairs, it ran like them; True when confirmed or not (f updated); False: no verdict."""
    v = _verdict_for(f, verdicts)
    if v is None or "slow" not in v:
        return False
    if not v["reproduced"]:
        return WITHDRAWN
    f.update(confidence=v["slow_confidence"], confirmed=v["slow"], confirm=_summary(v))
    return True


def _summary(v: dict[str, Any]) -> dict[str, Any]:
    keys = ("kind", "target", "why", "alternations", "ratio", "slow", "slow_confidence", "suspect_gbs",
            "reference_gbs", "repeat_spread", "reference_repeat_spread", "unstable", "unstable_confidence",
            "max_over_median", "reference_max_over_median", "instability_ratio", "repeat_spread_ratio", "unsteadiness_ratio", "when",
            "direction", "pooled")
    return {k: v[k] for k in keys if k in v}


def _verdict_for(f: dict[str, Any], verdicts: list[dict[str, Any]]) -> dict[str, Any] | None:
    for v in verdicts:
        t = v["target"]
        if f["kind"] in VERDICT_RANK_KINDS and v["kind"] == "rank" and t.get("rank") in (f.get("ranks") or []):
            return v
        if f["kind"] in VERDICT_PAIR_KINDS and v["kind"] == "pair" \
                and (t.get("src"), t.get("dst")) == (f.get("src"), f.get("dst")):
            return v
    return None


def _first_pass_confidence(f: dict[str, Any], table: PairTable | None) -> float | None:
    if table is None:
        if f.get("measured_gbs") and f.get("expected_gbs"):
            return confidence(signed_rank_p([math.log(f["measured_gbs"] / f["expected_gbs"])]))
        return None
    obs = table.obs
    if f["kind"] == "class-below-expected":
        m = np.array([k[2] == f.get("link_class") for k in obs.keys], dtype=bool)[obs.g] & (obs.v > 0)
        logs = np.log(obs.v[m] / f["expected_gbs"]).tolist() if f.get("expected_gbs") else []
    else:
        if f["kind"] in RANK_KINDS:
            ends = f.get("ranks") or []
            hit = np.isin(obs.s, ends) | np.isin(obs.d, ends)
        elif f["kind"] == "bad-pair":
            hit = (obs.s == f.get("src")) & (obs.d == f.get("dst"))
        else:
            hit = np.zeros(len(obs), dtype=bool)
        rel = table.rel()
        logs = np.log(rel[hit & (obs.v > 0) & (rel > 0)]).tolist()
    if not logs and f.get("measured_gbs") and f.get("expected_gbs"):
        logs = [math.log(f["measured_gbs"] / f["expected_gbs"])]
    return confidence(signed_rank_p(logs)) if logs else None


def _rank_findings(verdicts: list[dict[str, Any]], lm: Any, make: Callable[..., dict[str, Any]],
                   what: str) -> list[dict[str, Any]]:
    """Confirmed ranks, merged into their host when every rank of it is confirmed."""
    of_rank = {v["target"]["rank"]: v for v in verdicts}
    out = []
    for node, ranks, whole in lm.by_node(of_rank):
        vs = [of_rank[r] for r in ranks]
        groups = [(ranks, vs)] if whole else [([r], [of_rank[r]]) for r in ranks]
        for rs, group in groups:
            v = min(group, key=lambda x: x.get("slow_confidence" if what == "bad" else "unstable_confidence", 0))
            dev_kind, dev = lm.device(rs[0])
            dev = f"GPU{dev}" if dev_kind == "gpu" else dev
            if whole:
                kind, who = f"{what}-host", f"host {node} (rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))})"
            elif dev is not None and what == "bad":
                kind, who = "bad-device", f"rank {rs[0]} (device {dev} on host {node})"
            else:
                kind, who = f"{what}-rank", f"rank {rs[0]} on host {node}"
            common = dict(host=node, ranks=rs, rank=rs[0] if len(rs) == 1 else None,
                          device=dev if len(rs) == 1 else None, confirmed=True, confirm=_summary(v))
            if what == "bad":
                out.append(make(kind, f"{who} is slow{_one_way(v)}: {v['suspect_gbs']:.3g} GB/s where known-good pairs "
                                f"measured alternately with it ran {v['reference_gbs']:.3g} GB/s "
                                f"({v['ratio']:.0%}, confirmed over {v['alternations']} alternations)",
                                measured_gbs=v["suspect_gbs"], peer_median_gbs=v["reference_gbs"],
                                confidence=v["slow_confidence"], **common))
            else:
                out.append(make(kind, f"{who} is unstable: {_unstable_text(v)}",
                                instability_ratio=v["instability_ratio"], max_over_median=v["max_over_median"],
                                repeat_spread_ratio=v["repeat_spread_ratio"],
                                unsteadiness_ratio=v["unsteadiness_ratio"],
                                confidence=v["unstable_confidence"], **common))
    return out


def _one_way(v: dict[str, Any]) -> str:
    """' sending' / ' receiving' where one direction of a rank was judged slow on its own."""
    return {"out": " sending", "in": " receiving"}.get(v.get("direction") or "", "")


def _unstable_text(v: dict[str, Any]) -> str:
    spread = max((x for x in (v.get("repeat_spread") or {}).values() if x), default=None)
    ref = max((x for x in (v.get("reference_repeat_spread") or {}).values() if x), default=None)
    # two decimals: the spreads are max / min near 1 ("1x" said nothing)
    rep = (f"; its {v['alternations']} repeats range {spread:.2f}x in GB/s without the highest and lowest "
           f"(references {ref:.2f}x)"
           if spread and ref else "")
    return (f"{v['unsteadiness_ratio']:.2g}x as unsteady as known-good pairs measured alternately with it "
            f"(per-iteration max/median {v['max_over_median']:.2g}x vs {v['reference_max_over_median']:.2g}x"
            f"{rep}); unsteady in "
            f"{len({w['alt'] for w in v.get('when') or []})} of {v['alternations']} alternations")


def _pairfinding(v: dict[str, Any], lm: Any, make: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    s, d = v["target"]["src"], v["target"]["dst"]
    common = dict(src=s, dst=d, src_host=lm.node(s), dst_host=lm.node(d), confirmed=True, confirm=_summary(v))
    who = f"pair {lm.label(s)} -> {lm.label(d)} (ranks {s}->{d})"
    if v.get("slow"):
        return make("bad-pair", f"{who}: {v['suspect_gbs']:.3g} GB/s where known-good pairs measured "
                    f"alternately with it ran {v['reference_gbs']:.3g} GB/s ({v['ratio']:.0%}, confirmed over "
                    f"{v['alternations']} alternations)", measured_gbs=v["suspect_gbs"],
                    peer_median_gbs=v["reference_gbs"], confidence=v["slow_confidence"], **common)
    return make("unstable-pair", f"{who} is unstable: {_unstable_text(v)}",
                instability_ratio=v["instability_ratio"], unsteadiness_ratio=v["unsteadiness_ratio"],
                confidence=v["unstable_confidence"], **common)


def text_lines(report: dict[str, Any]) -> list[str]:
    """validate's text output: what the confirm phase did."""
    d = (report.get("checked") or {}).get("diagnosis") or {}
    out = []
    for v in d.get("verdicts") or []:
        parts = []
        if "ratio" in v:
            both = f"; both directions {v['pooled']['ratio']:.0%}" if v.get("pooled") else ""
            parts.append(f"{v['ratio']:.0%} of its references{_one_way(v)} (confidence {v['slow_confidence']:.3g}"
                         f"{both})")
        if "unsteadiness_ratio" in v:
            parts.append(f"unsteadiness {v['unsteadiness_ratio']:.2g}x its references' "
                         f"(confidence {v['unstable_confidence']:.3g})")
        out.append(f"  confirm: {_name(v)} ({'/'.join(v.get('why') or [])}) over {v.get('alternations')} "
                   f"alternations: {'; '.join(parts)}")
    for v in d.get("latency_verdicts") or []:
        if "ratio" in v:
            out.append(f"  confirm: {_name(v)} (latency) over {v.get('alternations')} alternations: "
                       f"{1.0 / v['ratio']:.2g}x its references' latency (confidence {v['slow_confidence']:.3g})")
    for m in d.get("withdrawn") or []:
        out.append(f"  not reproduced when re-measured (withdrawn): {m}")
    for f in d.get("unconfirmed_findings") or []:
        why = ("re-measured, not at the confidence" if f.get("confirm") else
               "not re-measured: more would-be findings than confirm.max_named, or too few known-good ranks")
        out.append(f"  UNCONFIRMED [{f['kind']}] {f['message']} (first pass; {why}; exit {EXIT_UNCONFIRMED})")
    if d.get("unconfirmed_suspects"):
        out.append(f"  UNCONFIRMED suspects (the run re-measured none: it ran with --confirm 0, or had fewer "
                   f"than two known-good ranks): {', '.join(d['unconfirmed_suspects'])}; sweep again without "
                   f"--confirm 0 (or run `comm-bench check`) to confirm or clear them (exit {EXIT_UNCONFIRMED})")
    return out
