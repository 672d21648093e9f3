"""nccl-tests' -a for the NCCL transports: how the ranks' batch times make time_us."""
from comm_bench.run.sweep import _ranks_time


def test_average_modes_follow_nccl_tests():
    means = [4.0, 2.0, 9.0]  # rank order
    assert _ranks_time("all_reduce", means, 0) == 4.0   # rank 0's
    assert _ranks_time("all_reduce", means, 1) == 5.0   # the mean (nccl-tests' default)
    assert _ranks_time("all_reduce", means, 2) == 2.0   # the lowest
    assert _ranks_time("all_reduce", means, 3) == 9.0   # the highest


def test_without_a_mode_collectives_average_and_copies_take_the_slowest():
    assert _ranks_time("gather", [1.0, 3.0]) == 2.0
    assert _ranks_time("h2d", [1.0, 3.0]) == 3.0
