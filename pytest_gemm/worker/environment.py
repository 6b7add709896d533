"""The environment CuPy runs in, in a worker: set before CuPy is imported, as CuPy reads it then."""

from __future__ import annotations

import os

__all__ = ["cupy_environment"]


def cupy_environment() -> None:
    """How CuPy must run in a worker; set before CuPy is imported, which reads it then."""
    # CuPy's fp32 matmul must be real fp32; cuBLAS's is, with the compute type the harness asks for (COMPUTE_32F
    # for fp32, COMPUTE_32F_FAST_TF32 for tf32): NVIDIA_TF32_OVERRIDE=0 would turn TF32 off for tf32 kernels' peer
    os.environ["CUPY_TF32"] = "0"
    # no CUB reductions (unless the user chose): each is two kernels that a fresh machine JIT-compiles for seconds,
    # most of what CuPy compiled in the main job, for counts and norms that take microseconds either way
    # (measured: docs/measurements.md#the-workers-start)
    os.environ.setdefault("CUPY_ACCELERATORS", "")
