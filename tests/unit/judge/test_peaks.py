"""Peak rates of known GPUs, scaled by SM count and clock; unknown GPUs get none."""

from __future__ import annotations

import pytest

from pytest_gemm.judge.peaks import peak_flops

H100 = ("NVIDIA H100 80GB HBM3", (9, 0), 132)


@pytest.mark.parametrize(
    ("gpu", "clock", "dtype", "tflops"),
    [
        (H100, 1980, "fp32", 66.9),  # NVIDIA: 67 TFLOP/s fp32
        (H100, 1980, "fp64", 66.9),  # 67 fp64 tensor core
        (H100, 1830, "bf16", 989.4),  # 989.4 dense, quoted at 1830 MHz
        (H100, 1830, "tf32", 494.7),
        (("NVIDIA A100-SXM4-80GB", (8, 0), 108), 1410, "fp16", 311.9),  # 312
        (("NVIDIA A100-SXM4-80GB", (8, 0), 108), 1410, "fp32", 19.5),
        (("NVIDIA H100 PCIe", (9, 0), 114), 1755, "fp32", 51.2),  # 51
    ],
)
def test_known_gpus_match_the_published_peaks(gpu, clock, dtype, tflops):
    name, cc, sms = gpu
    assert peak_flops(name, cc, sms, clock, dtype) / 1e12 == pytest.approx(tflops, rel=2e-3)


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA H20", (9, 0)),  # Hopper with cut-down tensor cores
        ("NVIDIA GeForce RTX 4090", (8, 9)),
        ("NVIDIA H100 80GB HBM3", (8, 0)),  # a name that does not match its capability
    ],
)
def test_unknown_gpus_get_no_peak(name, cc):
    assert peak_flops(name, cc, 100, 2000, "fp32") is None


def test_no_clock_or_unknown_dtype_gives_no_peak():
    assert peak_flops(*H100, None, "fp32") is None
    assert peak_flops(*H100, 1980, "fp8") is None
