"""pytest-gemm: verify and time CUDA GEMM kernels against cuBLAS, as ordinary pytest tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__version__ = "0.1.0"
__all__ = ["__version__", "gemm_kernel"]

F = TypeVar("F", bound=Callable[..., Any])


def gemm_kernel(
    *,
    dtypes: Iterable[str],
    requires: Iterable[str] | str = (),
    layout: str = "row",
    params: dict[str, list[int]] | None = None,
    c_dtype: str | None = None,
    name: str | None = None,
    description: str = "",
) -> Callable[[F], F]:
    """Mark a Python function in a kernel file as a GEMM kernel.

    The harness calls ``fn(A, B, C, alpha, beta, **params)`` with CuPy device arrays
    (A is M x K, B is K x N, C is M x N; transposed views for ``layout="col"``) and the
    function must write ``alpha * A @ B + beta * C`` into ``C`` in place. The keywords
    state the same facts as a ``.cu`` header and are checked the same way.
    """
    data: dict[str, Any] = {"dtypes": list(dtypes), "layout": layout, "description": description}
    data["requires"] = [requires] if isinstance(requires, str) else list(requires)
    if params:
        data["params"] = {k: list(v) for k, v in params.items()}
    if c_dtype is not None:
        data["c_dtype"] = c_dtype
    if name is not None:
        data["name"] = name

    def mark(fn: F) -> F:
        fn.__pytest_gemm__ = data  # type: ignore[attr-defined]
        return fn

    return mark
