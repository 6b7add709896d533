"""How an FP8 kernel scales its operands, as a record: each operand's granularity, the scales' type, and how each
grid of scales is stored (the header's ``scales`` key, read by :mod:`pytest_gemm.specs.key_readers`).

A holds one scale for the whole matrix (``"tensor"``), one a row (``"row"``, per token) or one for each 1 x 128 block
of a row (``"1x128"``, DeepSeek-V3's activations); B one for the matrix, one a column (``"col"``, per output channel)
or one for each 128 x 128 block (``"128x128"``, its weights). The scales of an operand form a grid, one per block:
A's is ceil(M / rows) x ceil(K / cols), B's ceil(K / rows) x ceil(N / cols), with its dimensions named as the operand's
(A's grid is "M x K", B's "K x N"). A grid is stored as its operand is, by a stored shape: A's ``"MxK"`` (each row's K
blocks together, the default) or ``"KxM"`` (M-major, as TMA-fed kernels such as DeepGEMM's read it), B's ``"KxN"``
(the default) or ``"NxK"``; and ``align`` pads each stored row to a multiple of that many bytes (16 for TMA), as the
kernel's ``ld_scale_a`` and ``ld_scale_b`` say. Scales are fp32, or UE8M0: one byte, the exponent of a power of two
(2^(e - 127)). A grouped operand that is one matrix a group (each expert's B) has one grid a matrix, one after the
other, each stored so (docs/kernel-files.md#grouped-gemm).
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import SCALE_DTYPES
from .shapes import Shape
from .storage import LOGICAL

__all__ = ["BLOCK", "GRANULARITIES", "GRID_ORDERS", "MAX_ALIGN", "Scales"]

#: the side of a block of scales (DeepSeek-V3's 1 x 128 and 128 x 128)
BLOCK = 128
#: each operand's granularities, and the block each covers: (rows, cols) of the operand, None for the whole dimension
GRANULARITIES: dict[str, dict[str, tuple[int | None, int | None]]] = {
    "A": {"tensor": (None, None), "row": (1, None), "1x128": (1, BLOCK)},
    "B": {"tensor": (None, None), "col": (None, 1), "128x128": (BLOCK, BLOCK)},
}
#: each operand's grid of scales in its two stored orders, as the header names them (its first, the default)
GRID_ORDERS = {"A": ("MxK", "KxM"), "B": ("KxN", "NxK")}
#: the most bytes a stored row of a grid may be padded to (``align``, a power of two)
MAX_ALIGN = 256


@dataclass(frozen=True)
class Scales:
    """An FP8 kernel's scales: each operand's granularity (a key of :data:`GRANULARITIES`), their type, each grid's
    stored order, and the byte multiple each stored row of a grid is padded to (1: none)."""

    A: str
    B: str
    type: str = "fp32"
    A_stored: str = GRID_ORDERS["A"][0]
    B_stored: str = GRID_ORDERS["B"][0]
    align: int = 1

    def __post_init__(self) -> None:
        """The one rule of a valid ``scales`` (the header's key is read into this record): each refusal is a
        ValueError that names the table's entry at fault."""
        for op in "AB":
            granularity = self.granularity(op)
            if not isinstance(granularity, str) or granularity not in GRANULARITIES[op]:
                named = ", ".join(map(repr, GRANULARITIES[op]))
                raise ValueError(f"{op}: expected one of {named} (the granularity of its scales), got {granularity!r}")
        if not isinstance(self.type, str) or self.type not in SCALE_DTYPES:
            raise ValueError(f"type: expected one of {', '.join(map(repr, SCALE_DTYPES))}, got {self.type!r}")
        for op in "AB":
            order = getattr(self, f"{op}_stored")
            if not isinstance(order, str) or order not in GRID_ORDERS[op]:
                raise ValueError(
                    f"stored: {op}'s grid is stored {' or '.join(map(repr, GRID_ORDERS[op]))}, got {order!r}"
                )
        align = self.align
        if (
            isinstance(align, bool)
            or not isinstance(align, int)
            or align < 1
            or align & (align - 1)
            or align > MAX_ALIGN
        ):
            raise ValueError(
                f"align: the bytes each stored row of a grid is padded to, a power of two up to {MAX_ALIGN}, "
                f"got {align!r}"
            )

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
        return getattr(self, f"{operand}_stored") != GRID_ORDERS[operand][0]

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
