"""The environment CuPy runs in, in a worker: set before CuPy is imported, as CuPy reads it then."""

from __future__ import annotations

import os

__all__ = ["cupy_environment"]


def cupy_environment() -> None:
    """How CuPy must run in a worker; set before CuPy is imported, which reads it then."""
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # cuBLAS fp32 must be real fp32
    os.environ["CUPY_TF32"] = "0"
    # no CUB reductions (unless the user chose): each is two kernels that a fresh machine JIT-compiles for seconds,
    # most of what CuPy compiled in the main job, for counts and norms that take microseconds either way
    # (measured: docs/measurements.md#the-workers-start)
    os.environ.setdefault("CUPY_ACCELERATORS", "")
