"""Findings placed on the fabric: bad pairs that one switch port explains, and bad pairs
that an end already named (a slow or unstable host) explains.

A document says where its nodes sit in "fabric": {"switch_of": {host: switch}} (the
simulator writes it; a real run gets it from a hostfile grouping), and, where the routes
are known, "routing" (only the simulator's "ecmp-crc32-pair" here: which uplink port of
its leaves a pair crosses). A port is named when >= 2 distinct node pairs crossing it are
bad and they are >= blame.min_share of the pairs measured across it; its bad pairs then
become one bad-switch-port finding.
"""
from __future__ import annotations

from ..validate_findings import finding

RANK_KINDS = ("bad-host", "bad-device", "bad-rank", "unstable-host", "unstable-rank")


def switch_of(doc) -> dict:
    """host -> switch name, from the document's fabric description ({} when none)."""
    fab = doc.get("fabric") if isinstance(doc.get("fabric"), dict) else {}
    sw = fab.get("switch_of")
    return {h: str(s) for h, s in sw.items()} if isinstance(sw, dict) else {}


def _router(doc):
    """(rank a, rank b) -> port index or None, where the routes are known; else None."""
    fab = doc.get("fabric") if isinstance(doc.get("fabric"), dict) else {}
    from ..fabric_sim.fabric import ROUTING, ecmp_port

    uplinks = fab.get("uplinks")
    if fab.get("routing") != ROUTING or not isinstance(uplinks, int) or uplinks < 1:
        return None
    return lambda a, b: ecmp_port(a, b, uplinks)


def localize(doc, lm, findings, measured, min_share):
    """(findings, notes): bad-pair findings merged into bad-switch-port findings, and those
    explained by a named end dropped. measured: the first-pass (src, dst) pairs."""
    named = {r for f in findings if f["kind"] in RANK_KINDS for r in f.get("ranks") or []}
    notes = {"explained_by_named_end": [], "ports": []}
    out = []
    for f in findings:
        if f["kind"] == "bad-pair" and (f.get("src") in named or f.get("dst") in named):
            notes["explained_by_named_end"].append(f"{f['src']}->{f['dst']}")
            continue
        out.append(f)
    switch, route = switch_of(doc), _router(doc)
    if not switch or route is None:
        return out, notes
    sw = lambda r: switch.get(lm.host(r))       # noqa: E731
    crossing = {}                                # (switch, port) -> {unordered pairs measured}
    for a, b in measured:
        if sw(a) is None or sw(a) == sw(b):
            continue
        p = route(a, b)
        for s in (sw(a), sw(b)):
            crossing.setdefault((s, p), set()).add(frozenset((a, b)))
    bad = {}
    for f in out:
        if f["kind"] != "bad-pair" or sw(f["src"]) == sw(f["dst"]) or sw(f["src"]) is None:
            continue
        p = route(f["src"], f["dst"])
        for s in (sw(f["src"]), sw(f["dst"])):
            bad.setdefault((s, p), []).append(f)
    taken = set()
    for key, fs in sorted(bad.items(), key=lambda kv: -len(kv[1])):
        fs = [f for f in fs if id(f) not in taken]
        pairs = {frozenset((f["src"], f["dst"])) for f in fs}
        share = len(pairs) / max(1, len(crossing.get(key, ())))
        if len(pairs) < 2 or share < min_share:
            continue
        taken |= {id(f) for f in fs}
        s, p = key
        vals = [f["measured_gbs"] for f in fs if f.get("measured_gbs")]
        peers = [f["peer_median_gbs"] for f in fs if f.get("peer_median_gbs")]
        med = sorted(vals)[len(vals) // 2] if vals else None
        peer = sorted(peers)[len(peers) // 2] if peers else None
        rate = f": its pairs run at {med:.3g} GB/s median against {peer:.3g} GB/s" if med and peer else ""
        confs = [f.get("confidence") for f in fs if f.get("confidence") is not None]
        out.append(finding(
            "bad-switch-port", f"switch {s} uplink port {p} is bad{rate} ({len(pairs)} of the "
            f"{len(crossing.get(key, ()))} node pairs measured across it, both ways where measured)",
            switch=s, port=p, pairs=sorted(sorted(x) for x in pairs), measured_gbs=med, peer_median_gbs=peer,
            confidence=max(confs) if confs else None))
        notes["ports"].append(f"{s}:{p}")
    return [f for f in out if id(f) not in taken], notes
