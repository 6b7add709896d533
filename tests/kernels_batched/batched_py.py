"""Strided batches: a batched Python kernel gets strided views of each operand, (batch, rows, cols) in its logical
orientation on a batched shape, the usual 2-D views on a batch of 1; never copies."""

import cupy

from pytest_gemm import gemm_kernel


@gemm_kernel(dtypes=["fp32", "fp16"], batched=True, params={"B_NxK": [0, 1]})
def batched_py(A, B, C, alpha, beta, B_NxK):
    if not A.ndim == B.ndim == C.ndim or A.ndim not in (2, 3):
        raise AssertionError(f"expected three 2-D or three 3-D views, got {A.shape} {B.shape} {C.shape}")
    if A.ndim == 3 and not A.shape[0] == B.shape[0] == C.shape[0] > 1:
        raise AssertionError(f"expected one batch count above 1, got {A.shape} {B.shape} {C.shape}")
    for x, transposed in ((A, 0), (B, B_NxK), (C, 0)):
        contiguous = x.strides[-2 if transposed else -1] == x.itemsize
        if x.base is None or (not contiguous and x.shape[-2] > 1 and x.shape[-1] > 1):
            raise AssertionError(f"not a view in its storage order: {x.shape} {x.strides}")
    product = cupy.matmul(A.astype(cupy.float32), B.astype(cupy.float32))
    result = alpha * product + (beta * C.astype(cupy.float32) if beta else 0)
    C[...] = result.astype(C.dtype)
