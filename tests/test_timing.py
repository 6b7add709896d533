"""Per-case metrics and the sanity rules, on timings recorded on an H100."""

from __future__ import annotations

import pytest

from pytest_gemm.peaks import peak_flops
from pytest_gemm.timing import MIN_REFERENCE_S, TimingRun, summarize

from conftest import recorded_rows, recorded_timings


def _run(row: dict, kernel_scale: float = 1.0) -> TimingRun:
    return TimingRun(
        kernel_s=tuple(t * kernel_scale for t in row["raw"]["kernel_s"]),
        reference_s=tuple(row["raw"]["cublas_s"]),
        elapsed_s=row["timing_s"],
        stop_reason=row["stop"],
        cold_cache=row["cache"] == "cold",
        input_copies=row["input_copies"],
        flush_bytes=0,
    )


def _flops(row: dict) -> int:
    m, n, k = (int(x) for x in row["shape"].split("x"))
    return 2 * m * n * k


def _peak(dtype: str = "fp32") -> float | None:
    gpu = recorded_timings()["gpu"]
    cc = tuple(int(x) for x in gpu["compute_capability"].split("."))
    return peak_flops(gpu["name"], cc, gpu["sm_count"], gpu["max_sm_clock_mhz"], dtype)


def _row(name: str) -> dict:
    return next(r for r in recorded_rows() if r["test"].endswith(name))


@pytest.mark.parametrize("row", recorded_rows(), ids=lambda r: r["test"].split("::")[1])
def test_summary_of_recorded_samples_matches_what_the_harness_reported(row):
    got = summarize(_run(row), flops=_flops(row), peak_flops=_peak())
    for key in ("median_s", "cublas_median_s", "ratio", "tflops", "pct_cublas", "pct_peak", "noise", "samples"):
        assert got[key] == pytest.approx(row[key], rel=1e-9), key
    assert got["ci_s"][0] <= got["median_s"] <= got["ci_s"][1]
    assert got["ratio_ci"][0] <= got["ratio"] <= got["ratio_ci"][1]


def test_rates_and_shares_follow_from_the_medians():
    row = _row("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(row), flops=_flops(row), peak_flops=_peak())
    assert got["tflops"] == pytest.approx(2 * 4096**3 / got["median_s"] / 1e12)
    assert got["pct_cublas"] == pytest.approx(100 / got["ratio"])  # from the per-pair ratio, not the two medians
    assert got["pct_cublas_ci"] == pytest.approx([100 / got["ratio_ci"][1], 100 / got["ratio_ci"][0]])
    assert got["pct_peak"] == pytest.approx(100 * got["tflops"] / got["peak_tflops"])
    assert 10 < got["pct_cublas"] < 13 and got["suspicious"] == []  # the naive kernel: about 11% of cuBLAS


def test_a_kernel_too_fast_for_the_gpu_is_suspicious():
    row = _row("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(row, kernel_scale=0.05), flops=_flops(row), peak_flops=_peak())
    assert len(got["suspicious"]) == 2
    assert "above this GPU's peak of 66.9 TFLOP/s" in got["suspicious"][0]
    assert "x faster than cuBLAS" in got["suspicious"][1]


def test_a_declared_fast_kernel_is_noted_not_failed():
    row = _row("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(row, kernel_scale=0.05), flops=_flops(row), peak_flops=_peak(), expect_fast="sparse inputs")
    assert got["suspicious"] == [] and len(got["suspicious_expected"]) == 2


def test_small_shapes_may_beat_cublas_without_crying_wolf():
    """Below MIN_REFERENCE_S cuBLAS is launch-bound; beating it there is plausible, not suspicious."""
    row = _row("sgemm_naive[fp32-512x512x512]")
    assert row["cublas_median_s"] < MIN_REFERENCE_S
    got = summarize(_run(row, kernel_scale=0.1), flops=_flops(row), peak_flops=_peak())
    assert got["ratio"] < 1 / 1.5 and got["suspicious"] == []


def test_unknown_gpu_has_no_peak_and_no_peak_rule():
    row = _row("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(row, kernel_scale=0.5), flops=_flops(row), peak_flops=None)
    assert got["pct_peak"] is None and got["peak_tflops"] is None and got["suspicious"] == []


def test_throttle_flags_are_carried_through():
    row = _row("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(row), flops=_flops(row), peak_flops=_peak(), throttle=["power cap"])
    assert got["throttle"] == ["power cap"]
