"""cuBLASLt's own FP8 GEMM through torch, declared as a kernel: the per-row and per-column scaling DeepSeek-style
serving uses, and DeepSeek-V3's 1 x 128 / 128 x 128 blocks, called on the harness's tensors as they are."""

import torch

from pytest_gemm import gemm_kernel


@gemm_kernel(
    dtypes=["fp8_e4m3"],
    storage={"B": "NxK"},
    scales={"A": "row", "B": "col"},
    arrays="torch",
    requires=["K % 16 == 0", "N % 16 == 0"],  # torch's rule for FP8 operands
)
def torch_rowwise(A, B, C, scale_a, scale_b):
    torch._scaled_mm(A, B, scale_a, scale_b, out_dtype=C.dtype, out=C)


@gemm_kernel(
    dtypes=["fp8_e4m3"],
    storage={"B": "NxK"},
    scales={"A": "1x128", "B": "128x128", "stored": {"A": "KxM", "B": "NxK"}, "align": 16},
    arrays="torch",
    requires=["M % 4 == 0", "K % 512 == 0"],  # torch wants B's grid (K/128 padded to 4, N/128): K/128 a multiple of 4
)
def torch_blockwise(A, B, C, scale_a, scale_b):
    torch._scaled_mm(A, B, scale_a, scale_b, out_dtype=C.dtype, out=C)


@gemm_kernel(
    dtypes=["fp8_e4m3"],
    c_dtype="fp32",
    storage={"B": "NxK"},
    scales={"A": "tensor", "B": "tensor"},
    arrays="torch",
    requires=["K % 16 == 0", "N % 16 == 0"],
)
def torch_tensorwise_fp32(A, B, C, scale_a, scale_b):
    """cuBLASLt's FP8 GEMM into fp32, where the tensor cores' own precision shows (bf16 rounding hides it)."""
    torch._scaled_mm(A, B, scale_a, scale_b, out_dtype=C.dtype, out=C)
