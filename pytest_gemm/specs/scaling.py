"""How an FP8 kernel scales its operands: each operand's granularity, the scales' type, and how each grid
of scales is stored.

A holds one scale for the whole matrix (``"tensor"``), one a row (``"row"``, per token) or one for each 1 x 128 block
of a row (``"1x128"``, DeepSeek-V3's activations); B one for the matrix, one a column (``"col"``, per output channel)
or one for each 128 x 128 block (``"128x128"``, its weights). The scales of an operand form a grid, one per block:
A's is ceil(M / rows) x ceil(K / cols), B's ceil(K / rows) x ceil(N / cols), with its dimensions named as the operand's
(A's grid is "M x K", B's "K x N"). A grid is stored as its operand is, by a stored shape: A's ``"MxK"`` (each row's K
blocks together, the default) or ``"KxM"`` (M-major, as TMA-fed kernels such as DeepGEMM's read it), B's ``"KxN"``
(the default) or ``"NxK"``; and ``align`` pads each stored row to a multiple of that many bytes (16 for TMA), as the
kernel's ``ld_scale_a`` and ``ld_scale_b`` say. Scales are fp32, or UE8M0: one byte, the exponent of a power of two
(2^(e - 127)).

Pure: the header's words, the grids' sizes, and where a block's scale lies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..records.dtypes import SCALE_DTYPES
from ..records.shapes import Shape
from .errors import KernelFileError
from .storage import LOGICAL

__all__ = ["BLOCK", "GRANULARITIES", "INT8_MAX", "SCALE_ARGS", "Scales", "int8_overflow", "read_scales"]

#: the side of a block of scales (DeepSeek-V3's 1 x 128 and 128 x 128)
BLOCK = 128
#: each operand's granularities, and the block each covers: (rows, cols) of the operand, None for the whole dimension
GRANULARITIES: dict[str, dict[str, tuple[int | None, int | None]]] = {
    "A": {"tensor": (None, None), "row": (1, None), "1x128": (1, BLOCK)},
    "B": {"tensor": (None, None), "col": (None, 1), "128x128": (BLOCK, BLOCK)},
}
#: the kernel arguments of the scales: each grid's address, and its stored rows' length (elements, padding included)
SCALE_ARGS = ("scale_a", "scale_b", "ld_scale_a", "ld_scale_b")
#: INT8 inputs are drawn in [-INT8_MAX, INT8_MAX] (symmetric, as quantised INT8 is): |C| <= K INT8_MAX^2
INT8_MAX = 127
_GRID_ORDERS = {"A": ("MxK", "KxM"), "B": ("KxN", "NxK")}


@dataclass(frozen=True)
class Scales:
    """An FP8 kernel's scales: each operand's granularity (a key of :data:`GRANULARITIES`), their type, each grid's
    stored order, and the byte multiple each stored row of a grid is padded to (1: none)."""

    A: str
    B: str
    type: str = "fp32"
    A_stored: str = "MxK"
    B_stored: str = "KxN"
    align: int = 1

    @property
    def itemsize(self) -> int:
        return SCALE_DTYPES[self.type].itemsize

    def granularity(self, operand: str) -> str:
        return getattr(self, operand)

    def block(self, operand: str, shape: Shape) -> tuple[int, int]:
        """The rows and columns of ``operand`` (logical) that one scale covers."""
        rows, cols = GRANULARITIES[operand][self.granularity(operand)]
        full = tuple(getattr(shape, d) for d in LOGICAL[operand])
        return (rows or full[0], cols or full[1])

    def grid(self, operand: str, shape: Shape) -> tuple[int, int]:
        """The logical grid of ``operand``'s scales: one per block, rows and columns."""
        (br, bc), dims = self.block(operand, shape), [getattr(shape, d) for d in LOGICAL[operand]]
        return -(-dims[0] // br), -(-dims[1] // bc)

    def transposed(self, operand: str) -> bool:
        """Whether ``operand``'s grid is stored in its second order (A's "KxM", B's "NxK")."""
        return getattr(self, f"{operand}_stored") != _GRID_ORDERS[operand][0]

    def stored_grid(self, operand: str, shape: Shape) -> tuple[int, int]:
        """The grid's rows and columns as stored."""
        rows, cols = self.grid(operand, shape)
        return (cols, rows) if self.transposed(operand) else (rows, cols)

    def ld(self, operand: str, shape: Shape) -> int:
        """Elements from one stored row of the grid to the next: its columns, padded to ``align`` bytes."""
        cols, per = self.stored_grid(operand, shape)[1], max(1, self.align // self.itemsize)
        return -(-cols // per) * per

    def describe(self) -> str:
        """The scales in a few words: "A 1x128 (stored KxM), B 128x128, fp32"."""
        parts = []
        for op in "AB":
            stored = getattr(self, f"{op}_stored")
            order = f" (stored {stored})" if self.transposed(op) else ""
            parts.append(f"{op} {self.granularity(op)}{order}")
        pad = f", rows padded to {self.align} bytes" if self.align > 1 else ""
        return f"{', '.join(parts)}, {self.type}{pad}"


_EXAMPLE = 'e.g. scales = { A = "1x128", B = "128x128", type = "fp32", stored = { A = "KxM" }, align = 16 }'


def read_scales(path: str, line: int, value: Any, fp8: bool, kind: str, args: tuple[str, ...]) -> Scales | None:
    """The header's ``scales`` table, checked (``fp8``: the kernel's dtypes are FP8, which need one; a ``.cu`` kernel
    takes ``scale_a`` and ``scale_b``). None for a kernel without scales."""

    def fail(message: str) -> None:
        raise KernelFileError(path, message, line=line, key="scales")

    if value is None:
        if fp8:
            fail(f"an FP8 kernel declares how its operands are scaled, {_EXAMPLE}")
        taken = [a for a in args if a in SCALE_ARGS]
        if taken:
            raise KernelFileError(
                path, f"{taken[0]} is an FP8 kernel's scale; this kernel's dtypes take none", line=line, key="args"
            )
        return None
    if not fp8:
        fail("only FP8 kernels (dtypes fp8_e4m3, fp8_e5m2) take scales")
    if not isinstance(value, Mapping):
        fail(f"expected a table, {_EXAMPLE}")
    unknown = set(value) - {"A", "B", "type", "stored", "align"}
    if unknown:
        fail(f"unknown key {sorted(unknown)[0]!r}; expected A, B, type, stored and align, {_EXAMPLE}")
    found: dict[str, Any] = {}
    for op in "AB":
        choices = GRANULARITIES[op]
        if value.get(op) not in choices:
            named = ", ".join(map(repr, choices))
            fail(f"{op}: expected one of {named} (the granularity of its scales), got {value.get(op)!r}")
        found[op] = value[op]
    found["type"] = value.get("type", "fp32")
    if found["type"] not in SCALE_DTYPES:
        fail(f"type: expected one of {', '.join(map(repr, SCALE_DTYPES))}, got {found['type']!r}")
    stored = value.get("stored", {})
    if not isinstance(stored, Mapping) or set(stored) - {"A", "B"}:
        fail(f'stored: expected a table of operand = stored shape of its grid, e.g. {{ A = "KxM" }}, got {stored!r}')
    for op, order in stored.items():
        if order not in _GRID_ORDERS[op]:
            fail(f"stored: {op}'s grid is stored {' or '.join(map(repr, _GRID_ORDERS[op]))}, got {order!r}")
        found[f"{op}_stored"] = order
    align = value.get("align", 1)
    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or align & (align - 1) or align > 256:
        fail(f"align: the bytes each stored row of a grid is padded to, a power of two up to 256, got {align!r}")
    if kind == "cu":
        for arg in ("scale_a", "scale_b"):
            if arg not in args:
                raise KernelFileError(path, f"an FP8 kernel takes its scales: add {arg} to args", line=line, key="args")
    return Scales(**found, align=align)


def int8_overflow(k: int) -> str | None:
    """Why an INT8 case of inner size ``k`` is not run (its int32 accumulation could overflow: K 127^2 >= 2^31), or
    None."""
    if k * INT8_MAX * INT8_MAX < 2**31:
        return None
    most = (2**31 - 1) // (INT8_MAX * INT8_MAX)
    return f"int8 inputs: K * 127^2 = {k * INT8_MAX * INT8_MAX} reaches 2^31, past int32's accumulation (K <= {most})"
