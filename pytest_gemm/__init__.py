"""pytest-gemm: verify and time CUDA GEMM kernels against cuBLAS, as ordinary pytest tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .specs.header import python_header, python_signature
from .specs.pyfile import SPEC_ATTR

__version__ = "0.2.0"
__all__ = ["__version__", "gemm_kernel"]

F = TypeVar("F", bound=Callable[..., Any])


def gemm_kernel(**declared: Any) -> Callable[[F], F]:
    """Mark a top-level Python function in a kernel file as a GEMM kernel.

    The harness calls ``fn(A, B, C, alpha, beta, **params)`` in a GPU worker with CuPy device
    arrays (A is M x K, B is K x N, C is M x N, each a view of its storage: transposed for an operand
    stored transposed, ``storage={"B": "NxK"}`` or ``layout="col"``; with ``batched=True``, a batched shape's
    operands are 3-D views, the batch first; with ``arrays="torch"``, torch tensors on the same memory, called with
    torch's current stream the harness's), and the
    function must write ``alpha * A @ B + beta * C`` into ``C`` in place (with ``alpha_beta=False``, it is called as
    ``fn(A, B, C, **params)`` and writes ``A @ B``: its cases are those of alpha = 1, beta = 0; FP8 and INT8 kernels
    are called so, an FP8 one as ``fn(A, B, C, scale_a, scale_b, **params)`` with its ``scales``, each grid of
    scales a view of its storage as A and B are; docs/kernel-files.md). The keywords are the header keys a Python
    kernel declares (its signature comes from the header schema, docs/kernel-files.md#header-keys) and must be
    literals: the pytest process reads them from the file's syntax tree without running it.
    """
    data = python_header(SIGNATURE.bind(**declared).arguments)  # a TypeError for a keyword it does not take

    def mark(fn: F) -> F:
        setattr(fn, SPEC_ATTR, data)
        return fn

    return mark


SIGNATURE = python_signature()
gemm_kernel.__signature__ = SIGNATURE  # type: ignore[attr-defined]
