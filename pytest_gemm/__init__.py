"""pytest-gemm: verify and time CUDA GEMM kernels against cuBLAS, as ordinary pytest tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .specs.pyfile import SPEC_ATTR, header_from_arguments

__version__ = "0.2.0"
__all__ = ["__version__", "gemm_kernel"]

F = TypeVar("F", bound=Callable[..., Any])


def gemm_kernel(
    *,
    dtypes: Iterable[str],
    requires: Iterable[str] | str = (),
    layout: str = "row",
    storage: dict[str, str] | None = None,
    accumulate: str | None = None,
    batched: bool = False,
    arrays: str = "cupy",
    alpha_beta: bool = True,
    params: dict[str, list[int]] | None = None,
    c_dtype: str | None = None,
    name: str | None = None,
    description: str = "",
    always_reads_c: bool = False,
    nondeterministic: str | None = None,
    scales: dict[str, Any] | None = None,
) -> Callable[[F], F]:
    """Mark a top-level Python function in a kernel file as a GEMM kernel.

    The harness calls ``fn(A, B, C, alpha, beta, **params)`` in a GPU worker with CuPy device
    arrays (A is M x K, B is K x N, C is M x N, each a view of its storage: transposed for an operand
    stored transposed, ``storage={"B": "NxK"}`` or ``layout="col"``; with ``batched=True``, a batched shape's
    operands are 3-D views, the batch first; with ``arrays="torch"``, torch tensors on the same memory, called with
    torch's current stream the harness's), and the
    function must write ``alpha * A @ B + beta * C`` into ``C`` in place (with ``alpha_beta=False``, it is called as
    ``fn(A, B, C, **params)`` and writes ``A @ B``: its cases are those of alpha = 1, beta = 0; FP8 and INT8 kernels
    are called so, an FP8 one as ``fn(A, B, C, scale_a, scale_b, **params)`` with its ``scales``, each grid of
    scales a view of its storage as A and B are; docs/kernel-files.md). The keywords state the
    same facts as a ``.cu`` header and must be literals: the pytest process reads them from the
    file's syntax tree without running it.
    """
    data = header_from_arguments(**locals())

    def mark(fn: F) -> F:
        setattr(fn, SPEC_ATTR, data)
        return fn

    return mark
