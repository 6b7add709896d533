"""Storage orders: a Python kernel gets strided views of each operand as stored, never copies."""

import cupy

from pytest_gemm import gemm_kernel


@gemm_kernel(dtypes=["fp32", "fp16"], params={"A_KxM": [0, 1], "B_NxK": [0, 1], "C_NxM": [0, 1]})
def orders_py(A, B, C, alpha, beta, A_KxM, B_NxK, C_NxM):
    for x, transposed in ((A, A_KxM), (B, B_NxK), (C, C_NxM)):
        if x.base is None or (bool(x.flags.c_contiguous) == bool(transposed) and x.shape[0] > 1 and x.shape[1] > 1):
            raise AssertionError(f"not a view in its storage order: {x.shape} {x.strides}")
    product = cupy.matmul(A.astype(cupy.float32), B.astype(cupy.float32))
    result = alpha * product + (beta * C.astype(cupy.float32) if beta else 0)
    C[...] = result.astype(C.dtype)
