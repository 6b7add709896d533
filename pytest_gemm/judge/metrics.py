"""What is made of a case's device times: medians with intervals, rates, shares of cuBLAS and of peak,
and the sanity flags. Plain Python on a :class:`~pytest_gemm.records.outcome.TimingRun`, tested on
recorded data without a GPU.
"""

from __future__ import annotations

from typing import Any

from ..records.outcome import TimingRun
from ..records.verdicts import TimingProblem
from .stats import Interval, median_interval, ratio_interval

__all__ = ["FASTER_THAN_CUBLAS", "MIN_REFERENCE_S", "summarize"]

#: A kernel this much faster than cuBLAS (per-pair ratio below 1/1.5) is suspicious ...
FASTER_THAN_CUBLAS = 1.5
#: ... where cuBLAS itself runs at least this long: below it, launch latency and tile quantisation
#: dominate cuBLAS's time, and small or skinny shapes can honestly beat it.
MIN_REFERENCE_S = 50e-6


def _tflops(flops: int, seconds: float) -> float:
    return flops / seconds / 1e12 if seconds > 0 else 0.0


def summarize(
    run: TimingRun,
    *,
    flops: int,
    peak_flops: float | None,
    throttle: list[str] | None = None,
    expect_fast: str = "",
) -> dict[str, Any]:
    """The per-case metrics: medians with intervals, rates, shares of cuBLAS and of peak, noise and flags.

    The keys are fields of :class:`~pytest_gemm.records.case_record.CaseRecord`.
    """
    kernel = median_interval(run.kernel_s)
    reference = median_interval(run.reference_s)
    ratio = ratio_interval(run.kernel_s, run.reference_s)
    tflops = _tflops(flops, kernel.median)
    suspicious = _suspicious(kernel, reference, ratio, tflops, peak_flops)
    return {
        "median_s": kernel.median,
        "ci_s": (kernel.low, kernel.high),
        "cublas_median_s": reference.median,
        "cublas_ci_s": (reference.low, reference.high),
        "ratio": ratio.median,  # kernel time / cuBLAS time, per pair
        "ratio_ci": (ratio.low, ratio.high),
        "tflops": tflops,
        "cublas_tflops": _tflops(flops, reference.median),
        "pct_cublas": 100 / ratio.median,
        "pct_cublas_ci": (100 / ratio.high, 100 / ratio.low),
        "peak_tflops": peak_flops / 1e12 if peak_flops else None,
        "pct_peak": 100 * tflops * 1e12 / peak_flops if peak_flops else None,
        "noise": max(kernel.rel_half_width, reference.rel_half_width, ratio.rel_half_width),
        "samples": kernel.n,
        "stop": run.stop_reason,
        "timing_s": run.elapsed_s,
        "cache": "cold" if run.cold_cache else "hot",
        "input_copies": run.input_copies,
        "timer": run.timer,
        "timer_note": run.timer_note,
        "timer_asked": run.timer_asked,
        "events_median_s": run.events_median_s[0] if run.events_median_s else None,
        "events_cublas_median_s": run.events_median_s[1] if run.events_median_s else None,
        "host_s": run.host_median_s[0] if run.host_median_s else None,
        "cublas_host_s": run.host_median_s[1] if run.host_median_s else None,
        "throttle": tuple(throttle or ()),
        "suspicious": () if expect_fast else tuple(suspicious),
        "suspicious_expected": tuple(suspicious) if expect_fast else (),
    }


def _suspicious(
    kernel: Interval, reference: Interval, ratio: Interval, tflops: float, peak_flops: float | None
) -> list[TimingProblem]:
    problems = []
    if peak_flops and tflops * 1e12 > peak_flops:
        problems.append(TimingProblem.ABOVE_PEAK)
    if ratio.median < 1 / FASTER_THAN_CUBLAS and reference.median >= MIN_REFERENCE_S:
        problems.append(TimingProblem.FASTER_THAN_CUBLAS)
    return problems
