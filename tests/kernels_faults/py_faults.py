"""Python kernels that fail the ways Python code does: an exception, a process exit, a sleep forever.

The harness must fail each case with its own reason, in the GPU worker, and go on.
"""

import os
import time

from pytest_gemm import gemm_kernel


@gemm_kernel(dtypes=["fp32"])
def raises(A, B, C, alpha, beta):
    raise ValueError("this kernel is not written yet")


@gemm_kernel(dtypes=["fp32"], requires="M == 256")
def exits(A, B, C, alpha, beta):
    os._exit(1)


@gemm_kernel(dtypes=["fp32"], requires="M == 256")
def sleeps(A, B, C, alpha, beta):
    while True:
        time.sleep(1)
