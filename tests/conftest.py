"""Shared helpers for the plugin's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
BROKEN = Path(__file__).resolve().parent / "kernels_broken"


def _device_reason() -> str | None:
    """Ask a GPU worker, as the plugin does (this process never opens the device itself)."""
    from pytest_gemm.isolation.workers import WorkerPool
    from pytest_gemm.worker.serve import DEFAULT_BACKEND

    pool = WorkerPool(DEFAULT_BACKEND, None, timeout=60.0)
    try:
        reason = pool.probe()
    finally:
        pool.close()
    return None if reason is None else f"no CUDA device: {reason}"


def _nvrtc_reason() -> str | None:
    from pytest_gemm.compiler.nvrtc import NvrtcUnavailable, nvrtc_version

    try:
        nvrtc_version()
    except NvrtcUnavailable as exc:
        return str(exc)
    return None


NO_DEVICE = _device_reason()
NO_NVRTC = _nvrtc_reason()

#: GPU tests run only where a CUDA device is present; elsewhere they skip with the reason.
requires_gpu = pytest.mark.skipif(NO_DEVICE is not None, reason=NO_DEVICE or "")
requires_nvrtc = pytest.mark.skipif(NO_NVRTC is not None, reason=NO_NVRTC or "")

NAIVE_HEADER = """/* pytest-gemm
entry = "sgemm_naive"
args = ["M", "N", "K", "alpha", "A", "B", "beta", "C"]
dtypes = ["fp32"]
block = [32, 32]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/
"""

NAIVE_BODY = """
extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A, const float* B,
                                       float beta, float* C) {
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
"""


@pytest.fixture
def naive_source() -> str:
    return NAIVE_HEADER + NAIVE_BODY


RECORDED = Path(__file__).resolve().parent / "data" / "h100_timings.json"


def recorded_timings() -> dict:
    """Timings recorded on an H100 by scripts/gpu-check.sh (pytest-benchmark JSON rows with raw samples)."""
    import json

    return json.loads(RECORDED.read_text())


def recorded_rows() -> list[dict]:
    return recorded_timings()["rows"]
