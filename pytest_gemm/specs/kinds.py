"""The kinds of kernel file, and what each kind means for the harness: the one place a kernel's kind is told apart.

A ``.cu`` kernel is CUDA C that NVRTC compiles and the harness launches with a grid, a block and packed arguments; a
``.py`` kernel is a Python function the GPU worker imports and calls with arrays. Everything that differs between them
asks the kind (:class:`KernelKind`) for a fact, never compares kinds; the worker picks its launch strategy for a kind
in ``worker/kinds.py``.
"""

from __future__ import annotations

import enum

__all__ = ["KernelKind"]


class KernelKind(str, enum.Enum):
    """A kernel file's kind: ``cu`` or ``py`` (its file's suffix without the dot)."""

    CU = "cu"
    PY = "py"

    def __str__(self) -> str:
        return self.value

    @property
    def compiled(self) -> bool:
        """Compiled by NVRTC and launched by the harness: compile items, a launch geometry, the arguments' sizes checked
        against the compiled kernel, compute-sanitizer items, integer arguments of its declared size type."""
        return self is KernelKind.CU

    @property
    def described(self) -> str:
        """How messages name a kernel of this kind."""
        return f"a {self.plural[:-1]}"

    @property
    def plural(self) -> str:
        """How messages name the kernels of this kind."""
        return ".cu kernels" if self.compiled else "Python kernels"

    @property
    def batched_how(self) -> str:
        """How a kernel of this kind declares that it runs strided batches."""
        return "batch (and stride_a, stride_b, stride_c) in args" if self.compiled else "batched=True"
