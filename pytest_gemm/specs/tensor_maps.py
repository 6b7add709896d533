"""TMA tensor maps that a kernel asks for in its header, and the rules the hardware sets for them.

``tensor_maps = { A = { box = [64, "BM"], swizzle = 128 } }`` together with ``A_map`` in
``args`` makes the harness pass a 128-byte ``CUtensorMap`` by value: a 2-D map of operand A
as stored (the inner dimension is the contiguous one, the outer dimension steps by ``ld``),
whose box is ``[inner, outer]`` elements and whose shared-memory copies are swizzled by 0, 32,
64 or 128 bytes. Elements outside the matrix read as zeros. Nothing here touches a GPU; the
driver call that encodes a map lives in :mod:`pytest_gemm.device`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Expression

__all__ = ["MAP_ARGS", "SWIZZLES", "TensorMapLayout", "TensorMapSpec", "layout_problems"]

MAP_ARGS = {"A_map": "A", "B_map": "B", "C_map": "C"}  # kernel argument -> operand it describes
SWIZZLES = (0, 32, 64, 128)
MAX_BOX = 256


@dataclass(frozen=True)
class TensorMapSpec:
    """One ``tensor_maps`` entry of a header: the operand, its box (expressions over params) and swizzle."""

    operand: str
    box: tuple[Expression, Expression]  # [inner, outer], in elements
    swizzle: int


@dataclass(frozen=True)
class TensorMapLayout:
    """One tensor map as it is encoded for a launch: the operand's storage and the box, in numbers."""

    operand: str
    rows: int
    cols: int
    ld: int  # elements from one stored row to the next
    itemsize: int
    box_inner: int
    box_outer: int
    swizzle: int

    @property
    def pitch_bytes(self) -> int:
        return self.ld * self.itemsize


def layout_problems(layout: TensorMapLayout) -> list[str]:
    """What keeps the driver from encoding this map, each said in the kernel author's terms."""
    op, problems = layout.operand, []
    if layout.pitch_bytes % 16:
        problems.append(
            f"the rows of {op} are {layout.ld} elements ({layout.pitch_bytes} bytes) apart; a TMA tensor map "
            'needs a multiple of 16 bytes, so the header should require it (e.g. "K % 8 == 0" for 2-byte A)'
        )
    for side, size in (("inner", layout.box_inner), ("outer", layout.box_outer)):
        if not 1 <= size <= MAX_BOX:
            problems.append(f"the {side} box size of {op}_map is {size}; TMA allows 1 to {MAX_BOX}")
    inner_bytes = layout.box_inner * layout.itemsize
    if inner_bytes % 16:
        problems.append(f"the inner box size of {op}_map is {inner_bytes} bytes; TMA needs a multiple of 16")
    if layout.swizzle and inner_bytes > layout.swizzle:
        problems.append(
            f"the inner box size of {op}_map is {inner_bytes} bytes, more than its {layout.swizzle}-byte swizzle allows"
        )
    return problems
