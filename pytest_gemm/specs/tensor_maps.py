"""TMA tensor maps that a kernel asks for in its header, and the rules the hardware sets for them.

``tensor_maps = { A = { box = [64, "BM"], swizzle = 128 } }`` together with ``A_map`` in
``args`` makes the harness pass a 128-byte ``CUtensorMap`` by value: a 2-D map of operand A
as stored (the inner dimension is the contiguous one, the outer dimension steps by ``ld``),
whose box is ``[inner, outer]`` elements and whose shared-memory copies are swizzled by 0, 32,
64 or 128 bytes. Elements outside the matrix read as zeros. ``split = 64`` makes it 3-D, the
inner dimension cut into pieces of 64 elements: dimensions ``[64, rows, cols / 64]``, the third
stepping 64 elements (the layout fast.cu's kernels load 128-byte swizzled tiles with), its box
``[inner, outer, pieces]``; ``rank`` (up to 5) adds dimensions of 1 after those, for a kernel whose
copies name more; ``pointer = true`` passes the map's address in device memory (a
``const CUtensorMap*``) instead of the map. Nothing here touches a GPU; the
driver call that encodes a map lives in :mod:`pytest_gemm.device`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Expression

__all__ = ["MAP_ARGS", "SWIZZLES", "TensorMapLayout", "TensorMapSpec", "layout_problems"]

MAP_ARGS = {"A_map": "A", "B_map": "B", "C_map": "C"}  # kernel argument -> operand it describes
SWIZZLES = (0, 32, 64, 128)
MAX_BOX = 256
MAX_RANK = 5


@dataclass(frozen=True)
class TensorMapSpec:
    """One ``tensor_maps`` entry of a header: the operand, its box (expressions over params) and swizzle."""

    operand: str
    box: tuple[Expression, ...]  # [inner, outer], or [inner, outer, pieces] with a split, in elements
    swizzle: int
    split: int = 0  # the inner dimension cut into pieces of this many elements (a 3-D map); 0: a 2-D map
    rank: int = 0  # the dimensions the map is encoded with (dimensions of 1 after the natural ones); 0: natural
    pointer: bool = False  # passed as its address in device memory, not by value

    @property
    def dims(self) -> int:
        """How many dimensions the map is encoded with."""
        return max(self.rank, 3 if self.split else 2)


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
    split: int = 0
    box_pieces: int = 1
    rank: int = 2

    def dims_and_strides(self) -> tuple[list[int], list[int], list[int]]:
        """The map's dimensions, its strides in bytes (of every dimension after the first) and its box, each of
        :attr:`rank` entries (dimensions of 1 after the natural ones)."""
        if self.split:
            dims = [self.split, self.rows, self.cols // self.split]
            strides = [self.pitch_bytes, self.split * self.itemsize]
            box = [self.box_inner, self.box_outer, self.box_pieces]
        else:
            dims, strides, box = [self.cols, self.rows], [self.pitch_bytes], [self.box_inner, self.box_outer]
        while len(dims) < self.rank:
            strides.append(strides[-1] * dims[-1])  # a dimension of 1: its stride never steps
            dims.append(1)
            box.append(1)
        return dims, strides, box

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
    if layout.split and (layout.cols % layout.split or (layout.split * layout.itemsize) % 16):
        problems.append(
            f"{op}_map's split of {layout.split} elements: the stored rows of {op} ({layout.cols} elements) must be a "
            f"whole number of pieces, each a multiple of 16 bytes, so the header should require it (e.g. "
            f'"K % {layout.split} == 0")'
        )
    sides = (("inner", layout.box_inner), ("outer", layout.box_outer), ("third", layout.box_pieces))
    for side, size in sides:
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
