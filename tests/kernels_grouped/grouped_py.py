"""Grouped GEMMs as Python kernels: torch's own grouped GEMM (torch._grouped_mm, the peer) in each layout, and a CuPy
loop over the groups; each gets 3-D views of the operands that hold one matrix a group, groups first."""

import cupy

from pytest_gemm import gemm_kernel


@gemm_kernel(
    dtypes=["bf16"],
    arrays="torch",
    alpha_beta=False,
    storage={"B": "NxK"},
    requires=["K % 8 == 0", "N % 8 == 0"],  # torch: "strides should be multiple of 16 bytes"
    groups={"layout": "contiguous", "args": ["group_ends"]},
)
def torch_grouped_contiguous(A, B, C, group_ends):
    import torch

    C[...] = torch._grouped_mm(A, B, offs=group_ends)


@gemm_kernel(
    dtypes=["bf16"],
    arrays="torch",
    alpha_beta=False,
    storage={"B": "NxK"},
    requires=["K % 8 == 0", "N % 8 == 0"],  # torch: "strides should be multiple of 16 bytes"
    groups={"layout": "contiguous", "align": 128, "args": ["group_offsets"], "writes_padding": True},
)
def torch_grouped_padded(A, B, C, group_offsets):
    import torch

    # each group's rows padded to 128 (DeepGEMM's layout): torch computes a group's padding rows with it
    C[...] = torch._grouped_mm(A, B, offs=group_offsets[1:])


@gemm_kernel(
    dtypes=["bf16"],
    arrays="torch",
    alpha_beta=False,
    storage={"B": "NxK"},
    requires=["K % 8 == 0", "N % 8 == 0"],  # torch: "strides should be multiple of 16 bytes"
    groups={"layout": "masked", "args": ["group_rows"], "writes_padding": True},
)
def torch_grouped_masked(A, B, C, group_rows):
    import torch

    C[...] = torch._grouped_mm(A, B)


@gemm_kernel(dtypes=["fp32", "fp16"], groups={"layout": "contiguous", "args": ["group_offsets"]})
def cupy_grouped_loop(A, B, C, alpha, beta, group_offsets):
    offsets = group_offsets.get().tolist()
    for g in range(B.shape[0]):
        rows = slice(offsets[g], offsets[g + 1])
        product = cupy.matmul(A[rows].astype(cupy.float32), B[g].astype(cupy.float32))
        C[rows] = (alpha * product + (beta * C[rows].astype(cupy.float32) if beta else 0)).astype(C.dtype)
