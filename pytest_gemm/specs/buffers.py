"""Buffers a ``.cu`` kernel takes besides its operands, declared by the header's ``buffers`` key: each one's element
type, size and contents (docs/kernel-files.md#buffers-and-constant-arguments).

``buffers = { dspace = { type = "int32", size = "128 * 128", fill = "schedule.py:hilbert" } }`` with ``dspace`` in
``args`` gives the kernel a device buffer of that many int32 elements, filled once per case: with zeros (the default),
or with what a function of a Python file beside the kernel file returns for the case, called with the case's ``M``,
``N``, ``K``, ``SM_COUNT`` and params as keywords (a tile schedule computed on the host, as fast.cu's kernels upload).
Each set of operands has a buffer of its own, filled once: a timed set's is not filled again between the launches
that reuse it, so a kernel that counts in a buffer resets it itself. What the kernel writes there is not checked.

Pure: no arrays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .expr import Expression

__all__ = ["BUFFER_TYPES", "FILL", "Buffer"]

#: the element types a buffer may have, and each one's bytes
BUFFER_TYPES = {"int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float32": 4, "uint8": 1}
#: a fill naming a function: ``FILE.py:FUNCTION``
FILL = re.compile(r"^(?P<file>[^:]+\.py):(?P<function>[A-Za-z_][A-Za-z0-9_]*)$")


@dataclass(frozen=True)
class Buffer:
    """One buffer of the header: its argument's name, element type, size in elements (an expression over the shape,
    params and ``SM_COUNT``) and contents (``"zeros"``, or ``"FILE.py:FUNCTION"``)."""

    name: str
    type: str
    size: Expression
    fill: str = "zeros"

    @property
    def function(self) -> tuple[str, str] | None:
        """The file and function its contents come from (None: zeros)."""
        match = FILL.match(self.fill)
        return None if match is None else (match["file"], match["function"])
