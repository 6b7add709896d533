"""The gate's rule (judge/gate.py), on the record of an outcome recorded on an H100: regressions, improvements,
noise, thresholds, metrics and timers."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_gemm.baselines.store import (
    entry_from_record,
)
from pytest_gemm.judge.gate import CONFIRM_ALPHA, RUN_ALPHA, SPREAD, confirm, judge
from pytest_gemm.records.verdicts import NOT_CONFIRMED
from pytest_gemm.report.regression import certainty, regression_text

from support.baselines import RECORDED_INFO, baseline_entry, scaled, timed_record


def test_slower_beyond_threshold_and_interval_is_a_regression():
    result = judge(timed_record(1.10), baseline_entry())
    assert result.verdict == "regressed" and result.change == pytest.approx(0.10)
    text = regression_text(timed_record(1.10), baseline_entry(), result, "pytest 'x' ...")
    assert text.startswith("performance regression: sgemm_naive[fp32-4096x4096x4096]: kernel/cuBLAS time ratio is ")
    assert "+10.0% against its baseline (threshold 3%)" in text
    assert "  how sure: noise alone makes a same-code run this slow with a chance of " in text
    assert "(a regression needs under 0.05: 5% for any of the run's 1 gated case(s))" in text
    assert "  not timed again here: a run's gate times a flagged case again in a fresh worker" in text
    assert "kernel/cuBLAS time ratio (gated)" in text and "median device time" in text
    base = timed_record()
    assert f"23.67 ms [{base.ci_s[0] * 1e3:.4g} ms, {base.ci_s[1] * 1e3:.4g} ms]" in text
    assert "26.03 ms" in text and "+10.0%" in text
    assert "baseline recorded 2026-11-22 with pytest-gemm 0.2.0, CuPy 14.2.0, cuBLAS 13.1.0" in text
    assert text.endswith("to accept the new number: pytest 'x' ...")


def test_slower_within_threshold_or_within_noise_is_the_same():
    assert judge(timed_record(1.025), baseline_entry()).verdict == "same"  # below 3%
    wide = timed_record(1.10, ratio_ci=(8.0, 11.0))  # 10% slower, but the intervals overlap: not significant
    assert judge(wide, baseline_entry()).verdict == "same"


def test_faster_beyond_threshold_is_an_improvement():
    assert judge(timed_record(0.90), baseline_entry()).verdict == "improved"
    assert judge(timed_record(0.98), baseline_entry()).verdict == "same"


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


def test_the_more_cases_a_run_gates_the_surer_each_regression_must_be():
    """docs/baselines.md#the-runs-false-alarms: the chance of a false regression (RUN_ALPHA) is split among the run's
    gated cases, so a change past the threshold but within the spread of same-code runs fails a case run alone and
    passes among 573."""
    slower = timed_record(1.032)
    alone, among = judge(slower, baseline_entry()), judge(slower, baseline_entry(), cases=573)
    assert (alone.verdict, among.verdict) == ("regressed", "same")
    assert alone.p_value == among.p_value and RUN_ALPHA / 573 < among.p_value < RUN_ALPHA
    assert among.cases == 573
    # a slowdown well past the spread of same-code runs fails among them too
    assert judge(timed_record(1.05), baseline_entry(), cases=573).verdict == "regressed"


def test_the_spread_between_gpus_is_wider_than_on_one():
    """A case compared with other GPUs' records is held to the spread between GPUs, not the spread on one."""
    assert SPREAD["others"] > SPREAD["own"] == SPREAD["single"]


def test_a_flagged_case_fails_only_when_its_re_timing_confirms_it():
    first = judge(timed_record(1.06), baseline_entry())
    assert first.verdict == "regressed" and first.fails and first.confirmed_change is None
    noise = judge(timed_record(1.004), baseline_entry())
    cleared = confirm(first, noise)
    assert (cleared.verdict, cleared.fails, cleared.baseline) == ("same", False, None)
    assert NOT_CONFIRMED in cleared.notes and cleared.confirmed_change == pytest.approx(0.004)
    assert cleared.change == first.change  # the first measurement is the one shown
    again = judge(timed_record(1.07), baseline_entry())
    kept = confirm(first, again)
    assert (kept.verdict, kept.fails) == ("regressed", True) and kept.confirmed_p == again.p_value < CONFIRM_ALPHA
    lines = certainty(kept)
    assert lines[1].startswith("  timed again in a fresh worker: +7.0% (chance ") and lines[1].endswith(": confirmed")
    assert certainty(cleared)[1].endswith(": not confirmed")
    # no re-timing (it gave no times): the regression stands, said as not timed again
    assert confirm(first, None) == first


def test_a_re_timing_past_the_threshold_but_within_noise_does_not_confirm():
    first = judge(timed_record(1.06), baseline_entry())
    wide = judge(timed_record(1.05, ratio_ci=(8.0, 11.0)), baseline_entry())  # +5%, but its interval is wide
    assert wide.p_value > CONFIRM_ALPHA
    assert confirm(first, wide).verdict == "same"


def test_a_re_timing_explained_by_cublas_moving_or_throttled_does_not_confirm():
    first = judge(timed_record(1.06), baseline_entry())
    base = timed_record(1.0)
    moved = dataclasses.replace(base, ratio=base.ratio * 1.06, ratio_ci=scaled(base.ratio_ci, 1.06))  # cuBLAS faster
    again = judge(moved, baseline_entry())
    assert again.verdict == "same" and again.change > first.threshold  # the ratio moved, the kernel's time did not
    assert confirm(first, again).verdict == "same"
    throttled = judge(timed_record(1.06, throttle=("power cap",)), baseline_entry())
    assert throttled.verdict == "unstable" and confirm(first, throttled).verdict == "same"


def test_a_saved_run_is_gated_again_among_as_many_cases_as_it_was():
    from pytest_gemm.judge.gate import gated_cases

    records = [timed_record(1.0), timed_record(1.01)]
    assert gated_cases(records) == 2  # never gated: as many as there are
    gated = [r.with_gate(judge(r, baseline_entry(), cases=573)) for r in records]
    assert gated_cases(gated) == 573
