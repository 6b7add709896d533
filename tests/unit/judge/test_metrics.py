"""Per-case metrics and the sanity rules, on worker outcomes recorded on an H100."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pytest_gemm.judge.metrics import MIN_REFERENCE_S, summarize
from pytest_gemm.judge.peaks import peak_flops
from pytest_gemm.records.outcome import TimingRun
from pytest_gemm.records.verdicts import TimingProblem

from support import TIMED, recorded_outcome, recording


def _run(key: str, kernel_scale: float = 1.0) -> TimingRun:
    run = recorded_outcome(key).timing
    return dataclasses.replace(run, kernel_s=tuple(t * kernel_scale for t in run.kernel_s))


def _flops(key: str) -> int:
    shape = next(p for p in key.split("[")[1].split("-") if p.count("x") == 2)
    m, n, k = (int(x) for x in shape.rstrip("]").split("x"))
    return 2 * m * n * k


def _peak(dtype: str = "fp32") -> float | None:
    gpu = recording()["facts"]
    cc = tuple(int(x) for x in gpu["compute_capability"].split("."))
    return peak_flops(gpu["name"], cc, gpu["sm_count"], gpu["max_sm_clock_mhz"], dtype)


def _key(name: str) -> str:
    return next(k for k in TIMED if k.endswith(name))


@pytest.mark.parametrize("key", TIMED)
def test_medians_and_ratio_come_from_the_samples(key):
    run = _run(key)
    got = summarize(run, flops=_flops(key), peak_flops=_peak())
    assert got["median_s"] == np.median(run.kernel_s) and got["cublas_median_s"] == np.median(run.reference_s)
    assert got["ratio"] == np.median(np.array(run.kernel_s) / np.array(run.reference_s))
    assert got["samples"] == len(run.kernel_s) >= 10 and got["stop"] == run.stop_reason == "converged"
    assert got["noise"] <= 0.005
    assert got["ci_s"][0] <= got["median_s"] <= got["ci_s"][1]
    assert got["ratio_ci"][0] <= got["ratio"] <= got["ratio_ci"][1]


def test_rates_and_shares_follow_from_the_medians():
    key = _key("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(key), flops=_flops(key), peak_flops=_peak())
    assert got["tflops"] == pytest.approx(2 * 4096**3 / got["median_s"] / 1e12)
    assert got["pct_cublas"] == pytest.approx(100 / got["ratio"])  # from the per-pair ratio, not the two medians
    assert got["pct_cublas_ci"] == pytest.approx((100 / got["ratio_ci"][1], 100 / got["ratio_ci"][0]))
    assert got["pct_peak"] == pytest.approx(100 * got["tflops"] / got["peak_tflops"])
    assert 10 < got["pct_cublas"] < 13 and got["suspicious"] == ()  # the naive kernel: about 11% of cuBLAS


def test_a_kernel_too_fast_for_the_gpu_is_suspicious():
    key = _key("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(key, kernel_scale=0.05), flops=_flops(key), peak_flops=_peak())
    assert got["suspicious"] == (TimingProblem.ABOVE_PEAK, TimingProblem.FASTER_THAN_CUBLAS)
    assert got["tflops"] > got["peak_tflops"] == pytest.approx(66.9, abs=0.05)  # the facts its words are made of


def test_a_declared_fast_kernel_is_noted_not_failed():
    key = _key("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(key, kernel_scale=0.05), flops=_flops(key), peak_flops=_peak(), expect_fast="sparse inputs")
    assert got["suspicious"] == () and len(got["suspicious_expected"]) == 2


def test_small_shapes_may_beat_cublas_without_crying_wolf():
    """Below MIN_REFERENCE_S cuBLAS is launch-bound; beating it there is plausible, not suspicious."""
    key = _key("sgemm_naive[fp32-512x512x512]")
    assert np.median(_run(key).reference_s) < MIN_REFERENCE_S
    got = summarize(_run(key, kernel_scale=0.1), flops=_flops(key), peak_flops=_peak())
    assert got["ratio"] < 1 / 1.5 and got["suspicious"] == ()


def test_unknown_gpu_has_no_peak_and_no_peak_rule():
    key = _key("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(key, kernel_scale=0.5), flops=_flops(key), peak_flops=None)
    assert got["pct_peak"] is None and got["peak_tflops"] is None and got["suspicious"] == ()


def test_throttle_flags_are_carried_through():
    key = _key("sgemm_naive[fp32-4096x4096x4096]")
    got = summarize(_run(key), flops=_flops(key), peak_flops=_peak(), throttle=["power cap"])
    assert got["throttle"] == ("power cap",)
