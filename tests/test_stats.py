"""The statistics of timings: median intervals, per-pair ratios and the stopping rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gemm.judge.stats import StopRule, median_interval, ratio_interval

from conftest import TIMED, recorded_outcome


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
