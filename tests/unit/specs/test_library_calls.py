"""A library's GEMM called by a Python kernel, read from its file (docs/verification.md#library-gemms): named where
the kernel or a function of its file calls one, never for the kernel's own code (Triton's tl.dot)."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from pytest_gemm.report.tables import row_flags
from pytest_gemm.specs.pyfile import parse_py_source

from support import recorded_records

HEAD = "from pytest_gemm import gemm_kernel\n"


def _library_gemms(body: str) -> dict[str, str]:
    specs = parse_py_source("k.py", HEAD + textwrap.dedent(body))
    return {spec.name: spec.library_gemm for spec in specs}


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("@gemm_kernel(dtypes=['fp32'])\ndef k(A, B, C, alpha, beta):\n    C[...] = alpha * (A @ B)\n", "@"),
        (
            "import torch\n@gemm_kernel(dtypes=['fp32'], arrays='torch')\ndef k(A, B, C, alpha, beta):\n"
            "    torch.matmul(A, B, out=C)\n",
            "torch.matmul",
        ),
        (
            "import torch.nn.functional as F\n@gemm_kernel(dtypes=['bf16'], arrays='torch', alpha_beta=False)\n"
            "def k(A, B, C):\n    C.copy_(F.linear(A, B.T))\n",
            "F.linear",
        ),
        (
            "from torch import _grouped_mm as grouped\n"
            "@gemm_kernel(dtypes=['bf16'], arrays='torch', alpha_beta=False)\n"
            "def k(A, B, C):\n    C.copy_(grouped(A, B))\n",
            "grouped",
        ),
        (
            "import cupy as cp\n@gemm_kernel(dtypes=['fp32'])\n"
            "def k(A, B, C, alpha, beta):\n    cp.matmul(A, B, out=C)\n",
            "cp.matmul",
        ),
        ("@gemm_kernel(dtypes=['fp32'])\ndef k(A, B, C, alpha, beta):\n    C[...] = A.matmul(B)\n", "A.matmul"),
    ],
    ids=["operator", "torch.matmul", "F.linear", "imported function", "cupy", "tensor method"],
)
def test_a_library_gemm_the_kernel_calls_is_named_as_written(body, said):
    assert _library_gemms(body) == {"k": said}


def test_one_in_a_function_of_the_file_it_calls_is_found_at_any_depth():
    body = """
    def _inner(A, B):
        return A @ B

    def _outer(A, B, C):
        C[...] = _inner(A, B)

    @gemm_kernel(dtypes=['fp32'])
    def k(A, B, C, alpha, beta):
        _outer(A, B, C)
    """
    assert _library_gemms(body) == {"k": "@"}


@pytest.mark.parametrize(
    ("defined", "used", "said"),
    [
        ("mm = torch.matmul", "C.copy_(mm(A, B))", "torch.matmul"),
        (
            "def _impl(A, B):\n    return torch.mm(A, B)\n_fast = torch.compile(_impl)",
            "C.copy_(_fast(A, B))",
            "torch.mm",
        ),
        ("", "C.copy_(torch.ops.aten.mm.default(A, B))", "torch.ops.aten.mm.default"),
        ("class Op:\n    @staticmethod\n    def apply(A, B):\n        return A @ B", "C.copy_(Op.apply(A, B))", "@"),
    ],
    ids=["an alias", "torch.compile of a function", "an aten op", "a class's method"],
)
def test_one_reached_through_what_the_file_defines_is_found(defined, used, said):
    body = f"import torch\n{defined}\n@gemm_kernel(dtypes=['fp32'], arrays='torch')\ndef k(A, B, C, alpha, beta):\n"
    assert _library_gemms(body + f"    {used}\n") == {"k": said}


def test_the_kernels_own_code_is_no_library_gemm():
    """Triton's tl.dot, a launch through a grid, a loop of the file's own, element-wise CuPy: nothing named."""
    body = """
    import cupy as cp
    import triton
    import triton.language as tl

    @triton.jit
    def _kernel(a_ptr, b_ptr, c_ptr):
        acc = tl.dot(tl.load(a_ptr), tl.load(b_ptr))
        tl.store(c_ptr, acc)

    def gemm(A, B, C):  # the file's own function, named like a library's
        for i in range(A.shape[0]):
            C[i] = (A[i, :, None] * B).sum(axis=0)

    @gemm_kernel(dtypes=['fp32'], arrays='torch')
    def triton_kernel(A, B, C, alpha, beta):
        _kernel[(1,)](A, B, C)

    @gemm_kernel(dtypes=['fp32'])
    def loops(A, B, C, alpha, beta):
        gemm(A, B, C)
        C *= alpha
        cp.maximum(C, 0, out=C)
    """
    assert _library_gemms(body) == {"triton_kernel": "", "loops": ""}


def test_a_timed_row_of_such_a_kernel_says_so_beside_its_times():
    record = recorded_records()[0]
    assert "library GEMM" not in row_flags(record)
    assert "library GEMM (torch.matmul)" in row_flags(dataclasses.replace(record, library_gemm="torch.matmul"))
