"""A Python kernel that keeps its operands in L2 with a persisting access-policy window (the cheat catalogue's row
19; llm.c PR #851): each call sets L2 aside for persisting lines and puts A and B in the current stream's window,
then computes C right. The worker resets both after each call and flags the case (docs/verification.md#persisting-l2).
``honest``, first in the file and so first in its worker, sets neither: it is not flagged.
"""

import cupy
from cuda.bindings import runtime

from pytest_gemm import gemm_kernel


@gemm_kernel(dtypes=["fp32"])
def honest(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


@gemm_kernel(dtypes=["fp32"])
def persisting_window(A, B, C, alpha, beta):
    size = runtime.cudaDeviceGetAttribute(runtime.cudaDeviceAttr.cudaDevAttrMaxPersistingL2CacheSize, 0)[1]
    runtime.cudaDeviceSetLimit(runtime.cudaLimit.cudaLimitPersistingL2CacheSize, size)
    value = runtime.cudaStreamAttrValue()
    window = value.accessPolicyWindow
    window.base_ptr = A.data.ptr
    window.num_bytes = min(A.nbytes, size)
    window.hitRatio = 1.0
    window.hitProp = runtime.cudaAccessProperty.cudaAccessPropertyPersisting
    window.missProp = runtime.cudaAccessProperty.cudaAccessPropertyStreaming
    stream = runtime.cudaStream_t(cupy.cuda.get_current_stream().ptr)
    runtime.cudaStreamSetAttribute(stream, runtime.cudaStreamAttributeAccessPolicyWindow, value)
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)
