"""Why there is no CUDA device (worker/serve.py): the driver API tells a missing driver, a stub library, no GPU and an
old driver apart."""

from __future__ import annotations

import pytest

from pytest_gemm.worker.serve import DriverState, no_device_reason


@pytest.mark.parametrize(
    ("driver", "visible", "reason"),
    [
        (DriverState(load_error="libcuda.so.1: cannot open"), None, "no NVIDIA driver: libcuda.so.1 cannot be loaded"),
        (
            DriverState(version=12040, init_error="CUDA_ERROR_NO_DEVICE"),
            "",
            "the NVIDIA driver (CUDA 12.4) finds no GPU (CUDA_VISIBLE_DEVICES='')",
        ),
        (DriverState(version=12040, devices=0), None, "the NVIDIA driver (CUDA 12.4) finds no GPU"),
        (
            DriverState(init_error="CUDA_ERROR_STUB_LIBRARY"),
            None,
            "libcuda.so.1 is the CUDA toolkit's stub library, not an NVIDIA driver",
        ),
        (
            DriverState(version=12020, devices=1),
            None,
            "the NVIDIA driver supports CUDA 12.2, too old for CuPy's CUDA runtime (the CUDA driver reports no "
            "device (CUDA driver version is insufficient for CUDA runtime version))",
        ),
    ],
)
def test_the_driver_tells_why_there_is_no_device(driver, visible, reason):
    """CuPy's runtime says "insufficient driver" with no driver at all; the driver API tells the cases apart."""
    backend = "the CUDA driver reports no device (CUDA driver version is insufficient for CUDA runtime version)"
    assert no_device_reason(backend, driver, visible) == reason


def test_a_driver_and_a_device_keep_the_backends_reason():
    reason = "CuPy is not installed (pip install 'pytest-gemm[cu13]' or '[cu12]')"
    assert no_device_reason(reason, DriverState(version=13000, devices=1)) == reason
