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


# ----------------------------------------------------------------------------- large clusters
from comm_bench.schedule import distances, rounds_count, switch_distance  # noqa: E402


@pytest.mark.parametrize("n,k", [(8, 3), (9, 2), (1024, 4), (4096, 8)])
def test_matchings_k_peers_each_way_in_2k_rounds(n, k):
    rounds = schedule("matchings", n, k=k, seed=1)
    assert len(rounds) == 2 * k == rounds_count("matchings", n, k)
    out, into = {}, {}
    for r in rounds:
        ranks = [x for p in r for x in p]
        assert len(ranks) == len(set(ranks)) and len(r) == n // 2
        for s, d in r:
            out.setdefault(s, set()).add(d)
            into.setdefault(d, set()).add(s)
    if n % 2 == 0:                      # every rank measured both ways, against distinct peers
        assert all(len(out[r]) == k and len(into[r]) == k for r in range(n))
    assert schedule("matchings", n, k=k, seed=1) == rounds      # the same on every rank
    assert schedule("matchings", n, k=k, seed=2) != rounds


def test_topology_pairs_at_each_switch_distance():
    groups = [(r // 64, r // 16) for r in range(256)]   # 4 pods of 4 leaves of 16 nodes
    assert distances(groups) == [1, 2, 3]
    rounds = schedule("topology", 256, k=2, groups=groups)
    assert len(rounds) == rounds_count("topology", 256, 2, levels=3) == 12
    for i, r in enumerate(rounds):
        want = 1 + i // 4                                 # 2k = 4 rounds per distance, nearest first
        assert r and {switch_distance(groups[a], groups[b]) for a, b in r} == {want}
        assert len(r) == 128                              # everyone measured at every distance
        ranks = [x for p in r for x in p]
        assert len(ranks) == len(set(ranks))


def test_topology_flat_groups_is_one_distance():
    assert distances([("a",)] * 6) == [1]
    assert distances([("a",), ("b",)]) == [2]


# ----------------------------------------------------------------------------- real ranks
def test_sweep_runs_the_matchings_schedule_with_real_tcp_ranks(tmp_path):
    import json

    from cbtest import run_cli

    out = tmp_path / "m.json"
    run_cli("sweep", "-t", "tcp", "-N", 4, "--pattern", "matchings", "--matchings", 2, "-b", "64K", "-e", "64K",
            "-n", 3, "-w", 1, "-o", out, "--no-progress", timeout=180, check_rc=0)
    doc = json.loads(out.read_text())
    got = sorted((r["round"], r["src"], r["dst"]) for r in doc["results"] if "confirm" not in r)
    want = sorted((i, s, d) for i, r in enumerate(schedule("matchings", 4, k=2)) for s, d in r)
    assert got == want and doc["schedule"]["rounds"] == 4 and "matchings" in doc["schedule"]["cost"]


def test_sweep_topology_pattern_reads_the_groups_file(tmp_path):
    import json
    import socket

    from cbtest import assert_no_traceback, run_cli

    out = tmp_path / "t.json"
    proc = run_cli("sweep", "-t", "tcp", "-N", 4, "--pattern", "topology", "-o", out)
    assert proc.returncode == 2 and "--groups" in proc.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text("hostA leaf1\nhostB leaf1 pod1\n")
    proc = run_cli("sweep", "-t", "tcp", "-N", 4, "--pattern", "topology", "--groups", bad, "-o", out)
    assert proc.returncode == 2 and "line 2" in proc.stderr
    assert_no_traceback(proc)
    groups = tmp_path / "groups.txt"
    groups.write_text(f"# host leaf\n{socket.gethostname()} leaf7\n")
    run_cli("sweep", "-t", "tcp", "-N", 4, "--pattern", "topology", "--groups", groups, "--matchings", 1,
            "-b", "64K", "-e", "64K", "-n", 3, "-w", 1, "-o", out, "--no-progress", timeout=180, check_rc=0)
    doc = json.loads(out.read_text())
    assert doc["fabric"]["switch_of"] == {socket.gethostname(): "leaf7"}
    first_pass = [r for r in doc["results"] if "confirm" not in r]   # the default confirm phase adds its own
    assert doc["schedule"]["rounds"] == 2 and len(first_pass) == 4
