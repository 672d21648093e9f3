"""Which ranks talk to which, round by round, for the point-to-point patterns.

Coverage and cost (n ranks; a round's pairs run at the same time; COST below is the one
statement of it that --help, the documents and docs/large-clusters.md quote):
"""
from __future__ import annotations

import random

PATTERNS = ("collective", "pair", "pairwise", "pairwise-concurrent", "matchings", "topology")
CONCURRENT = ("pairwise-concurrent", "matchings", "topology")   # several pairs per round
DEFAULT_K = 4
COST = {
    "pairwise": "every ordered pair, one at a time: n(n-1) rounds of 1 pair",
    "pairwise-concurrent": "every ordered pair: 2(n-1) rounds of n/2 disjoint pairs",
    "matchings": "k random perfect matchings, each run both ways: 2k rounds of n/2 pairs; "
                 "every rank measured against k peers each way (n*k of the n(n-1) ordered pairs)",
    "topology": "per switch distance (same leaf, same pod, across pods...) k matchings of pairs at "
                "that distance, both ways: 2k rounds per distance; every rank measured at every distance",
}


def runs_as(pattern: str) -> str:
    """The pattern a transport must run for this one: the large-cluster schedules are
    rounds of disjoint concurrent pairs, as pairwise-concurrent's."""
    return "pairwise-concurrent" if pattern in ("matchings", "topology") else pattern


def rounds_count(pattern: str, n: int, k: int = DEFAULT_K, levels: int = 1) -> int:
    """Rounds a pattern takes (the cost COST states), without building it."""
    return {"pair": 1, "pairwise": n * (n - 1), "pairwise-concurrent": 2 * (n - 1 + n % 2),
            "matchings": 2 * k, "topology": 2 * k * levels}[pattern]


def schedule(pattern: str, n: int, k: int = DEFAULT_K, seed: int = 0, groups=None) -> list:
    """Rounds of (src, dst) pairs; the pairs of one round run at the same time.

    pair:                0 -> 1 only (perftest between two hosts)
    pairwise:            every ordered pair, one at a time: n(n-1) rounds
    pairwise-concurrent: round robin (circle method): n-1 rounds of n/2 disjoint
                         pairs, each round run in both directions: 2(n-1) rounds
    matchings:           k random perfect matchings (seeded), each run both ways
    topology:            groups[rank] = (pod, leaf, ...) path of its switches (outermost
                         first); per distance, k matchings of pairs at that distance
    """
    if n < 2:
        return []
    if pattern == "pair":
        return [[(0, 1)]]
    if pattern == "pairwise":
        return [[(s, d)] for s in range(n) for d in range(n) if s != d]
    if pattern == "pairwise-concurrent":
        rounds = []
        for pairs in round_robin(n):
            rounds.append(pairs)
            rounds.append([(d, s) for s, d in pairs])
        return rounds
    if pattern == "matchings":
        return both_ways(random_matchings(list(range(n)), k, random.Random(seed)))
    if pattern == "topology":
        return both_ways(topology_matchings(groups or [()] * n, k, random.Random(seed)))
    raise ValueError(f"not a pair pattern: {pattern}")


def both_ways(matchings: list) -> list:
    """Each matching as two rounds: a -> b, then b -> a (a NIC can fail one way only)."""
    out = []
    for pairs in matchings:
        out.append(pairs)
        out.append([(d, s) for s, d in pairs])
    return out


def random_matchings(ranks: list, k: int, rnd: random.Random) -> list:
    """k perfect matchings of `ranks` (one sits out when odd, a different one each time):
    each a shuffle, then a pair an earlier matching used swaps a partner with a random
    other pair where both new pairs are unused (so every rank meets k distinct peers
    while k is well below n)."""
    used: set = set()
    out = []
    for _ in range(k):
        order = list(ranks)
        rnd.shuffle(order)
        pairs = [[order[i], order[i + 1]] for i in range(0, len(order) - 1, 2)]
        for i, p in enumerate(pairs):
            tries = 0
            while frozenset(p) in used and tries < 64 and len(pairs) > 1:
                tries += 1
                j = rnd.randrange(len(pairs))
                q = pairs[j]
                if j != i and frozenset((p[0], q[1])) not in used and frozenset((q[0], p[1])) not in used:
                    p[1], q[1] = q[1], p[1]
        pairs = [tuple(p) for p in pairs]  # type: ignore[misc]
        used.update(frozenset(p) for p in pairs)
        out.append(pairs)
    return out


def distances(groups: list) -> list:
    """The switch distances present: 1 = same innermost switch, up to depth + 1 = across
    the outermost groups (groups[rank] = (pod, leaf, ...), all the same depth)."""
    depth = len(groups[0]) if groups else 0
    present = set()
    blocks: dict = {}
    for g in groups:
        blocks.setdefault(tuple(g), 0)
        blocks[tuple(g)] += 1
    if any(c > 1 for c in blocks.values()):
        present.add(1)
    for level in range(depth):          # pairs differing first at `level`
        parents: dict = {}
        for g in blocks:
            parents.setdefault(g[:level], set()).add(g[level])
        if any(len(v) > 1 for v in parents.values()):
            present.add(depth + 1 - level)
    return sorted(present)


def switch_distance(a, b) -> int:
    """1 when a and b share their innermost switch, depth + 1 when they differ at the top."""
    depth = len(a)
    for level in range(depth):
        if a[level] != b[level]:
            return depth + 1 - level
    return 1


def topology_matchings(groups: list, k: int, rnd: random.Random) -> list:
    """For each distance present (nearest first), k matchings whose pairs are at that
    distance: within each parent switch group, ranks ordered by child group and the
    list's halves paired, so no pair stays inside one child while no child holds more
    than half of its parent (then the rest sit out)."""
    depth = len(groups[0]) if groups else 0
    out = []
    for dist in distances(groups):
        level = depth + 1 - dist      # the group level at which pairs must differ
        for _ in range(k):
            parents: dict = {}
            for r, g in enumerate(groups):
                key = tuple(g) if dist == 1 else tuple(g[:level])
                parents.setdefault(key, []).append(r)
            pairs = []
            for members in parents.values():
                if dist == 1:
                    rnd.shuffle(members)
                    pairs += [(members[i], members[i + 1]) for i in range(0, len(members) - 1, 2)]
                    continue
                children: dict = {}
                for r in members:
                    children.setdefault(groups[r][level], []).append(r)
                kids = list(children.values())
                rnd.shuffle(kids)
                for c in kids:
                    rnd.shuffle(c)
                order = [r for c in kids for r in c]
                half = len(order) // 2
                pairs += [(a, b) for a, b in zip(order[:half], order[half:2 * half])
                          if groups[a][level] != groups[b][level]]
            out.append(pairs)
    return out


def round_robin(n: int) -> list:
    """n-1 rounds (n even; one rank sits out each round when n is odd) of disjoint pairs."""
    ranks = list(range(n)) + ([None] if n % 2 else [])
    m = len(ranks)
    rounds = []
    for _ in range(m - 1):
        pairs = [(ranks[i], ranks[m - 1 - i]) for i in range(m // 2)]
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        ranks = [ranks[0]] + [ranks[-1]] + ranks[1:-1]  # rotate all but the first
    return rounds


def my_pair(round_pairs: list, rank: int):
    """(peer, role) of `rank` in this round, or (None, None) when it sits out."""
    for src, dst in round_pairs:
        if rank == src:
            return dst, "src"
        if rank == dst:
            return src, "dst"
    return None, None
