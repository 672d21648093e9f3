"""What validate reports: the kinds of finding, one finding, and the error for a run
that holds nothing to check. Shared by checks.check, the diagnosis modules beside it and the baseline."""
from __future__ import annotations

from typing import Any

from ..errors import EXIT_FAILED, EXIT_OK, EXIT_UNCONFIRMED, UsageError


class NothingToCheck(UsageError):
    """The rules found nothing to hold the records against (exit 2 unless a baseline is)."""


# Every kind of finding check() can report, in report order: the JUnit output lists
# each as a test case, so a kind made anywhere else must be added here (_finding refuses it).
FINDING_KINDS = ("bad-host", "bad-device", "bad-rank", "bad-pair", "unstable-host", "unstable-rank",
                 "unstable-pair", "high-latency-host", "high-latency-rank", "high-latency-pair",
                 "bad-switch-port", "link-degraded", "class-below-expected",
                 "collective-below-expected", "wrong-data", "superseded-method", "run-failed", "regression",
                 # the GPUs' and NICs' own health readings (validate/health.py)
                 "gpu-throttled", "gpu-pcie-degraded", "gpu-nvlink-down", "gpu-memory-errors", "gpu-xid",
                 "nic-port-down", "nic-port-errors")


# validate's exit status (README, docs/validate-rules.md; the codes: comm_bench/errors.py):
# 0 pass, 1 findings, 2 bad input, 3 no findings but first-pass suspects or would-be findings
# nobody confirmed (a run with `--confirm 0`, or more would-be findings than the confirm phase
# re-measures). EXIT_UNCONFIRMED is imported above for the modules that take it from here.


def status(report: dict[str, Any]) -> str:
    """"fail" (findings), "unconfirmed" (none, but suspects left unconfirmed) or "pass"."""
    if report["findings"]:
        return "fail"
    d = (report.get("checked") or {}).get("diagnosis") or {}
    return "unconfirmed" if d.get("unconfirmed_suspects") or d.get("unconfirmed_findings") else "pass"


def exit_code(report: dict[str, Any]) -> int:
    return {"fail": EXIT_FAILED, "unconfirmed": EXIT_UNCONFIRMED, "pass": EXIT_OK}[status(report)]


def finding(kind: str, message: str, **kw: Any) -> dict[str, Any]:
    if kind not in FINDING_KINDS:
        raise ValueError(f"finding kind '{kind}' is missing from FINDING_KINDS")
    return {"kind": kind, "severity": "error", "message": message, **kw}
