import pytest

from comm_bench.schedule import my_pair, round_robin, schedule


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_pairwise_covers_every_ordered_pair_once(n):
    rounds = schedule("pairwise", n)
    pairs = [p for r in rounds for p in r]
    assert all(len(r) == 1 for r in rounds)
    assert sorted(pairs) == sorted((s, d) for s in range(n) for d in range(n) if s != d)


@pytest.mark.parametrize("n", [2, 3, 4, 6, 7, 8, 16])
def test_pairwise_concurrent_rounds_are_disjoint_and_complete(n):
    rounds = schedule("pairwise-concurrent", n)
    expected_rounds = 2 * (n - 1 if n % 2 == 0 else n)
    assert len(rounds) == expected_rounds
    for r in rounds:
        ranks = [x for p in r for x in p]
        assert len(ranks) == len(set(ranks)), r  # no rank in two pairs at once
        assert len(r) == n // 2
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == sorted((s, d) for s in range(n) for d in range(n) if s != d)


def test_round_robin_has_n_minus_1_rounds_for_even_n():
    assert len(round_robin(8)) == 7


def test_pair_and_roles():
    assert schedule("pair", 4) == [[(0, 1)]]
    assert schedule("pairwise", 1) == []
    assert my_pair([(0, 3), (1, 2)], 3) == (0, "dst")
    assert my_pair([(0, 3), (1, 2)], 1) == (2, "src")
    assert my_pair([(0, 3)], 2) == (None, None)
    with pytest.raises(ValueError):
        schedule("collective", 4)
