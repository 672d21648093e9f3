"""`validate --baseline OLD.json`: a figure that got worse than the baseline run's by
more than a tolerance, with the data supporting it at a confidence, is a finding (kind
"regression").

The judgement is compare's (comm_bench.validate.compare.judge, one definition): per op,
mode, size and buffer kind (medians over pairs), busbw of bw-mode records at sizes of at
least the rules' min_size (small sizes measure latency, not the link), and the median
one-way latency of --mode lat records at every size; worse = the row's test and the
signed-rank test over the op's sizes both support a change beyond the tolerance. A change
beyond the tolerance that the tests do not support is "within noise": listed, not a finding.
"""
from __future__ import annotations

from typing import Any

from .compare import DEFAULT_CONFIDENCE, DEFAULT_TOLERANCE, judge, judged_figure, summarise, summarise_group
from ..sizes import human_size
from .finding_kinds import finding, status
from .rules import parse_size


def _what(key: tuple[Any, ...], now: dict[Any, Any], old: dict[Any, Any], c: float) -> tuple[str, str]:
    op, mode, size, _buffer = key
    figure = judged_figure(mode)
    unit, what = ("GB/s", "busbw") if figure == "busbw" else ("us", "median latency")
    return figure, (f"{op} {human_size(size)} ({mode}): {what} {now[key][figure]:.3g} {unit} vs "
                    f"{old[key][figure]:.3g} {unit} in the baseline ({c * 100:+.1f}%")


def regressions(doc: dict[str, Any], base: dict[str, Any] | list[dict[str, Any]], tolerance: float = DEFAULT_TOLERANCE,
                min_size: int | str = "1M", confidence: float = DEFAULT_CONFIDENCE,
                ) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]], list[str]]:
    """(findings, compared, within_noise, notes): findings for figures worse than base (a
    document, or a list of repeats of one run) by more than tolerance at the confidence;
    within_noise: the changes beyond the tolerance (either way) that the tests do not support."""
    now, old = summarise(doc, samples=True), summarise_group(base if isinstance(base, list) else [base])
    rows, notes = judge(old, now, tolerance, parse_size(min_size), confidence)
    findings: list[dict[str, Any]] = []
    noise: list[dict[str, Any]] = []
    for key in sorted(rows, key=lambda k: (str(k[0]), k[1], k[2], k[3])):
        r = rows[key]
        op, mode, size, _buffer = key
        figure, text = _what(key, now, old, r["change"])
        test = {"confidence": r["confidence"], "p_row": r["p_row"], "p_series": r["p_series"],
                "row_test": r["row_test"]}
        if r["verdict"] == "worse":
            findings.append(finding(
                "regression", f"{text}, tolerance {tolerance * 100:g}%)",   # output adds the confidence
                op=op, mode=mode, size=size, figure=figure, measured=now[key][figure],
                baseline=old[key][figure], change=r["change"], **test))
        elif r["verdict"] == "noise":
            noise.append(dict(op=op, mode=mode, size=size, figure=figure, change=r["change"], **test,
                              message=f"{text}, within noise: confidence {r['confidence']:.2f} < {confidence:g})"))
    return findings, len(rows), noise, notes


def apply(report: dict[str, Any], doc: dict[str, Any], base: dict[str, Any] | list[dict[str, Any]], base_name: str,
          tolerance: float, min_size: int | str, confidence: float = DEFAULT_CONFIDENCE) -> str:
    """Add the baseline's findings to a validate report; the lines saying what was compared
    and which changes were within noise."""
    findings, compared, noise, notes = regressions(doc, base, tolerance, min_size, confidence)
    report["findings"] += findings
    report["status"] = status(report)
    report.setdefault("checked", {})["baseline"] = {
        "file": base_name, "repeats": len(base) if isinstance(base, list) else 1, "compared": compared,
        "tolerance": tolerance, "confidence": confidence,
        "regressions": len(findings), "within_noise": noise, "notes": notes,
        "test": "worse = the row's test (Welch's t on log figures; rank-sum over records where both runs have "
                "3+) and a signed-rank test over the op's judged sizes both reject 'within the tolerance' at the "
                "confidence (comm-bench compare's judgement)"}
    return "\n".join([f"baseline {base_name}: {compared} figure(s) compared (op, mode, size), "
                      f"{len(findings)} worse by more than {tolerance * 100:g}% at confidence {confidence:g}, "
                      f"{len(noise)} beyond {tolerance * 100:g}% within noise"]
                     + [f"  within noise: {n['message']}" for n in noise]
                     + [f"  note: {n}" for n in notes])
