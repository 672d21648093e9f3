"""Links that trained below their peers, read from the topology snapshots a results
document carries (hosts[].topology): a finding before a byte is sent.

- a GPU or NIC whose PCIe link runs narrower than its own maximum width or than the
  median of its peers (same GPU model; NICs of the same kind), e.g. x8 among x16. Link
  *speed* (gen) is not compared for GPUs: they drop to gen1 when idle to save power.
- a NIC port whose rate is below its peers' (same kind: ib, roce, ethernet), when most
  of them run faster (a 200G port among 400G ones); virtual interfaces are left out.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from typing import Any

CONFIDENCE = 1.0    # read from sysfs: a fact about the link, not a statistical guess


def _entries(doc: dict[str, Any]) -> Iterator[tuple[Any, str, tuple[str, Any], dict[str, Any]]]:
    """(host, kind, group, entry) for every GPU and physical NIC of every host topology."""
    for h in doc.get("hosts") or []:
        topo = h.get("topology") if isinstance(h, dict) else None
        if not isinstance(topo, dict):
            continue
        host = h.get("host")
        for g in topo.get("gpus") or []:
            if isinstance(g, dict):
                yield host, "gpu", ("gpu", g.get("name")), g
        for n in topo.get("nics") or []:
            if isinstance(n, dict) and not n.get("virtual") and n.get("kind") in ("ib", "roce", "ethernet"):
                yield host, "nic", ("nic", n.get("kind")), n


def _num(v: Any) -> float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _group_stats(members: list[dict[str, Any]],
                 get: Callable[[dict[str, Any]], float | None]) -> tuple[float | None, dict[float, int]]:
    vals = [v for v in (get(e) for e in members) if v]
    if len(vals) < 3:
        return None, {}
    counts: dict[float, int] = {}
    for v in vals:
        counts[v] = counts.get(v, 0) + 1
    return statistics.median(vals), counts


def findings(doc: dict[str, Any], make: Callable[..., dict[str, Any]]) -> list[dict[str, Any]]:
    """make(kind, message, **fields) -> finding. Findings for degraded links."""
    entries = list(_entries(doc))
    groups: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for host, kind, grp, e in entries:
        groups.setdefault(grp, []).append(e)
    width = lambda e: _num((e.get("pcie") if isinstance(e.get("pcie"), dict) else {}).get("cur_width"))  # noqa: E731 - a one-line reader of a link's width
    widths = {g: _group_stats(m, width) for g, m in groups.items()}
    rates = {g: _group_stats(m, lambda e: _num(e.get("rate_gbs"))) for g, m in groups.items()}
    out: list[dict[str, Any]] = []
    for host, kind, grp, e in entries:
        name = f"GPU{e.get('index')}" if kind == "gpu" else e.get("name")
        what = f"{name if kind == 'gpu' else 'NIC ' + str(name)} on host {host}"
        pcie = e["pcie"] if isinstance(e.get("pcie"), dict) else {}
        cw, mw = _num(pcie.get("cur_width")), _num(pcie.get("max_width"))
        peer_w = widths[grp][0]
        if cw and ((mw and cw < mw) or (peer_w and cw < peer_w)):
            ref = max(w for w in (mw, peer_w) if w)
            out.append(make("link-degraded",
                            f"{what} runs PCIe x{cw:g} where {'its peers run' if peer_w and cw < peer_w else 'it can run'} "
                            f"x{ref:g}{f' (max x{mw:g})' if mw else ''}: reseat or check the slot/riser "
                            f"(its transfers get about {cw / ref:.0%} of the bandwidth)",
                            host=host, device=name, link="pcie", measured=f"x{cw:g}", expected=f"x{ref:g}",
                            confidence=CONFIDENCE))
        rate = _num(e.get("rate_gbs")) if kind == "nic" else None
        med, counts = rates[grp]
        # below the group's median, and shared by under a third of the group: a port that
        # trained down, not a class of slower NICs (a 10G management port among 100G ones)
        if rate and med and rate < med and counts.get(rate, 0) < sum(counts.values()) / 3:
            out.append(make("link-degraded",
                            f"{what} ({e.get('kind')}) runs at {rate * 8:g} Gb/s where its peers run "
                            f"{med * 8:g} Gb/s ({rate / med:.0%}): check the cable, the switch port "
                            f"and the negotiated speed ({e.get('rate') or '?'})",
                            host=host, device=name, link=e.get("kind"), measured_gbs=rate,
                            expected_gbs=med, confidence=CONFIDENCE))
    return out
