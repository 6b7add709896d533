"""Statistics of device timings: medians with confidence intervals, per-pair ratios, and the stopping rule.

Pure numpy; no GPU. Timings are skewed (a launch can only be delayed, never sped up), so the
centre is the median and its interval is the distribution-free one built from order statistics:
with n samples sorted, the median's 95% interval runs from the sample of rank
``n/2 - 1.96 sqrt(n)/2`` to the one of rank ``1 + n/2 + 1.96 sqrt(n)/2`` (the normal approximation
of the binomial, as in Conover, *Practical Nonparametric Statistics*). It assumes nothing about the
shape of the distribution, only that samples are independent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..records.verdicts import Stop

__all__ = [
    "Interval",
    "StopRule",
    "clock_step",
    "median_interval",
    "ratio_interval",
    "step_floors",
]

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal
STEP_JITTER_NS = 2  # how far a CUPTI duration may sit from a whole number of its clock's steps (docs/measurements.md)


@dataclass(frozen=True)
class Interval:
    """A median and its 95% confidence interval, from ``n`` samples."""

    median: float
    low: float
    high: float
    n: int

    @property
    def rel_half_width(self) -> float:
        """Half the interval's width relative to the median: the noise this median was measured to."""
        if self.n == 0 or self.median == 0:
            return math.inf
        return (self.high - self.low) / 2 / abs(self.median)

    def as_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n}


def median_interval(samples: Sequence[float] | np.ndarray) -> Interval:
    """The median of ``samples`` and its distribution-free 95% interval.

    Below 6 samples no rank pair reaches 95% coverage, and the interval is the whole range (the
    noise is then reported as large, never as small).
    """
    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = int(x.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    median = float(np.median(x))
    if n < 6:
        return Interval(median, float(x[0]), float(x[-1]), n)
    spread = Z95 * math.sqrt(n) / 2
    low_rank = max(1, math.floor(n / 2 - spread))  # 1-based ranks
    high_rank = min(n, math.ceil(1 + n / 2 + spread))
    return Interval(median, float(x[low_rank - 1]), float(x[high_rank - 1]), n)


def ratio_interval(numerator: Sequence[float] | np.ndarray, denominator: Sequence[float] | np.ndarray) -> Interval:
    """Median and interval of the per-pair ratios ``numerator[i] / denominator[i]``.

    Taking the ratio pair by pair, with the two launches of a pair measured back to back, cancels
    whatever drifts slower than a pair: clocks, temperature, other tenants.
    """
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    if num.shape != den.shape:
        raise ValueError(f"ratio of {num.size} and {den.size} samples: pairs must match")
    return median_interval(num / den)


def clock_step(samples: Sequence[float] | np.ndarray, most: float = 64e-9, jitter: int = STEP_JITTER_NS) -> float:
    """The step of the clock that ``samples`` (seconds) were read with, 0 when it cannot be told.

    CUPTI's kernel durations are whole multiples of its clock's step, give or take a nanosecond (its timestamps
    are converted to the host's clock; measured: docs/measurements.md). The distinct values, in whole
    nanoseconds, then fall into narrow clusters (none wider than ``2 * jitter``) whose modes lie whole steps
    apart; the step is the most common gap between
    neighbouring clusters, seen at least twice. 0 for values that are not whole nanoseconds, fewer than three
    clusters, a wide cluster (a finer clock), gaps that are not whole steps, or a step over ``most``."""
    ns = np.asarray(samples, dtype=np.float64) * 1e9
    whole = np.round(ns)
    if ns.size < 3 or not np.all(np.isfinite(ns)) or np.any(np.abs(ns - whole) > 1e-3):
        return 0.0
    values, counts = np.unique(whole.astype(np.int64), return_counts=True)
    starts = np.flatnonzero(np.diff(values) > jitter) + 1  # where a new cluster begins
    clusters = list(zip(np.split(values, starts), np.split(counts, starts)))
    if len(clusters) < 3 or any(v[-1] - v[0] > 2 * jitter for v, _ in clusters):
        return 0.0
    gaps = np.diff(np.asarray([v[np.argmax(c)] for v, c in clusters], dtype=np.float64))  # between the modes
    single = gaps[gaps < 1.5 * gaps.min()]
    step = float(np.round(np.median(single)))
    if single.size < 2 or step <= 0 or step / 1e9 > most:
        return 0.0
    if np.any(np.abs(gaps - np.round(gaps / step) * step) > 2 * jitter):
        return 0.0
    return step / 1e9


def step_floors(step: float, kernel_median: float, reference_median: float) -> list[float]:
    """The relative half-widths that one clock step makes (with its jitter at both ends), for the kernel's median,
    cuBLAS's and their ratio's (one step of either time, whichever moves the ratio more): the narrowest intervals
    that more samples could be asked to reach."""
    if step <= 0 or kernel_median <= 0 or reference_median <= 0:
        return [0.0, 0.0, 0.0]
    width = step + 2 * STEP_JITTER_NS / 1e9
    k, r = width / kernel_median, width / reference_median
    return [k / 2, r / 2, max(k, r) / 2]


@dataclass(frozen=True)
class StopRule:
    """When to stop timing a case.

    Stop as soon as there are at least ``min_samples`` pairs and every tracked median (the kernel's,
    cuBLAS's and their per-pair ratio) has a relative half-width of at most ``target`` ("converged"), or
    at most the width one step of the clock makes (``floors``, from :func:`step_floors`; "clock
    resolution": a median of values on a grid whose interval spans one step of it stays there however
    many samples follow); or, with the floor of samples reached, once ``max_time`` seconds have gone by.
    """

    target: float = 0.005
    min_samples: int = 10
    max_time: float = 1.0

    def verdict(self, intervals: Sequence[Interval], elapsed: float, floors: Sequence[float] = ()) -> Stop | None:
        """Why timing should stop now, or None to go on."""
        n = min((i.n for i in intervals), default=0)
        if n < self.min_samples:
            return None
        widths = [i.rel_half_width for i in intervals]
        if max(widths) <= self.target:
            return Stop.CONVERGED
        floors = [*floors, *[0.0] * (len(widths) - len(floors))]
        if all(w <= max(self.target, f) for w, f in zip(widths, floors)):
            return Stop.CLOCK_RESOLUTION
        if elapsed >= self.max_time:
            return Stop.TIME_CAP
        return None
