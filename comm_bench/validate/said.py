"""What a sweep says of its own results, in validate's words: one verdict per run.

The confirm phase's line (after each op's re-measurement) and the sweep's closing line
are computed by check() itself, on the same records `comm-bench validate FILE` reads, so
the two can never disagree: a suspect is called a finding only when validate reports it,
"unconfirmed" when validate would exit 3 for it, and cleared otherwise.
"""
from __future__ import annotations

from typing import Any

from .finding_kinds import NothingToCheck, exit_code

NO_SUSPECTS = "# confirm verdict: no suspects: every rank and pair ran like its peers in the first pass"
NO_REFERENCES = "# confirm verdict: not re-measured: fewer than two known-good ranks to compare the suspects with"


def _about(f: dict[str, Any], target: dict[str, Any]) -> bool:
    """Whether finding f is about the suspect `target` ({"rank"} or {"src", "dst"})."""
    if "rank" in target:
        return target["rank"] in (f.get("ranks") or ()) or f.get("rank") == target["rank"]
    return (f.get("src"), f.get("dst")) == (target["src"], target["dst"])


def _name(t: dict[str, Any]) -> str:
    return f"rank {t['rank']}" if "rank" in t else f"pair {t['src']}->{t['dst']}"


def confirm_line(suspects: list[dict[str, Any]], good: list[Any], doc: dict[str, Any], rules: dict[str, Any],
                 mode: str = "bw") -> str:
    """The confirm phase's outcome in one line, as validate reads `doc` (this op's records):
    each re-measured suspect, its ratio to its references and what validate makes of it."""
    from .checks import check

    if not suspects:
        return NO_SUSPECTS
    if len(good) < 2:
        return NO_REFERENCES
    try:
        rep = check(doc, rules)
    except NothingToCheck:
        rep = {"findings": [], "checked": {}}
    d = (rep.get("checked") or {}).get("diagnosis") or {}
    verdicts = d.get("latency_verdicts" if mode == "lat" else "verdicts") or []
    unit = "latency" if mode == "lat" else "GB/s"
    parts = []
    for v in verdicts:
        t = v["target"]
        if "ratio" not in v:
            parts.append(f"{_name(t)} not judged (no complete alternation)")
            continue
        ratio = 1.0 / v["ratio"] if mode == "lat" else v["ratio"]
        found = [f for f in rep["findings"] if _about(f, t)]
        if found:
            what = f"{found[0]['kind'].upper()} (a finding)"
        elif any(_about(f, t) for f in d.get("unconfirmed_findings") or []):
            what = "UNCONFIRMED (validate exits 3)"
        else:
            what = "cleared (no finding)"
        conf = v.get("slow_confidence")
        parts.append(f"{_name(t)} {what} ({ratio:.2f}x its references' {unit}, confidence {conf:.3g}, "
                     f"{v['alternations']} alternations)")
    return "# confirm verdict: " + ("; ".join(parts) or "nothing re-measured")


def closing_line(path: str, rules_path: str | None = None) -> str:
    """The sweep's last verdict: `comm-bench validate PATH` with default flags, in one line."""
    from .checks import run

    try:
        rep = run(path, rules_path)
    except NothingToCheck as exc:
        return f"# verdict: NOT CHECKED: {exc}; comm-bench validate exits 2"
    code = exit_code(rep)
    if rep["findings"]:
        names = "; ".join(f["message"] for f in rep["findings"][:3])
        more = f" (+{len(rep['findings']) - 3} more)" if len(rep["findings"]) > 3 else ""
        return f"# verdict: FAIL: {len(rep['findings'])} finding(s): {names}{more}; comm-bench validate exits {code}"
    d = (rep.get("checked") or {}).get("diagnosis") or {}
    left = [f["message"] for f in d.get("unconfirmed_findings") or []] + list(d.get("unconfirmed_suspects") or [])
    if left:
        return (f"# verdict: UNCONFIRMED: {len(left)} suspect(s) nobody confirmed: {'; '.join(left[:3])}; "
                f"comm-bench validate exits {code}")
    return f"# verdict: PASS: no findings; comm-bench validate exits {code}"
