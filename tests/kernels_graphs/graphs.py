"""Python kernels for the GPU test of CUDA graphs (tests/gpu/test_gpu_graphs.py; docs/verification.md#cuda-graphs):
each is right when called, and computes with a CuPy RawKernel (CuPy refuses to call cuBLAS while a stream captures).
``plain`` captures and replays right; ``synced`` waits for its stream inside the call, which capture refuses, so it
passes with that answer; ``shortcut_when_captured`` copies the last result it computed when its stream is capturing,
so its graph replays that copy on new values: it fails, named."""

import cupy
import numpy

from pytest_gemm import gemm_kernel

_NAIVE = cupy.RawKernel(
    r"""
extern "C" __global__ void naive(int M, int N, int K, const float* A, const float* B, float* T) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
    T[(size_t)row * N + col] = acc;
}
""",
    "naive",
)

_last: dict = {}


def _computed(A, B, C, alpha, beta):
    a, b = cupy.ascontiguousarray(A), cupy.ascontiguousarray(B)
    (m, k), n = a.shape, b.shape[1]
    t = cupy.empty((m, n), cupy.float32)
    _NAIVE(((n + 15) // 16, (m + 15) // 16), (16, 16), (numpy.int32(m), numpy.int32(n), numpy.int32(k), a, b, t))
    return alpha * t + (beta * C if beta else 0)


@gemm_kernel(dtypes=["fp32"])
def plain(A, B, C, alpha, beta):
    C[...] = _computed(A, B, C, alpha, beta)


@gemm_kernel(dtypes=["fp32"])
def synced(A, B, C, alpha, beta):
    C[...] = _computed(A, B, C, alpha, beta)
    cupy.cuda.get_current_stream().synchronize()


@gemm_kernel(dtypes=["fp32"])
def shortcut_when_captured(A, B, C, alpha, beta):
    key = (A.shape, B.shape, alpha, beta)
    if cupy.cuda.runtime.streamIsCapturing(cupy.cuda.get_current_stream().ptr) and key in _last:
        C[...] = _last[key]
        return
    _last[key] = _computed(A, B, C, alpha, beta)
    C[...] = _last[key]
