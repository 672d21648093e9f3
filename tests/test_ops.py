"""Bus factors, byte counts and the data each op must produce (checked against a
direct simulation of the collective on numpy arrays)."""
import numpy as np
import pytest

from comm_bench import ops


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 1024])
def test_bus_factors_match_nccl_tests(n):
    share = (n - 1) / n
    assert ops.get("all_reduce").bus_factor(n) == pytest.approx(2 * share)
    for name in ("reduce_scatter", "all_gather", "alltoall", "gather", "scatter"):
        assert ops.get(name).bus_factor(n) == pytest.approx(share)
    for name in ("broadcast", "reduce", "sendrecv", "write", "read"):
        assert ops.get(name).bus_factor(n) == 1.0


def test_size_scales_with_n_only_for_gather_scatter_alltoall():
    scaled = {name for name, op in ops.OPS.items() if op.scales_with_n}
    assert scaled == {"all_gather", "reduce_scatter", "alltoall", "gather", "scatter"}


@pytest.mark.parametrize("name,size,n,elem,want", [
    ("all_reduce", 1000, 4, 4, 1000), ("all_reduce", 1001, 4, 4, 1000), ("all_reduce", 1, 4, 4, 4),
    ("all_gather", 1000, 3, 4, 996), ("all_gather", 8, 3, 4, 12), ("alltoall", 4096, 4, 8, 4096),
    ("reduce_scatter", 100, 8, 4, 96), ("sendrecv", 7, 2, 1, 7),
])
def test_round_size(name, size, n, elem, want):
    assert ops.get(name).round_size(size, n, elem) == want


def test_counts_per_rank():
    assert ops.get("all_gather").counts(1200, 3, 4) == (100, 300)
    assert ops.get("reduce_scatter").counts(1200, 3, 4) == (300, 100)
    assert ops.get("all_reduce").counts(1200, 3, 4) == (300, 300)
    assert ops.get("alltoall").counts(1200, 3, 4) == (300, 300)
    assert ops.get("gather").counts(1200, 3, 4) == (100, 300)
    assert ops.get("scatter").counts(1200, 3, 4) == (300, 100)


def simulate(name, n, in_count):
    """The textbook meaning of each collective, computed directly."""
    op = ops.get(name)
    inputs = [op.fill(r, n, in_count) for r in range(n)]
    total = np.sum(inputs, axis=0)
    chunk = in_count // n
    out = {}
    for r in range(n):
        out[r] = {
            "all_reduce": total,
            "reduce": total if r == ops.ROOT else None,
            "broadcast": inputs[ops.ROOT],
            "all_gather": np.concatenate(inputs),
            "reduce_scatter": total[r * chunk:(r + 1) * chunk],
            "alltoall": np.concatenate([inputs[s][r * chunk:(r + 1) * chunk] for s in range(n)]),
            "sendrecv": inputs[(r - 1) % n],
            "gather": np.concatenate(inputs) if r == ops.ROOT else None,
            "scatter": inputs[ops.ROOT][r * chunk:(r + 1) * chunk],
        }[name]
    return out


@pytest.mark.parametrize("name", sorted(ops.OPS))
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_expected_data_matches_simulation(name, n):
    in_count = 12 * n
    sim = simulate(name, n, in_count)
    for r in range(n):
        want = ops.get(name).expected(r, n, in_count)
        if sim[r] is None:
            assert want is None
        else:
            np.testing.assert_array_equal(want, sim[r])


def test_inputs_differ_between_ranks_and_positions():
    a, b = ops.get("all_reduce").fill(0, 4, 10), ops.get("all_reduce").fill(1, 4, 10)
    assert len(set(a.tolist())) > 1 and not np.array_equal(a, b)


def test_count_wrong_counts_each_bad_element():
    want = np.arange(10, dtype=np.int64)
    got = want.astype(np.float32)
    assert ops.count_wrong(got, want) == 0
    got[[2, 7]] = -1
    assert ops.count_wrong(got, want) == 2
    assert ops.count_wrong(got, None) == 0


def test_sums_stay_exact_in_half_precision_for_many_ranks():
    n = 64
    want = ops.get("all_reduce").expected(0, n, 100)
    assert want.max() < 2048  # float16 holds every integer below 2048 exactly
    np.testing.assert_array_equal(want.astype(np.float16).astype(np.int64), want)


def test_unknown_dtype_is_a_usage_error():
    from comm_bench.errors import UsageError

    with pytest.raises(UsageError, match="unknown --dtype"):
        ops.dtype_size("float128")


def test_plan_sizes_one_entry_per_rounded_size():
    assert ops.get("all_gather").plan_sizes([8, 16, 32], 4, 4) == [(16, [8, 16]), (32, [32])]
    assert ops.get("sendrecv").plan_sizes([8, 16], 2, 4) == [(8, [8]), (16, [16])]
