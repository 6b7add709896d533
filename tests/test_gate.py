"""Baseline files and the gate's rule, on the record of an outcome recorded on an H100."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from pytest_gemm.baselines.store import (
    BaselineError,
    BaselineFile,
    OtherGpuError,
    entry_from_record,
    gpu_slug,
    load,
    merge,
    render,
    save,
)
from pytest_gemm.judge.gate import judge
from pytest_gemm.records.case_record import CaseRecord
from pytest_gemm.report.regression import regression_text

from conftest import recorded_record

H100 = "NVIDIA H100 80GB HBM3"
RECORDED = {"pytest_gemm": "0.2.0", "cupy": "14.2.0", "cublas": "13.1.0", "driver": "580.159.04", "date": "2026-11-22"}


def _scaled(values: tuple[float, float], scale: float) -> tuple[float, float]:
    return (values[0] * scale, values[1] * scale)


def _row(scale: float = 1.0, **extra) -> CaseRecord:
    """The recorded naive 4096^3 case with its kernel times (so its ratio and interval) scaled."""
    row = recorded_record("01_naive.cu::sgemm_naive[fp32-4096x4096x4096]")
    row = dataclasses.replace(
        row,
        ratio=row.ratio * scale,
        median_s=row.median_s * scale,
        ratio_ci=_scaled(row.ratio_ci, scale),
        ci_s=_scaled(row.ci_s, scale),
        source_sha256="abc",
    )
    return dataclasses.replace(row, **extra)


def _entry(**extra) -> dict:
    return entry_from_record(_row(**extra), RECORDED)


def test_gpu_slug():
    assert gpu_slug(H100) == "nvidia-h100-80gb-hbm3"
    assert gpu_slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100-sxm4-80gb"
    with pytest.raises(BaselineError):
        gpu_slug("!!!")


def test_save_and_load_round_trip_with_stable_sorted_text(tmp_path):
    path = tmp_path / "baselines" / "nvidia-h100-80gb-hbm3.json"
    baseline = BaselineFile(path, H100, {"b::k[x]": _entry(), "a::k[y]": _entry()})
    save(baseline)
    text = path.read_text()
    assert text == render(load(path, gpu=H100)) and text.endswith("}\n")
    assert text.index('"a::k[y]"') < text.index('"b::k[x]"')  # sorted keys: diffs review well
    assert json.loads(text)["schema"] == 1
    assert sorted(os.listdir(path.parent)) == [path.name]  # no temporary file left behind


def test_a_failed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "nvidia-h100-80gb-hbm3.json"
    save(BaselineFile(path, H100, {"a::k[y]": _entry()}))
    before = path.read_text()

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        save(BaselineFile(path, H100, {}))
    assert path.read_text() == before
    assert sorted(os.listdir(tmp_path)) == [path.name]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": 2, "gpu": "x", "entries": {}}', "schema version 2 is not one this pytest-gemm reads (1)"),
        ('{"schema": 1, "gpu": 3, "entries": {}}', "expected 'gpu' (a string) and 'entries' (an object)"),
        ('{"schema": 1, "gpu": "x", "entries": {"k": {"ratio": 1}}}', "entry 'k': missing ab, ci_s, dtype"),
        ("[]", "expected a JSON object"),
    ],
)
def test_unreadable_files_are_errors_that_name_the_file(tmp_path, text, message):
    path = tmp_path / "nvidia-h100-80gb-hbm3.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as info:
        load(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)
    assert path.read_text() == text  # never touched by reading


def test_a_baseline_from_another_gpu_model_is_never_used(tmp_path):
    path = tmp_path / "x.json"
    save(BaselineFile(path, "NVIDIA A100-SXM4-80GB", {}))
    with pytest.raises(OtherGpuError, match="recorded on 'NVIDIA A100-SXM4-80GB', not on this GPU"):
        load(path, gpu=H100)
    assert load(tmp_path / "missing.json") is None


def test_merge_reports_added_changed_and_removed():
    baseline = BaselineFile(None, H100, {"old": _entry(), "same": _entry(), "moved": _entry()})
    changes = merge(baseline, {"same": _entry(), "moved": _entry(scale=1.1), "new": _entry()}, remove=["old", "same"])
    assert (changes.added, changes.changed, changes.removed) == (["new"], ["moved"], ["old"])
    assert sorted(baseline.entries) == ["moved", "new", "same"]  # a key both new and stale is kept
    assert not merge(baseline, {"same": _entry()})


def test_slower_beyond_threshold_and_interval_is_a_regression():
    result = judge(_row(1.10), _entry())
    assert result.verdict == "regressed" and result.change == pytest.approx(0.10)
    text = regression_text(_row(1.10), _entry(), result, "pytest 'x' ...")
    assert text.startswith("performance regression: sgemm_naive[fp32-4096x4096x4096]: kernel/cuBLAS time ratio is ")
    assert "+10.0% against its baseline (threshold 5%" in text
    assert "kernel/cuBLAS time ratio (gated)" in text and "median device time" in text
    base = _row()
    assert f"23.67 ms [{base.ci_s[0] * 1e3:.4g} ms, {base.ci_s[1] * 1e3:.4g} ms]" in text
    assert "26.03 ms" in text and "+10.0%" in text
    assert "baseline recorded 2026-11-22 with pytest-gemm 0.2.0, CuPy 14.2.0, cuBLAS 13.1.0" in text
    assert text.endswith("to accept the new number: pytest 'x' ...")


def test_slower_within_threshold_or_within_noise_is_the_same():
    assert judge(_row(1.03), _entry()).verdict == "same"  # below 5%
    wide = _row(1.10, ratio_ci=(8.0, 11.0))  # 10% slower, but the intervals overlap: not significant
    assert judge(wide, _entry()).verdict == "same"


def test_faster_beyond_threshold_is_an_improvement():
    assert judge(_row(0.90), _entry()).verdict == "improved"
    assert judge(_row(0.97), _entry()).verdict == "same"


def test_new_unstable_and_changed_source():
    assert judge(_row(), None).verdict == "new"
    throttled = judge(_row(1.5, throttle=("power cap",)), _entry())
    assert throttled.verdict == "unstable" and "measured while throttled (power cap)" in throttled.notes
    changed = judge(_row(1.0, source_sha256="def"), _entry())
    assert changed.verdict == "same" and changed.notes == ("kernel source changed since the baseline",)


def test_the_gated_metric_can_be_absolute_time():
    """A slower clock shows in the time but cancels in the ratio (both the kernel and cuBLAS slow down)."""
    base = _row(1.0)
    drifted = dataclasses.replace(base, median_s=base.median_s * 1.10, ci_s=_scaled(base.ci_s, 1.10))
    assert judge(drifted, _entry(), metric="ratio").verdict == "same"
    assert judge(drifted, _entry(), metric="time").verdict == "regressed"
    with pytest.raises(ValueError, match="unknown gated metric"):
        judge(drifted, _entry(), metric="tflops")


def test_a_ratio_change_the_kernel_time_does_not_share_is_cublas_moving_not_the_kernel():
    """Seen on the H100: cuBLAS fp32 at 256^3 ran 12.85 us in one process and 12.2 us in the next."""
    base = _row(1.0)
    # the reference got 5% faster; the kernel's own time did not change
    moved = dataclasses.replace(base, ratio=base.ratio * 1.053, ratio_ci=_scaled(base.ratio_ci, 1.053))
    result = judge(moved, _entry())
    assert result.verdict == "same" and result.change == pytest.approx(0.053)
    assert result.notes == (
        "reference moved: the ratio changed +5.3% but the kernel's own device time +0.0% "
        "(cuBLAS changed, not the kernel)",
    )
    slower_reference = dataclasses.replace(base, ratio=base.ratio / 1.10, ratio_ci=_scaled(base.ratio_ci, 1 / 1.10))
    assert judge(slower_reference, _entry()).verdict == "same"  # not an improvement of the kernel either
    # A real regression moves both; half the threshold in the kernel's own time is enough.
    slower = _row(1.10)
    # the GPU ran 7% faster at the same time
    partly = dataclasses.replace(slower, median_s=slower.median_s / 1.07, ci_s=_scaled(slower.ci_s, 1 / 1.07))
    assert judge(partly, _entry()).verdict == "regressed"


def test_a_per_kernel_threshold_changes_the_verdict():
    assert judge(_row(1.10), _entry(), threshold=0.15).verdict == "same"
    assert judge(_row(1.03), _entry(), threshold=0.02).verdict == "regressed"


def test_the_kernels_own_threshold_overrides_the_runs():
    lenient = judge(_row(1.10, regression_threshold=0.15), _entry(), threshold=0.05)
    assert (lenient.verdict, lenient.threshold) == ("same", 0.15)
    strict = judge(_row(1.03, regression_threshold=0.02), _entry(), threshold=0.05)
    assert (strict.verdict, strict.threshold) == ("regressed", 0.02)
    assert judge(_row(1.10), _entry(), threshold=0.05).threshold == 0.05  # no threshold of its own: the run's


def test_a_baseline_timed_with_the_other_timer_is_not_compared():
    """CUPTI's kernel-only times are shorter than the events' by the launch latency: a 10% "improvement" that is
    only the change of timer must not pass as one, nor the reverse as a regression."""
    cupti_now = _row(0.90, timer="cupti")
    old = _entry()
    del old["recorded"]["timer"]  # an entry recorded before CUPTI says no clock: the events
    for entry in (old, _entry()):
        result = judge(cupti_now, entry)
        assert result.verdict == "new" and result.change is None
        assert result.notes == (
            "timer changed: the baseline was timed with CUDA events, this run with CUPTI kernel records; not "
            "compared (record it again with --gemm-update-baselines)",
        )
    cupti_entry = entry_from_record(_row(timer="cupti"), RECORDED)
    assert cupti_entry["recorded"]["timer"] == "cupti"  # each entry says its own clock
    assert judge(cupti_now, cupti_entry).verdict == "improved"
    assert judge(_row(1.10), cupti_entry).verdict == "new"
