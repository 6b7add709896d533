"""The environment CuPy runs in, in a worker: set before CuPy is imported, as CuPy reads it then."""

from __future__ import annotations

import os
from typing import Any

from ..records.outcome import cuda_version

__all__ = ["cupy_environment", "device_facts"]


def cupy_environment() -> None:
    """How CuPy must run in a worker; set before CuPy is imported, which reads it then."""
    # CuPy's fp32 matmul must be real fp32; cuBLAS's is, with the compute type the harness asks for (COMPUTE_32F
    # for fp32, COMPUTE_32F_FAST_TF32 for tf32): NVIDIA_TF32_OVERRIDE=0 would turn TF32 off for tf32 kernels' peer
    os.environ["CUPY_TF32"] = "0"
    # no CUB reductions (unless the user chose): each is two kernels that a fresh machine JIT-compiles for seconds,
    # most of what CuPy compiled in the main job, for counts and norms that take microseconds either way
    # (measured: docs/measurements.md#the-workers-start)
    os.environ.setdefault("CUPY_ACCELERATORS", "")


def device_facts(runner: Any) -> dict[str, Any]:
    """What CUDA and CuPy say about a :class:`~.device.GpuRunner`'s device and its software (NVML adds the rest)."""
    cp = runner.cp
    from cupy_backends.cuda.libs import cublas

    handle = cublas.create()
    try:
        cublas_version = cublas.getVersion(handle)
    finally:
        cublas.destroy(handle)
    runtime = cp.cuda.runtime.runtimeGetVersion()
    driver = cp.cuda.runtime.driverGetVersion()
    return {
        "name": runner.name,
        "compute_capability": f"{runner.capability[0]}.{runner.capability[1]}",
        "sm_count": runner.sm_count,
        "l2_bytes": runner.l2_bytes,
        "cuda_max_sm_clock_mhz": runner.max_clock_mhz,
        "pci_bus_id": runner.pci_bus_id,
        "cuda_driver_api_version": cuda_version(driver),
        "cuda_runtime_version": cuda_version(runtime),
        "cupy_version": cp.__version__,
        "cublas_version": f"{cublas_version // 10000}.{cublas_version % 10000 // 100}.{cublas_version % 100}",
    }
