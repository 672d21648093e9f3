"""validate's verdict for one node in Node Problem Detector's custom-plugin convention:
exit 0 OK, 1 a problem, 2 unknown, and one line on stdout that NPD puts in the node
condition's message (NPD cuts it at the plugin config's max_output_length).

    code, line = verdict(rows, report, node)    # rows: drain.hosts(report, doc)

`node` is the host name the ranks recorded (in a pod: the pod's hostname; the chart writes
which pod ran on which Kubernetes node, examples/kubernetes/helm/comm-bench/templates/npd-daemonset.yaml).
"""
from __future__ import annotations

from typing import Any

from .drain import PREFIX, clean

OK, PROBLEM, UNKNOWN = 0, 1, 2


def verdict(rows: list[tuple[str, Any, str | None]], report: dict[str, Any], node: str) -> tuple[int, str]:
    node = str(node)
    found = [(n, why) for n, _, why in rows if n == node or n.split(".")[0] == node.split(".")[0]]
    if not found:
        known = ", ".join(clean(n) for n, _, _ in rows[:5]) + (" ..." if len(rows) > 5 else "")
        return UNKNOWN, f"comm-bench: {clean(node)} is not in these results (hosts: {known or 'none'})"
    name, why = found[0]
    if why:
        return PROBLEM, f"{PREFIX}{clean(name)}: {why[len(PREFIX):] if why.startswith(PREFIX) else why}"
    if report.get("status") == "unconfirmed":
        return UNKNOWN, f"comm-bench: {clean(name)}: suspects left unconfirmed (the sweep ran with --confirm 0)"
    others = len(report.get("findings") or [])
    tail = f" ({others} finding(s) that name no node of this one)" if others else ""
    return OK, f"comm-bench: {clean(name)} ok{tail}"
