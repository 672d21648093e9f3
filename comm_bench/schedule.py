"""Which ranks talk to which, round by round, for the point-to-point patterns."""
from __future__ import annotations

PATTERNS = ("collective", "pair", "pairwise", "pairwise-concurrent")


def schedule(pattern: str, n: int) -> list:
    """Rounds of (src, dst) pairs; the pairs of one round run at the same time.

    pair:                0 -> 1 only (perftest between two hosts)
    pairwise:            every ordered pair, one at a time: n(n-1) rounds
    pairwise-concurrent: round robin (circle method): n-1 rounds of n/2 disjoint
                         pairs, each round run in both directions: 2(n-1) rounds
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
    raise ValueError(f"not a pair pattern: {pattern}")


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
