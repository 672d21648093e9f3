"""The confirm phase of a pair sweep (`sweep --confirm K`, and `check`), its pure part:
after the first pass of an op, rank 0 names the suspects (suspects.py) and every rank
re-measures them (run/confirm_phase.py runs it), one pair at a time at the largest size,
K times, each time next to a known-good reference of the same link class measured just
before or after it (the order alternates), so slow drift, a CPU hog or another job hits
both sides of each comparison alike. verdicts.py reads the records.

Records of this phase carry "confirm": {"id", "target", "why", "alt", "role", "dir"}.
A `--mode lat` sweep confirms its latency suspects the same way, at its smallest size,
comparing speeds = 1 / the median one-way latency (measure_of).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    Round = tuple[int, int, dict[str, Any], Any]     # (src, dst, tag, iters or None)
    Leg = tuple[int, int, str]                      # (src, dst, direction) of one measurement
    Pick = tuple[list[Leg], list[Leg]]              # one alternation: (suspect legs, reference legs)


# alternations per suspect unless --confirm says otherwise (sweep, check, simulate): the
# one-sided signed-rank test needs 5 to reach 0.95 at all; 8 reached it for a 60% host and
# a flapping one on the netns fabric (docs/validate-rules.md)
DEFAULT_ALTERNATIONS = 8
LONG_S = 0.5    # a suspect's measurements last at least this long (up to 4x --iters)


def span_iters(iters: int, t_us: float | None) -> int | None:
    """Iterations for a suspect whose first-pass iteration took t_us: enough that each of its
    measurements spans LONG_S of a link's swings, at most 4x the sweep's own. Every suspect
    gets them, not only those named unstable: a link toggling every 0.3 s can read merely
    slow in the first pass, and 8 iterations of 17 ms then often fall inside one phase (a
    recorded CI run: unsteady in 3 of 8 alternations, so not named unstable). A slow suspect's
    own iterations are long, so it rarely needs more."""
    if not t_us or t_us <= 0:
        return None
    return min(4 * iters, max(iters, math.ceil(LONG_S * 1e6 / t_us)))


def plan(suspects: Sequence[dict[str, Any]], good: Sequence[int], alternations: int,
         links: Any = None) -> list[Round]:
    """Rounds [(src, dst, tag, iters)] for the suspects; none without two known-good ranks.
    A suspect's "iters" (span_iters) are used for it and its references; absent: the sweep's own.
    (Its "size", where validate quotes it at one, is run_phase's: tag["id"] indexes the suspects.)
    links (the run's LinkMap): each reference is a link of the suspect's class, and a rank is
    re-measured across nodes where it has any. Without it, with 2 ranks a host, a clean run
    named a cross-host pair 57% "slow" against a same-host reference. A suspect that has no
    reference of its class gets no rounds: validate reports it unconfirmed (exit 3)."""
    rounds: list[Round] = []
    if len(good) < 2:
        return rounds
    cls: Callable[[int, int], Any] = ((lambda a, b: links.classify(a, b)[0]) if links is not None
                                      else (lambda a, b: None))
    node: Callable[[int], Any] = links.node if links is not None else (lambda r: None)
    for i, s in enumerate(suspects):
        target = {"rank": s["rank"]} if s["kind"] == "rank" else {"src": s["src"], "dst": s["dst"]}
        base = {"id": i, "kind": s["kind"], "target": target, "why": list(s["why"])}
        iters = s.get("iters")
        picks = [_rank_references(s["rank"], good, k, cls, node) if s["kind"] == "rank"
                 else _pair_references(s["src"], s["dst"], good, k, cls) for k in range(int(alternations))]
        if None in picks:
            continue
        for k, (sus, ref) in enumerate(cast("list[Pick]", picks)):     # no None: tested above
            first, second = (sus, ref) if k % 2 == 0 else (ref, sus)
            roles = ("suspect", "reference") if k % 2 == 0 else ("reference", "suspect")
            for a, b in zip(first, second):
                for (src, dst, d), role in ((a, roles[0]), (b, roles[1])):
                    rounds.append((src, dst, dict(base, alt=k, role=role, dir=d), iters))
    return rounds


# candidates tried per alternation before a suspect is left without references: a good
# list of thousands of ranks, mostly of one class, finds a match within the first few
SEARCH = 64


def _rotation(ranks: Sequence[int], start: int) -> list[tuple[int, int]]:
    """[(index, rank)] of up to SEARCH ranks in turn from position start."""
    n = len(ranks)
    return [((start + j) % n, ranks[(start + j) % n]) for j in range(min(n, SEARCH))]


def _pair_references(src: int, dst: int, good: Sequence[int], k: int,
                     cls: Callable[[int, int], Any]) -> Pick | None:
    """([suspect round], [reference round]) of alternation k of pair src -> dst: the next two
    known-good ranks in turn (k, k + 1 when all links are of one class) whose link is of the
    suspect's class; None if there is none."""
    others = [r for r in good if r not in (src, dst)] or good
    want = cls(src, dst)
    for i, g in _rotation(others, k):
        for _, h in _rotation(others, i + 1):
            if h != g and cls(g, h) == want:
                return [(src, dst, "out")], [(g, h, "out")]
    return None


def _rank_references(rank: int, good: Sequence[int], k: int, cls: Callable[[int, int], Any],
                     node: Callable[[int], Any]) -> Pick | None:
    """Alternation k of a rank suspect: its links out to and in from a known-good peer p,
    against another known-good rank g's links with p of the same classes. p is on another
    node where one is (a NIC's fault shows there); None if no g matches."""
    ps = _rotation(good, k)
    for i, p in [e for e in ps if node(e[1]) != node(rank)] + [e for e in ps if node(e[1]) == node(rank)]:
        out, inn = cls(rank, p), cls(p, rank)
        for _, g in _rotation(good, i + 1):
            if g != p and cls(g, p) == out and cls(p, g) == inn:
                return [(rank, p, "out"), (p, rank, "in")], [(g, p, "out"), (p, g, "in")]
    return None


def measure_of(mode: str) -> tuple[Callable[[dict[str, Any]], list[dict[str, Any]]],
                                   Callable[[dict[str, Any]], float | None]]:
    """(the document's records of a mode, value(rec): a speed, higher is better) that
    suspects and verdicts compare: bandwidth in GB/s, or 1 / the median one-way latency."""
    from ..results.records import inverse_latency, latency_pair_records, measured_gbs, pair_records

    return (latency_pair_records, inverse_latency) if mode == "lat" else (pair_records, measured_gbs)


def suspects_of(doc: dict[str, Any], rules: dict[str, Any], mode: str = "bw",
                op: str | None = None) -> tuple[list[dict[str, Any]], list[int], list[float | None]]:
    """Rank 0: suspects, known-good ranks, and each suspect's median time_us at the largest
    size (a rank: over its pairs; a pair: its own), in the order of the suspects. First come
    the ranks and pairs validate would name from this first pass (validate_named), each at
    the size it would name them at; then the lesser suspects. mode "lat": suspects by
    latency, at every size. op: only that op's records (a sweep confirms one op at a time)."""
    from ..topology.linkmap import LinkMap
    from .checks import checked_size_list
    from .pair_obs import PairColumns
    from .rules import document_outlier_rules
    from .suspects import PairTable, find, first_pass, suspect_key

    records, value = measure_of(mode)
    recs = [r for r in first_pass(records(doc)) if op is None or r.get("op") == op]
    if not recs:
        return [], [], []
    lm = LinkMap(doc)
    cols = PairColumns(lm, value)
    for r in recs:
        cols.add(r)
    sizes = cols.sizes() if mode == "lat" else checked_size_list(cols.sizes(), rules)
    table = PairTable(cols, sizes)
    o = document_outlier_rules(rules, doc)
    first = dict(doc, results=[r for r in first_pass(doc.get("results") or []) if op is None or r.get("op") == op])
    sus, good = find(table, rules["confirm"], int(rules["outliers"]["min_peers"]), named=validate_named(first, rules),
                     pair_ratio=0.0 if mode == "lat" else o["pair_ratio"])
    size = max(r["size"] for r in recs)
    keys = [suspect_key(s) for s in sus]
    times: dict[tuple[Any, ...], list[float]] = {k: [] for k in keys}
    for r in recs:      # one pass: a 4,096-node first pass holds millions of records
        t = r.get("time_us")
        if r["size"] == size and isinstance(t, (int, float)) and t > 0:
            for k in (("rank", r["src"]), ("rank", r["dst"]), ("pair", r["src"], r["dst"])):
                if k in times:
                    times[k].append(t)
    return sus, good, [statistics.median(times[k]) if times[k] else None for k in keys]


def validate_named(doc: dict[str, Any], rules: dict[str, Any]) -> list[dict[str, Any]]:
    """The ranks and pairs `comm-bench validate` would name from this first pass (its
    findings, and the findings it would report as unconfirmed), as suspects: the confirm
    phase re-measures exactly these first, a latency pair at the size it is quoted at."""
    from .checks import check
    from .finding_kinds import NothingToCheck
    from .findings import needs_confirming

    try:
        rep = check(doc, rules)
    except NothingToCheck:
        return []
    found = rep["findings"] + ((rep.get("checked") or {}).get("diagnosis") or {}).get("unconfirmed_findings", [])
    out: list[dict[str, Any]] = []
    ranks: set[int] = set()
    for f in (f for f in found if needs_confirming(f)):
        if f.get("ranks"):
            ranks.update(f["ranks"])
            out += [{"kind": "rank", "rank": r, "why": ["slow"], "score": None} for r in f["ranks"]]
    pairs = [f for f in found if needs_confirming(f) and not f.get("ranks") and f.get("src") is not None
             and not {f["src"], f["dst"]} & ranks]      # a named end explains its pairs
    # three or more would-be pair findings sharing one end: that end is re-measured instead, as
    # suspects.find does (a flapping host's slow pairs, found at 1,024 simulated nodes)
    while pairs:
        ends: dict[int, int] = {}
        for f in pairs:
            for r in (f["src"], f["dst"]):
                ends[r] = ends.get(r, 0) + 1
        r, n = min(ends.items(), key=lambda kv: (-kv[1], kv[0]))
        if n < 3:
            break
        out.append({"kind": "rank", "rank": r, "why": ["unstable"], "score": None, "slow_pairs": n})
        pairs = [f for f in pairs if r not in (f["src"], f["dst"])]
    for f in pairs:
        e = {"kind": "pair", "src": f["src"], "dst": f["dst"], "why": ["slow"], "score": None}
        if f["kind"] == "high-latency-pair":
            e["size"] = f["size"]
        out.append(e)
    return out
