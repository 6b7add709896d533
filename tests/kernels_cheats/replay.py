"""Python kernels that replay results instead of computing them (the cheat catalogue's rows 11 to 13 and 20): each is
right when verified, and fast when timed only because it returns a result it kept. Each must fail: named by the round
of its first wrong timed output (docs/verification.md#fresh-inputs-for-timed-launches), or, where it replays whatever
the buffers hold, first when a CUDA graph of its launch is replayed on new values (docs/verification.md#cuda-graphs).
``by_content`` keys its cache on the inputs' values: with fresh inputs it never hits, so it gains nothing and passes
(it reads them on the host, which capture refuses: its answer is "no CUDA graph")."""

import cupy

from pytest_gemm import gemm_kernel

_kept: dict = {}


def _gemm(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


def _replayed(key, A, B, C, alpha, beta):
    """C from the cache under ``key``, or computed and kept there."""
    if key in _kept:
        C[...] = _kept[key]
        return
    _gemm(A, B, C, alpha, beta)
    _kept[key] = C.copy()


@gemm_kernel(dtypes=["fp32"])
def by_address(A, B, C, alpha, beta):
    """A result cache keyed by the buffers' addresses (a pointer-keyed cache, invisible to checks of the values)."""
    _replayed(("address", A.data.ptr, B.data.ptr, C.data.ptr, A.shape, B.shape, alpha, beta), A, B, C, alpha, beta)


@gemm_kernel(dtypes=["fp32"])
def by_shape(A, B, C, alpha, beta):
    """A result cache keyed by the shapes and scalars: what a benchmark that times one fixed input lets through."""
    _replayed(("shape", A.shape, B.shape, alpha, beta), A, B, C, alpha, beta)


@gemm_kernel(dtypes=["fp32"])
def previous_after_three(A, B, C, alpha, beta):
    """Right for its first three calls, then the previous call's result (llm.c #852; GPU MODE's qr)."""
    calls = _kept.setdefault("calls", [0])
    calls[0] += 1
    last = _kept.get(("last", C.shape))
    if calls[0] > 3 and last is not None:
        C[...] = last
        return
    _gemm(A, B, C, alpha, beta)
    _kept[("last", C.shape)] = C.copy()


@gemm_kernel(dtypes=["fp32"])
def by_content(A, B, C, alpha, beta):
    """A result cache keyed by a digest of the inputs' values: fresh inputs never repeat, so it never hits."""
    key = ("content", float(cupy.sum(A[::7, ::5])), float(cupy.sum(B[::5, ::7])), float(cupy.sum(C[::7, ::7])))
    _replayed(key, A, B, C, alpha, beta)
