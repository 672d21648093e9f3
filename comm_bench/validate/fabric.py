"""Findings placed on the fabric: bad pairs that one switch port explains, and bad pairs
that an end already named (a slow or unstable host) explains.

A document says where its nodes sit in "fabric": {"switch_of": {host: switch}} (the
simulator writes it; a real run gets it from a hostfile grouping), and, where the routes
are known, "routing" (only the simulator's "ecmp-crc32-pair" here: which uplink port of
its leaves a pair crosses). A port is named when >= 2 distinct node pairs crossing it are
bad and they are >= blame.min_share of the pairs measured across it; its bad pairs then
become one bad-switch-port finding. Where the routes are not known (a real run), a
switch's uplinks count as one port (_uplinks).
"""
from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from typing import Any

from .finding_kinds import finding

ROUTING = "ecmp-crc32-pair"     # the simulator's routing, as its documents name it

RANK_KINDS = ("bad-host", "bad-device", "bad-rank", "unstable-host", "unstable-rank")


def switch_of(doc: dict[str, Any]) -> dict[str, str]:
    """host -> switch name, from the document's fabric description ({} when none)."""
    fab = doc["fabric"] if isinstance(doc.get("fabric"), dict) else {}
    sw = fab.get("switch_of")
    return {h: str(s) for h, s in sw.items()} if isinstance(sw, dict) else {}


def ecmp_port(a: int, b: int, uplinks: int) -> int:
    """The simulated ECMP hash: the uplink port (same index at both leaves) of pair a-b."""
    lo, hi = min(a, b), max(a, b)
    return zlib.crc32(f"{lo}-{hi}".encode()) % uplinks


def _router(doc: dict[str, Any]) -> Callable[[int, int], int] | None:
    """(rank a, rank b) -> port index or None, where the routes are known; else None."""
    fab = doc["fabric"] if isinstance(doc.get("fabric"), dict) else {}
    uplinks = fab.get("uplinks")
    if fab.get("routing") != ROUTING or not isinstance(uplinks, int) or uplinks < 1:
        return None
    return lambda a, b: ecmp_port(a, b, uplinks)


def localize(doc: dict[str, Any], lm: Any, findings: list[dict[str, Any]], measured: Iterable[tuple[int, int]],
             min_share: float, low: Iterable[tuple[int, int]] = (), values: dict[tuple[int, int], float] | None = None,
             slow: Iterable[tuple[int, int]] = ()) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """(findings, notes): bad pairs that one switch port explains become one bad-switch-port
    finding, and bad or unstable pair findings that a named end explains are dropped.
    measured: the first-pass (src, dst) pairs; low: those below the rules' pair_ratio x
    their group's median (a pair of a rank flagged and then withdrawn by the confirm phase
    never became a finding, yet it is evidence against the port it crosses); values:
    (src, dst) -> first-pass GB/s, for the rates a finding quotes; slow: the pairs below
    the rank outlier ratio x their group's median (as slow as a host that would be named)."""
    named = {r for f in findings if f["kind"] in RANK_KINDS for r in f.get("ranks") or []}
    notes: dict[str, list[str]] = {"explained_by_named_end": [], "ports": []}
    out = []
    for f in findings:
        if f["kind"] in ("bad-pair", "unstable-pair") and (f.get("src") in named or f.get("dst") in named):
            notes["explained_by_named_end"].append(f"{f['src']}->{f['dst']}")
            continue
        out.append(f)
    switch, route = switch_of(doc), _router(doc)
    if switch and route is None:      # a real run with --groups: routes unknown
        return _uplinks(lm, switch, out, measured, min_share, set(low) | set(slow), values or {}, notes)
    if not switch:
        return out, notes
    sw: Callable[[int], str | None] = lambda r: switch.get(lm.host(r))       # noqa: E731 - a one-line lookup: rank -> its switch

    def ports(a: int, b: int) -> tuple[tuple[Any, int], ...]:
        if sw(a) is None or sw(b) is None or sw(a) == sw(b):
            return ()
        p = route(a, b)  # type: ignore[misc]  # known: switch and no route returned above
        return ((sw(a), p), (sw(b), p))
    crossing: dict[tuple[Any, int], set[frozenset[int]]] = {}   # (switch, port) -> {unordered node pairs}
    bad: dict[tuple[Any, int], set[frozenset[int]]] = {}
    for a, b in measured:
        for key in ports(a, b):
            crossing.setdefault(key, set()).add(frozenset((a, b)))
    pair_findings = {(f["src"], f["dst"]) for f in out if f["kind"] == "bad-pair"}
    for a, b in set(low) | pair_findings:
        if a in named or b in named:
            continue
        for key in ports(a, b):
            bad.setdefault(key, set()).add(frozenset((a, b)))
    taken: set[frozenset[int]] = set()
    for key, pairs in sorted(bad.items(), key=lambda kv: (-len(kv[1]), str(kv[0]))):
        pairs = pairs - taken
        share = len(pairs) / max(1, len(crossing.get(key, ())))
        if len(pairs) < 2 or share < min_share:
            continue
        taken |= pairs
        mine = [f for f in out if f["kind"] == "bad-pair" and frozenset((f["src"], f["dst"])) in pairs]
        med = _median([f["measured_gbs"] for f in mine if f.get("measured_gbs")])
        peer = _median([f["peer_median_gbs"] for f in mine if f.get("peer_median_gbs")])
        rate = f": its pairs run at {med:.3g} GB/s median against {peer:.3g} GB/s" if med and peer else ""
        confs: list[float] = [f["confidence"] for f in mine if f.get("confidence") is not None]
        s, p = key
        out.append(finding(
            "bad-switch-port", f"switch {s} uplink port {p} is bad{rate} ({len(pairs)} of the "
            f"{len(crossing.get(key, ()))} node pairs measured across it read low)",
            switch=s, port=p, pairs=sorted(sorted(x) for x in pairs), measured_gbs=med, peer_median_gbs=peer,
            confidence=max(confs) if confs else None))
        notes["ports"].append(f"{s}:{p}")
    return [f for f in out if f["kind"] != "bad-pair" or frozenset((f["src"], f["dst"])) not in taken], notes


def _uplinks(lm: Any, switch: dict[str, str], out: list[dict[str, Any]], measured: Iterable[tuple[int, int]],
             min_share: float, low: set[tuple[int, int]], values: dict[tuple[int, int], float],
             notes: dict[str, list[str]]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Where the routes are not known, a switch's uplinks count as one port. A switch whose
    node pairs leaving it read low (at least 2, at least min_share of those measured, and
    of each of its hosts'), from 2 or more hosts, while its pairs inside it read normal, has
    a bad uplink: one bad-switch-port finding replaces the hosts and pairs it explains (each
    of its hosts would otherwise look slow, since most of their peers are elsewhere)."""
    sw: Callable[[int], str | None] = lambda r: switch.get(lm.host(r))       # noqa: E731 - a one-line lookup: rank -> its switch
    bad = set(map(frozenset, low)) | {frozenset((f["src"], f["dst"])) for f in out if f["kind"] == "bad-pair"}
    pairs = {frozenset(p) for p in measured if p[0] != p[1]}
    leaving = {s: {p for p in pairs if sum(sw(r) == s for r in p) == 1} for s in set(switch.values())}
    taken: set[frozenset[int]] = set()         # slow pairs a named uplink explains: no evidence against the other end's
    for s in sorted(leaving, key=lambda s: (-len(leaving[s] & bad), s)):
        inside = {p for p in pairs if all(sw(r) == s for r in p)}
        slow = (leaving[s] - taken) & bad
        ends = {r for p in slow for r in p if sw(r) == s}
        if len(slow) < 2 or len(ends) < 2 or len(slow) < min_share * len(leaving[s] - taken):
            continue
        if not inside or len(inside & bad) >= min_share * len(inside):
            continue        # nothing inside to compare with, or the hosts are slow there too
        per_host: dict[int, list[bool]] = {}       # an uplink slows every host under it, not two slow hosts' pairs only
        for p in leaving[s] - taken:
            r = next(r for r in p if sw(r) == s)
            per_host.setdefault(r, []).append(p in slow)
        if any(sum(v) < min_share * len(v) for v in per_host.values()):
            continue
        mine = {r for p in pairs for r in p if sw(r) == s}
        explained = [f for f in out if (f["kind"] in RANK_KINDS and set(f.get("ranks") or []) <= mine)
                     or (f["kind"] == "bad-pair" and frozenset((f["src"], f["dst"])) in slow)]
        rate: Callable[[set[frozenset[int]]], float | None] = lambda ps: _median([values[q] for p in ps for q in (tuple(p), tuple(p)[::-1]) if q in values])  # noqa: E731 - a one-line helper
        low_gbs, in_gbs = rate(slow), rate(inside)
        said = f": its pairs leaving it run at {low_gbs:.3g} GB/s median, pairs inside it at {in_gbs:.3g}" \
            if low_gbs and in_gbs else ""
        confs: list[float] = [f["confidence"] for f in explained if f.get("confidence") is not None]
        taken |= slow
        out = [f for f in out if f not in explained]
        out.append(finding(
            "bad-switch-port", f"switch {s}'s uplink is bad{said} ({len(slow)} of the {len(leaving[s])} node "
            f"pairs measured leaving it read low, {len(inside & bad)} of {len(inside)} inside it; the "
            f"routes are not known, so its uplinks count as one port)",
            switch=s, port="uplinks", pairs=sorted(sorted(p) for p in slow), measured_gbs=low_gbs,
            peer_median_gbs=in_gbs, explains=[f["message"] for f in explained],
            confidence=max(confs) if confs else None))
        notes["ports"].append(f"{s}:uplinks")
    return out, notes


def _median(vals: Iterable[float]) -> float | None:
    """The upper median, or None for none."""
    vals = sorted(vals)
    return vals[len(vals) // 2] if vals else None
