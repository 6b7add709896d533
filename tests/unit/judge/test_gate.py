"""The gate's rule (judge/gate.py), on the record of an outcome recorded on an H100: regressions, improvements,
noise, thresholds, metrics and timers."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_gemm.baselines.store import (
    entry_from_record,
)
from pytest_gemm.judge.gate import judge
from pytest_gemm.report.regression import regression_text

from support.baselines import RECORDED_INFO, baseline_entry, scaled, timed_record


def test_slower_beyond_threshold_and_interval_is_a_regression():
    result = judge(timed_record(1.10), baseline_entry())
    assert result.verdict == "regressed" and result.change == pytest.approx(0.10)
    text = regression_text(timed_record(1.10), baseline_entry(), result, "pytest 'x' ...")
    assert text.startswith("performance regression: sgemm_naive[fp32-4096x4096x4096]: kernel/cuBLAS time ratio is ")
    assert "+10.0% against its baseline (threshold 5%" in text
    assert "kernel/cuBLAS time ratio (gated)" in text and "median device time" in text
    base = timed_record()
    assert f"23.67 ms [{base.ci_s[0] * 1e3:.4g} ms, {base.ci_s[1] * 1e3:.4g} ms]" in text
    assert "26.03 ms" in text and "+10.0%" in text
    assert "baseline recorded 2026-11-22 with pytest-gemm 0.2.0, CuPy 14.2.0, cuBLAS 13.1.0" in text
    assert text.endswith("to accept the new number: pytest 'x' ...")


def test_slower_within_threshold_or_within_noise_is_the_same():
    assert judge(timed_record(1.03), baseline_entry()).verdict == "same"  # below 5%
    wide = timed_record(1.10, ratio_ci=(8.0, 11.0))  # 10% slower, but the intervals overlap: not significant
    assert judge(wide, baseline_entry()).verdict == "same"


def test_faster_beyond_threshold_is_an_improvement():
    assert judge(timed_record(0.90), baseline_entry()).verdict == "improved"
    assert judge(timed_record(0.97), baseline_entry()).verdict == "same"


def test_new_unstable_and_changed_source():
    assert judge(timed_record(), None).verdict == "new"
    throttled = judge(timed_record(1.5, throttle=("power cap",)), baseline_entry())
    assert throttled.verdict == "unstable" and "measured while throttled (power cap)" in throttled.notes
    changed = judge(timed_record(1.0, source_sha256="def"), baseline_entry())
    assert changed.verdict == "same" and changed.notes == ("kernel source changed since the baseline",)


def test_the_gated_metric_can_be_absolute_time():
    """A slower clock shows in the time but cancels in the ratio (both the kernel and cuBLAS slow down)."""
    base = timed_record(1.0)
    drifted = dataclasses.replace(base, median_s=base.median_s * 1.10, ci_s=scaled(base.ci_s, 1.10))
    assert judge(drifted, baseline_entry(), metric="ratio").verdict == "same"
    assert judge(drifted, baseline_entry(), metric="time").verdict == "regressed"
    with pytest.raises(ValueError, match="unknown gated metric"):
        judge(drifted, baseline_entry(), metric="tflops")


def test_a_ratio_change_the_kernel_time_does_not_share_is_cublas_moving_not_the_kernel():
    """Seen on the H100: cuBLAS fp32 at 256^3 ran 12.85 us in one process and 12.2 us in the next."""
    base = timed_record(1.0)
    # the reference got 5% faster; the kernel's own time did not change
    moved = dataclasses.replace(base, ratio=base.ratio * 1.053, ratio_ci=scaled(base.ratio_ci, 1.053))
    result = judge(moved, baseline_entry())
    assert result.verdict == "same" and result.change == pytest.approx(0.053)
    assert result.notes == (
        "reference moved: the ratio changed +5.3% but the kernel's own device time +0.0% "
        "(cuBLAS changed, not the kernel)",
    )
    slower_reference = dataclasses.replace(base, ratio=base.ratio / 1.10, ratio_ci=scaled(base.ratio_ci, 1 / 1.10))
    assert judge(slower_reference, baseline_entry()).verdict == "same"  # not an improvement of the kernel either
    # A real regression moves both; half the threshold in the kernel's own time is enough.
    slower = timed_record(1.10)
    # the GPU ran 7% faster at the same time
    partly = dataclasses.replace(slower, median_s=slower.median_s / 1.07, ci_s=scaled(slower.ci_s, 1 / 1.07))
    assert judge(partly, baseline_entry()).verdict == "regressed"


def test_a_per_kernel_threshold_changes_the_verdict():
    assert judge(timed_record(1.10), baseline_entry(), threshold=0.15).verdict == "same"
    assert judge(timed_record(1.03), baseline_entry(), threshold=0.02).verdict == "regressed"


def test_the_kernels_own_threshold_overrides_the_runs():
    lenient = judge(timed_record(1.10, regression_threshold=0.15), baseline_entry(), threshold=0.05)
    assert (lenient.verdict, lenient.threshold) == ("same", 0.15)
    strict = judge(timed_record(1.03, regression_threshold=0.02), baseline_entry(), threshold=0.05)
    assert (strict.verdict, strict.threshold) == ("regressed", 0.02)
    # no threshold of its own: the run's
    assert judge(timed_record(1.10), baseline_entry(), threshold=0.05).threshold == 0.05


def test_a_baseline_timed_with_the_other_timer_is_not_compared():
    """CUPTI's kernel-only times are shorter than the events' by the launch latency: a 10% "improvement" that is
    only the change of timer must not pass as one, nor the reverse as a regression."""
    cupti_now = timed_record(0.90, timer="cupti")
    old = baseline_entry()
    del old["recorded"]["timer"]  # an entry recorded before CUPTI says no clock: the events
    for entry in (old, baseline_entry()):
        result = judge(cupti_now, entry)
        assert result.verdict == "new" and result.change is None
        assert result.notes == (
            "timer changed: the baseline was timed with CUDA events, this run with CUPTI kernel records; not "
            "compared (record it again with --gemm-update-baselines)",
        )
    cupti_entry = entry_from_record(timed_record(timer="cupti"), RECORDED_INFO)
    assert cupti_entry["recorded"]["timer"] == "cupti"  # each entry says its own clock
    assert judge(cupti_now, cupti_entry).verdict == "improved"
    assert judge(timed_record(1.10), cupti_entry).verdict == "new"
