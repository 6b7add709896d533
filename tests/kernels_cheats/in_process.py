"""Python kernels that cheat from inside the worker's process (the cheat catalogue's rows 6 and 8): each computes C
right, then changes the worker's clock or statistics, or leaves its work to a thread. Each must fail with what it
did, named, and the run go on (docs/verification.md#the-harness-unchanged). ``honest`` is the control."""

import threading
import time

import cupy

from pytest_gemm import gemm_kernel

_REAL_ELAPSED = cupy.cuda.get_elapsed_time


def _gemm(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


@gemm_kernel(dtypes=["fp32"])
def honest(A, B, C, alpha, beta):
    _gemm(A, B, C, alpha, beta)


@gemm_kernel(dtypes=["fp32"])
def faster_clock(A, B, C, alpha, beta):
    """The clock the events are read with, patched to report a hundredth of each time."""
    _gemm(A, B, C, alpha, beta)
    cupy.cuda.get_elapsed_time = lambda start, end: _REAL_ELAPSED(start, end) / 100


@gemm_kernel(dtypes=["fp32"])
def kind_statistics(A, B, C, alpha, beta):
    """The worker's statistics patched, as GPU MODE's eigh submission patched calculate_stats."""
    import pytest_gemm.judge.stats as stats

    _gemm(A, B, C, alpha, beta)
    stats.median_interval = lambda samples: stats.Interval(1e-9, 1e-9, 1e-9, len(samples))


@gemm_kernel(dtypes=["fp32"])
def clock_by_callback(A, B, C, alpha, beta):
    """The clock patched by a host function queued on the stream: after the call has returned."""
    _gemm(A, B, C, alpha, beta)

    def patch(_):
        cupy.cuda.get_elapsed_time = lambda start, end: _REAL_ELAPSED(start, end) / 100

    cupy.cuda.get_current_stream().launch_host_func(patch, None)


@gemm_kernel(dtypes=["fp32"])
def deferred(A, B, C, alpha, beta):
    """The call returns at once; a thread computes C a little later."""

    def later():
        time.sleep(0.01)
        _gemm(A, B, C, alpha, beta)

    threading.Thread(target=later, name="later-gemm").start()
