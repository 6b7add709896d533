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

__all__ = ["Interval", "StopRule", "median_interval", "ratio_interval"]

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


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


@dataclass(frozen=True)
class StopRule:
    """When to stop timing a case.

    Stop as soon as there are at least ``min_samples`` pairs and every tracked median (the kernel's,
    cuBLAS's and their per-pair ratio) has a relative half-width of at most ``target``; or, with the
    floor of samples reached, once ``max_time`` seconds have gone by.
    """

    target: float = 0.005
    min_samples: int = 10
    max_time: float = 1.0

    def verdict(self, intervals: Sequence[Interval], elapsed: float) -> str | None:
        """``"converged"`` or ``"time cap"`` when timing should stop, else None."""
        n = min((i.n for i in intervals), default=0)
        if n < self.min_samples:
            return None
        if max(i.rel_half_width for i in intervals) <= self.target:
            return "converged"
        if elapsed >= self.max_time:
            return "time cap"
        return None
