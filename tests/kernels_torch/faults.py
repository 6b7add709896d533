"""torch and Triton kernels that go wrong as a GPU does, each costing its own case only: an
illegal address in a Triton kernel (its first call, in the setup step), torch out of GPU memory, and a torch matmul on
a stream of its own (found in verification, timed or not); a correct torch matmul after them passes."""

import torch
import triton
import triton.language as tl

from pytest_gemm import gemm_kernel


@triton.jit
def _far_store(c, FAR: tl.constexpr):
    tl.store(c + FAR, 1.0)


@gemm_kernel(dtypes=["fp32"], arrays="torch", alpha_beta=False, description="WRONG on purpose: stores far past C")
def triton_illegal_address(A, B, C):
    _far_store[(1,)](C, FAR=1 << 40)


@gemm_kernel(dtypes=["fp32"], arrays="torch", alpha_beta=False, description="WRONG on purpose: asks for 10 TB")
def torch_out_of_memory(A, B, C):
    torch.matmul(A, B, out=C)
    torch.empty(10**13, dtype=torch.uint8, device=C.device)


@gemm_kernel(dtypes=["fp32"], arrays="torch", alpha_beta=False, description="WRONG on purpose: a stream of its own")
def torch_own_stream(A, B, C):
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.matmul(A, B, out=C)


@gemm_kernel(dtypes=["fp32"], arrays="torch", alpha_beta=False)
def torch_matmul_after(A, B, C):
    """torch.matmul (cuBLAS), run after the faults in the same worker or its replacement."""
    torch.matmul(A, B, out=C)
