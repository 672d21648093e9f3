"""The data check of the framework transports can fail: an op that does nothing, or
does the wrong thing, is counted element by element."""
import numpy as np

from comm_bench.transports import _framework as fw


def run_check(op, rank, n, step_result):
    values, out_count, want = fw.check_plan(op, rank, n, 4096, 4)
    out = np.zeros(out_count, np.float32)

    def step():
        out[:] = step_result(values, out_count)

    res = fw.measure((step, None), 3, 1, check=True, reset=lambda: out.fill(0),
                     output=lambda: out, want=want, role=None, mode="bw")
    assert len(res.samples_us) == 3 and all(s >= 0 for s in res.samples_us)
    return res.wrong, out_count


def test_an_op_that_does_nothing_is_all_wrong():
    wrong, count = run_check("all_reduce", 1, 4, lambda v, c: 0)
    assert wrong == count


def test_a_correct_result_is_zero_wrong_and_one_bad_element_is_one():
    expected = lambda v, c: fw.check_plan("all_reduce", 1, 4, 4096, 4)[2]  # noqa: E731
    assert run_check("all_reduce", 1, 4, expected)[0] == 0

    def one_off(v, c):
        x = expected(v, c).copy()
        x[17] += 1
        return x
    assert run_check("all_reduce", 1, 4, one_off)[0] == 1


def test_gather_from_the_wrong_rank_order_is_caught():
    def wrong_order(v, c):
        parts = [fw.check_plan("all_gather", r, 4, 4096, 4)[0] for r in reversed(range(4))]
        return np.concatenate(parts)
    wrong, count = run_check("all_gather", 0, 4, wrong_order)
    assert 0 < wrong <= count


def test_a_stream_source_leaves_the_check_to_the_destination():
    values, count, want = fw.check_plan("sendrecv", 0, 2, 64, 1, role="src")
    out = np.zeros(count)
    res = fw.measure((lambda: None, lambda: None), 2, 0, check=True, reset=lambda: None,
                     output=lambda: out, want=want, role="src", mode="bw")
    assert res.wrong == 0
    res = fw.measure((lambda: None, None), 2, 0, check=True, reset=lambda: None,
                     output=lambda: out, want=want, role="dst", mode="bw")
    assert res.samples_us == [] and res.wrong == count  # nothing arrived
