"""The statistics of timings: median intervals, per-pair ratios and the stopping rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gemm.judge.stats import StopRule, clock_step, median_interval, ratio_interval, step_floors
from pytest_gemm.records.verdicts import Stop

from support import TIMED, recorded_outcome


def _coverage(n: int, low_rank: int, high_rank: int) -> float:
    """P(x(low) <= median < x(high)) for n samples of any continuous distribution: P(low <= Bin(n, 1/2) < high)."""
    return sum(math.comb(n, j) for j in range(low_rank, high_rank)) / 2**n


def _ranks(samples: np.ndarray, interval) -> tuple[int, int]:
    ordered = np.sort(samples)
    return int(np.searchsorted(ordered, interval.low)) + 1, int(np.searchsorted(ordered, interval.high)) + 1


def test_median_interval_of_known_data():
    rng = np.random.default_rng(1)
    samples = rng.permutation(np.arange(1, 101, dtype=float))
    iv = median_interval(samples)
    assert (iv.median, iv.low, iv.high, iv.n) == (50.5, 40.0, 61.0, 100)
    assert iv.rel_half_width == pytest.approx(10.5 / 50.5)


@pytest.mark.parametrize("n", [6, 10, 25, 100, 1000, 5000])
def test_the_interval_covers_the_true_median_at_least_95_percent_of_the_time(n):
    samples = np.arange(n, dtype=float)
    low, high = _ranks(samples, median_interval(samples))
    assert _coverage(n, low, high) >= 0.95


def test_the_interval_is_not_needlessly_wide():
    samples = np.arange(1000, dtype=float)
    low, high = _ranks(samples, median_interval(samples))
    assert _coverage(n=1000, low_rank=low + 2, high_rank=high - 2) < 0.95


def test_few_samples_give_the_whole_range_and_none_give_infinite_noise():
    iv = median_interval([3.0, 1.0, 2.0])
    assert (iv.low, iv.median, iv.high) == (1.0, 2.0, 3.0)
    empty = median_interval([])
    assert empty.n == 0 and empty.rel_half_width == math.inf


def test_per_pair_ratios_cancel_drift_that_the_medians_keep():
    drift = np.linspace(1.0, 1.5, 200)  # the clock slows down by half over the run
    kernel, reference = 2.0 * drift, drift
    assert median_interval(kernel).rel_half_width > 0.01
    ratio = ratio_interval(kernel, reference)
    assert ratio.median == pytest.approx(2.0) and ratio.rel_half_width == pytest.approx(0.0, abs=1e-12)


def test_ratio_needs_matching_pairs():
    with pytest.raises(ValueError, match="pairs must match"):
        ratio_interval([1.0, 2.0], [1.0])


def test_stop_rule():
    rule = StopRule(target=0.005, min_samples=10, max_time=1.0)
    tight = median_interval(np.full(20, 1.0))
    wide = median_interval(np.linspace(1.0, 2.0, 20))
    few = median_interval(np.full(5, 1.0))
    assert rule.verdict([few], elapsed=0.1) is None
    assert rule.verdict([few], elapsed=100.0) is None  # the floor of samples wins over the time cap
    assert rule.verdict([tight, tight], elapsed=0.1) == "converged"
    assert rule.verdict([tight, wide], elapsed=0.1) is None  # every tracked median must be tight
    assert rule.verdict([tight, wide], elapsed=1.0) == "time cap"


@pytest.mark.parametrize("key", TIMED)
def test_stop_rule_on_recorded_h100_timings(key):
    """Where the harness stopped as converged, the rule agrees; a tighter target would have needed the cap."""
    run = recorded_outcome(key).timing
    k, r = run.kernel_s, run.reference_s
    intervals = [median_interval(k), median_interval(r), ratio_interval(k, r)]
    assert run.stop_reason == "converged"
    assert StopRule(target=0.005).verdict(intervals, elapsed=0.0) == "converged"
    strict = StopRule(target=0.0005)
    assert strict.verdict(intervals, elapsed=0.0) is None
    assert strict.verdict(intervals, elapsed=strict.max_time) == "time cap"


def test_the_clock_step_is_read_from_the_samples():
    ns = np.array([2976, 3008, 2976, 3040, 3104, 2976])  # CUPTI's 32 ns steps on an H100
    assert clock_step(ns / 1e9) == pytest.approx(32e-9)
    assert clock_step((ns + 1) / 1e9) == pytest.approx(32e-9)  # an offset does not matter, only differences
    # CUPTI's durations are whole steps give or take 1 ns (its timestamps are converted to the host's clock)
    jittered = np.array([6272, 6273, 6336, 6337, 6368, 6400, 6431, 6432, 6432, 6433, 6464, 6495, 6496, 6497, 6560])
    assert clock_step(jittered / 1e9) == pytest.approx(32e-9)
    assert clock_step(np.arange(6000, 6100) / 1e9) == 0.0  # a 1 ns clock: no step worth a floor
    assert clock_step(np.array([6000, 6032, 6050]) / 1e9) == 0.0  # gaps that are not multiples of one step
    assert clock_step(np.array([2976, 2976]) / 1e9) == 0.0  # one distinct value: no step to tell
    assert clock_step(np.array([2976, 3008]) / 1e9) == 0.0  # one gap, seen once: not enough to tell a clock
    # two modes 512 ns apart beside a time that never moves: no clock step, whatever the gaps (a bimodal kernel)
    assert clock_step(np.array([7000, 7001, 7512, 7513, 2976, 2976, 7000]) / 1e9) == 0.0
    assert clock_step([1.2345678e-5, 1.2401234e-5, 1.2398765e-5]) == 0.0  # CUDA events: not whole nanoseconds
    assert clock_step(np.array([0, 2000, 4000]) / 1e9) == 0.0  # a step over 1 us is no clock's
    assert clock_step([]) == 0.0


def test_step_floors_are_one_step_of_each_median_and_both_for_the_ratio():
    # a step of 32 ns and its jitter of 2 ns at either end: 36 ns; the ratio's, the larger of the two
    assert step_floors(32e-9, 9e-6, 3.6e-6) == pytest.approx([0.002, 0.005, 0.005])
    assert step_floors(0.0, 8e-6, 3.2e-6) == [0.0, 0.0, 0.0]


def test_a_median_that_sits_between_two_clock_steps_stops_at_the_clocks_resolution():
    """cuBLAS at fp16 256^3 on an H200 is 2.880 or 2.912 us: the median's interval spans one 32 ns step (1.1%)
    however many samples are taken, so without the floor the case ran to the time cap."""
    rng = np.random.default_rng(1)
    k = rng.choice([7936, 7968, 8000], size=4000, p=[0.3, 0.4, 0.3]) / 1e9
    r = (rng.choice([2880, 2912], size=4000) + rng.choice([-1, 0, 0, 1], size=4000)) / 1e9
    intervals = [median_interval(k), median_interval(r), ratio_interval(k, r)]
    assert intervals[1].rel_half_width > 0.005  # the interval straddles two steps
    rule = StopRule(target=0.005, min_samples=10, max_time=1.0)
    assert rule.verdict(intervals, elapsed=0.1) is None
    floors = step_floors(clock_step(np.concatenate([k, r])), intervals[0].median, intervals[1].median)
    assert rule.verdict(intervals, elapsed=0.1, floors=floors) == Stop.CLOCK_RESOLUTION
    # a noisy case is not let off by the floor: its interval is many steps wide
    wide = rng.integers(90, 110, size=200) * 32 / 1e9
    noisy = [median_interval(k[:200]), median_interval(wide), ratio_interval(k[:200], wide)]
    floors = step_floors(clock_step(np.concatenate([k[:200], wide])), noisy[0].median, noisy[1].median)
    assert rule.verdict(noisy, elapsed=0.1, floors=floors) is None
    assert rule.verdict(noisy, elapsed=1.0, floors=floors) == Stop.TIME_CAP
    # tight enough by the target: converged, whatever the floors
    tight = [median_interval(np.full(20, 1e-5))] * 3
    assert rule.verdict(tight, elapsed=0.1, floors=[0.5, 0.5, 0.5]) == Stop.CONVERGED
