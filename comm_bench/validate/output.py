"""validate's report as text (the console) and as JUnit XML (CI); its files (write_outputs)."""
from __future__ import annotations

import io
import json
import math
from typing import Any

from ..results.safefile import write_file
from ..sizes import human_size
from .finding_kinds import FINDING_KINDS

CHECKS_CLASS, HOSTS_CLASS = "comm-bench.validate", "comm-bench.validate.hosts"   # JUnit classnames


def to_json(report: dict[str, Any]) -> str:
    """The report as strict JSON: a figure that is not finite (a ratio over a zero median)
    is written as null, never as NaN or Infinity, which JSON does not have."""
    def finite(v: Any) -> Any:
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite(x) for x in v]
        return v
    return json.dumps(finite(report), indent=1, allow_nan=False)


def format_text(report: dict[str, Any]) -> str:
    c = report.get("checked") or {}
    lines: list[str] = []
    for g in c.get("groups") or []:
        lines.append(f"  {g['class']:<12} {g['op'] or '?':<14} {human_size(g['size']):>6}  "
                     f"{g['pairs']:>6} pairs  median {g['median_gbs']:.3g} GB/s  ({_against(g)})")
    for g in c.get("collectives") or []:
        lines.append(f"  {g['class']:<12} {g['op']:<14} {human_size(g['size']):>6}  collective  busbw "
                     f"{g['busbw']:.3g} GB/s  ({_against(g, 'not checked: no expected minimum')})")
    lat = c.get("latency") or {}
    for g in lat.get("groups") or []:
        lines.append(f"  {g['class']:<12} {g['op'] or '?':<14} {human_size(g['size']):>6}  "
                     f"{g['pairs']:>6} pairs  median {g['median_us']:.3g} us one-way  (latency: peers only)")
    from .health import text_line
    lines += text_line(c.get("health"))
    checked = ([f"{c.get('pairs', 0)} pairs, {c.get('ranks', 0)} ranks, "
                f"sizes {', '.join(human_size(s) for s in c.get('sizes') or [])}"] if c.get("pairs") else []) \
        + ([f"latency of {lat['pairs']} pairs, {lat['ranks']} ranks"] if lat else []) \
        + [f"{len(c.get('collectives') or [])} collective op(s)"]
    head = f"validate: {report['status'].upper()}  ({', '.join(checked)})"
    out = [head] + lines
    from .findings import text_lines
    out += text_lines(report)
    for f in report["findings"]:
        conf = f" (confidence {f['confidence']:.3g})" if f.get("confidence") is not None else ""
        out.append(f"FINDING [{f['kind']}] {f['message']}{conf}")
    if not report["findings"]:
        out.append("no findings")
    return "\n".join(out)


def _against(g: dict[str, Any], none: str = "peers only") -> str:
    """What a checked line was held against: the link's rate and the expected minimum."""
    theo = f"link {g['theoretical_gbs']:.3g} GB/s" if g.get("theoretical_gbs") else "link rate unknown"
    exp = f"expected min {g['expected_gbs']:.3g}" if g.get("expected_gbs") is not None else none
    return f"{theo}, {exp}"


def write_outputs(report: dict[str, Any], doc: dict[str, Any], junit: str | None = None, drain_list: str | None = None,
                  prometheus: str | None = None, rows: list[Any] | None = None) -> list[Any]:
    """validate's files (each only when asked for); returns the per-node rows (drain.hosts,
    or those given: several documents' merged, commands/validate_merge.py)."""
    from . import drain

    rows = drain.hosts(report, doc) if rows is None else rows
    if drain_list:
        write_file(drain_list, drain.drain_list(rows), "--drain-list")
    if junit:
        write_junit(report, junit, rows)
    if prometheus:
        from ..results.export import write_verdict_prometheus
        write_verdict_prometheus(doc, report["status"], len(report["findings"]),
                                 [(drain.clean(node), fs) for node, fs, _ in rows], prometheus)
    return rows


def write_junit(report: dict[str, Any], path: str,
                hosts: list[tuple[str, list[dict[str, Any]], str | None]] | None = None) -> None:
    """One JUnit test case per checked group and per finding kind, and one per node of the
    run (hosts: drain.hosts rows), failing for the nodes a finding names, so a CI
    dashboard shows "node517 failed" (junitparser writes the XML)."""
    from junitparser import Failure, TestCase, TestSuite
    from .drain import PREFIX, clean

    c = report.get("checked") or {}
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for f in report["findings"]:
        by_kind.setdefault(f["kind"], []).append(f)
    cases: list[tuple[str, list[dict[str, Any]]]] = [
        (f"{g['class']} {g['op']} {human_size(g['size'])}", []) for g in c.get("groups") or []]
    cases += [(f"{g['class']} {g['op']} {human_size(g['size'])} latency", [])
              for g in (c.get("latency") or {}).get("groups") or []]
    cases += [(k, by_kind.get(k, [])) for k in FINDING_KINDS]
    rows: list[tuple[str, list[dict[str, Any]], str, str | None]] = [
        (name, fs, CHECKS_CLASS, None) for name, fs in cases]
    rows += [(node, fs, HOSTS_CLASS, why) for node, fs, why in hosts or []]
    suite = TestSuite("comm-bench validate")
    for name, fs, classname, why in rows:
        case = TestCase(clean(name), classname=classname)
        if fs:
            # XML 1.0 has no control characters: a host name or a NIC name could hold one
            msg = clean(why[len(PREFIX):] if why else "; ".join(f["message"] for f in fs))
            failure = Failure(msg[:500], fs[0]["kind"])
            failure.text = "\n".join(clean(f["message"]) for f in fs)
            case.result = [failure]
        suite.add_testcase(case)
    suite.update_statistics()
    buf = io.BytesIO()
    suite.write(buf, pretty=True)
    write_file(path, buf.getvalue(), "--junit")
