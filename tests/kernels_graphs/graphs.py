"""Python kernels for the GPU test of CUDA graphs (tests/gpu/test_gpu_graphs.py; docs/verification.md#cuda-graphs):
each is right when called. ``plain`` captures and replays right; ``synced`` waits for its stream inside the call,
which capture refuses, so it passes with that answer; ``kept_by_shape`` keeps its first result for a shape and
copies it, which a graph replays on new values: it fails, named."""

import cupy

from pytest_gemm import gemm_kernel

_kept: dict = {}


@gemm_kernel(dtypes=["fp32"])
def plain(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


@gemm_kernel(dtypes=["fp32"])
def synced(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)
    cupy.cuda.get_current_stream().synchronize()


@gemm_kernel(dtypes=["fp32"])
def kept_by_shape(A, B, C, alpha, beta):
    key = (A.shape, B.shape, alpha, beta)
    if key not in _kept:
        _kept[key] = alpha * (A @ B) + (beta * C if beta else 0)
    C[...] = _kept[key]
