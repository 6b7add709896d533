"""The integer type of a kernel's size, leading-dimension and batch-stride arguments: the words a header uses for them
(``size_type``, ``stride_type``), and how the worker packs them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_SIZE_TYPE", "SIZE_TYPES", "SizeType"]


@dataclass(frozen=True)
class SizeType:
    """The C type of a kernel's size and leading-dimension arguments, and how the worker packs them."""

    name: str
    numpy: str  # the NumPy scalar type with the same bytes

    @property
    def max(self) -> int:
        return int(np.iinfo(self.numpy).max)

    @property
    def bytes(self) -> int:
        return np.dtype(self.numpy).itemsize


#: the size types a header may declare (``size_type``), by how it writes them
SIZE_TYPES = {
    t.name: t
    for t in (
        SizeType("int", "int32"),
        SizeType("unsigned", "uint32"),
        SizeType("long long", "int64"),
        SizeType("size_t", "uint64"),
    )
}
DEFAULT_SIZE_TYPE = "int"
