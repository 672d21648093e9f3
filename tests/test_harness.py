"""The native timing harness: its per-iteration times agree with the system clock
(the time-stamp counter's rate, where it is used, is calibrated correctly)."""
import time

from comm_bench import _C


def test_timed_iterations_agree_with_the_monotonic_clock():
    wait_us, iters = 200, 200
    t0 = time.perf_counter()
    samples = _C.harness_timed_waits_us(iters, wait_us * 1000)
    wall_us = (time.perf_counter() - t0) * 1e6
    assert len(samples) == iters
    # every iteration waited at least 200 us on CLOCK_MONOTONIC: a rate off by 0.5% shows
    assert min(samples) >= wait_us * 0.995, min(samples)
    # and together they fit inside the wall time around the call (same 0.5% margin)
    assert wait_us * iters * 0.995 <= sum(samples) <= wall_us * 1.005, (sum(samples), wall_us)
