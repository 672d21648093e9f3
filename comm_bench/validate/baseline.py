"""`validate --baseline OLD.json`: a figure that got worse than the baseline run's by
more than a tolerance is a finding (kind "regression").

Compared per op, mode, size and buffer kind (medians over pairs, comm_bench.validate.compare.summarise):
busbw of bw-mode records at sizes of at least the rules' min_size (small sizes measure
latency, not the link), and the median one-way latency of --mode lat records at every
size.
"""
from __future__ import annotations

from .compare import DEFAULT_TOLERANCE, judged_figure, summarise, verdict
from ..sizes import human_size
from .finding_kinds import finding, status
from .rules import parse_size


def regressions(doc, base, tolerance=DEFAULT_TOLERANCE, min_size="1M"):
    """(findings, compared): findings for figures worse than base by more than tolerance."""
    now, old = summarise(doc), summarise(base)
    floor = parse_size(min_size)
    findings, compared = [], 0
    for key in sorted(set(now) & set(old), key=lambda k: (str(k[0]), k[1], k[2], k[3])):
        op, mode, size, _buffer = key
        figure = judged_figure(mode)
        v, c = verdict(now[key], old[key], mode, size, tolerance, floor)
        if v is None:
            continue
        compared += 1
        if v == "worse":
            unit, what = ("GB/s", "busbw") if figure == "busbw" else ("us", "median latency")
            findings.append(finding(
                "regression", f"{op} {human_size(size)} ({mode}): {what} {now[key][figure]:.3g} {unit} vs "
                f"{old[key][figure]:.3g} {unit} in the baseline ({c * 100:+.1f}%, tolerance "
                f"{tolerance * 100:g}%)", op=op, mode=mode, size=size, figure=figure,
                measured=now[key][figure], baseline=old[key][figure], change=c))
    return findings, compared


def apply(report, doc, base, base_name, tolerance, min_size):
    """Add the baseline's findings to a validate report; one line saying what was compared."""
    findings, compared = regressions(doc, base, tolerance, min_size)
    report["findings"] += findings
    report["status"] = status(report)
    report.setdefault("checked", {})["baseline"] = {"file": base_name, "compared": compared,
                                                    "tolerance": tolerance, "regressions": len(findings)}
    return (f"baseline {base_name}: {compared} figure(s) compared (op, mode, size), "
            f"{len(findings)} worse by more than {tolerance * 100:g}%")
