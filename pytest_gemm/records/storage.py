"""How a kernel stores each matrix: the words a header uses for each operand's storage order.

Each operand's storage order is written as the shape of the matrix as it lies in memory, rows of contiguous
elements: A is ``"MxK"`` (row-major, the default) or ``"KxM"`` (column-major), B ``"KxN"`` or ``"NxK"`` (K-major,
as PyTorch's ``x @ W.T`` keeps its weights), C ``"MxN"`` or ``"NxM"``. Unlike BLAS's N and T letters, which mean
opposite things in row-major and column-major writing, a stored shape cannot be misread.

An order can be swept like a param: the reserved param names :data:`ORDER_FLAGS` (``B_NxK = [0, 1]``) are 1 when
the operand is stored in its second order. Every expression and the entry's template arguments may use the three
flags, whether they are swept or fixed by the header's ``storage`` key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .shapes import Shape

__all__ = ["LOGICAL", "ORDERS", "ORDER_FLAGS", "Storage"]

#: each operand's logical shape (rows, columns) by dimension name
LOGICAL = {"A": ("M", "K"), "B": ("K", "N"), "C": ("M", "N")}
#: each operand's two storage orders: the first is row-major storage of the logical matrix, the second its transpose
ORDERS = {op: (f"{r}x{c}", f"{c}x{r}") for op, (r, c) in LOGICAL.items()}
#: the flag (a param name) that says an operand is stored in its second order: A_KxM, B_NxK, C_NxM
ORDER_FLAGS = {f"{op}_{orders[1]}": op for op, orders in ORDERS.items()}


@dataclass(frozen=True)
class Storage:
    """The storage order of A, B and C, each a stored shape from :data:`ORDERS`."""

    A: str = ORDERS["A"][0]
    B: str = ORDERS["B"][0]
    C: str = ORDERS["C"][0]

    def __post_init__(self) -> None:
        """The one rule of a valid storage order (the header's ``storage`` key is read into this record)."""
        for op in "ABC":
            if self.order(op) not in ORDERS[op]:
                raise ValueError(
                    f"{op}: expected {ORDERS[op][0]!r} (row-major) or {ORDERS[op][1]!r} (stored transposed, i.e. "
                    f"column-major), the shape it has in memory; got {self.order(op)!r}"
                )

    @classmethod
    def of_layout(cls, layout: str) -> Storage:
        """The orders the ``layout`` key gives all three ("row": row-major, "col": column-major)."""
        return cls() if layout == "row" else cls(*(ORDERS[op][1] for op in "ABC"))

    def order(self, operand: str) -> str:
        return getattr(self, operand)

    def transposed(self, operand: str) -> bool:
        """Whether ``operand`` is stored as the transpose of its logical matrix (its second order)."""
        return self.order(operand) != ORDERS[operand][0]

    def stored_dims(self, operand: str) -> tuple[str, str]:
        """The dimension names of the stored rows and columns of ``operand``: ("N", "K") for B stored N x K."""
        rows, cols = self.order(operand).split("x")
        return rows, cols

    def stored_shape(self, operand: str, shape: Shape) -> tuple[int, int]:
        """Rows and columns of ``operand`` as stored, for ``shape``."""
        rows, cols = self.stored_dims(operand)
        return getattr(shape, rows), getattr(shape, cols)

    def flags(self) -> dict[str, int]:
        """The three storage flags and their values (1: stored in the operand's second order)."""
        return {flag: int(self.transposed(op)) for flag, op in ORDER_FLAGS.items()}

    def with_flags(self, values: Mapping[str, int]) -> Storage:
        """These orders with those that ``values`` (a variant's params) sweep set by their flags."""
        orders = {op: self.order(op) for op in "ABC"}
        for flag, op in ORDER_FLAGS.items():
            if flag in values:
                orders[op] = ORDERS[op][1 if values[flag] else 0]
        return Storage(**orders)

    @property
    def text(self) -> str:
        """How messages say it: ``A MxK, B NxK, C MxN``."""
        return ", ".join(f"{op} {self.order(op)}" for op in "ABC")

    @property
    def is_default(self) -> bool:
        return self == Storage()

    @classmethod
    def of_text(cls, text: str) -> Storage:
        """The orders :attr:`text` wrote ('' for the default); ValueError for anything else."""
        parts = [part.split(" ") for part in text.split(", ")] if text else []
        try:
            if any(len(part) != 2 for part in parts) or len({part[0] for part in parts}) != len(parts):
                raise ValueError(text)
            return cls(**dict(parts))
        except (TypeError, ValueError):  # an operand it does not have, or an order the operand has not
            raise ValueError(f"expected storage orders such as 'A MxK, B NxK, C MxN', got {text!r}") from None
