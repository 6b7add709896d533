"""The misreadings of a scaled or integer GEMM, as candidates for ``judge.misread``.

Scales applied at the wrong granularity, or read from their grid in the other order, leave stripes of error 128
wide; so each is re-judged as its own candidate output: the same FP8 elements with each operand's scales taken the way
the slip takes them. A slip of granularity reads the declared grid at another block's index (A's 1 x 128 scales read
one per 128 x 128 block take the scale of row i // 128; read one per row, the first of each row's); only the blocks
whose indices stay inside the grid are tried. A grid read in the other order is its stored elements reinterpreted
(a square grid's transpose). FP8 data read as the other format (e5m2 bytes as e4m3, or the reverse) and scales
ignored (one operand's or both) are candidates too, and for INT8 an accumulation that wrapped at 16 bits.

Pure: ``xp`` is NumPy or CuPy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..records.scales import BLOCK, Scales
from ..records.shapes import Shape
from ..records.storage import LOGICAL
from ..records.verdicts import Misreading
from .scaled import dequantised, expand

__all__ = ["int_candidates", "scale_candidates"]


def _alternatives(operand: str, shape: Shape) -> dict[str, tuple[int, int]]:
    """Blocks a slip may apply an operand's scales at, by name: every granularity's, and A's 128 x 128, B's one per
    128 rows of K (an N-block index left out)."""
    rows, cols = (getattr(shape, d) for d in LOGICAL[operand])
    found = {"tensor": (rows, cols)}
    if operand == "A":
        found.update({"row": (1, cols), "1x128": (1, BLOCK), "128x128": (BLOCK, BLOCK)})
    else:
        found.update({"col": (rows, 1), "128x128": (BLOCK, BLOCK), "128xN": (BLOCK, cols)})
    return found


def _read_at(xp: Any, grid: Any, block: tuple[int, int], rows: int, cols: int) -> Any:
    """The grid's scales as a slip reads them: element (i, j) takes the grid's (i // block rows, j // block cols)."""
    r = xp.arange(rows) // block[0]
    c = xp.arange(cols) // block[1]
    return grid[r[:, None], c[None, :]]


def _reread(grid: Any, transposed: bool) -> Any:
    """A grid (logical) read from its stored elements as if stored in the other order."""
    rows, cols = grid.shape
    flat = (grid.T if transposed else grid).reshape(-1)  # its stored elements, in memory order
    return flat.reshape(rows, cols) if transposed else flat.reshape(cols, rows).T


def scale_candidates(
    xp: Any,
    values: tuple[Any, Any],
    grids: tuple[Any, Any],
    exact: tuple[Any, Any],
    scales: Scales,
    shape: Shape,
    other: tuple[Any, Any] | None = None,
) -> Iterator[tuple[Misreading, str, Any, Any]]:
    """Each misreading of an FP8 case's scales or data that applies: (its word, the block a slip reads at, the C it
    gives, the scale G of its bound). ``values`` are A's and B's FP8 elements as float64 (logical, unscaled),
    ``grids`` their scales (float64, logical), ``exact`` the operands dequantised (the truth's), ``other`` the
    elements read as the other FP8 format (NaN where a byte is NaN there; None: not tried)."""
    (qa, qb), blocks = values, [scales.block(op, shape) for op in "AB"]

    def product(x: Any, y: Any) -> tuple[Any, Any]:
        return x @ y, xp.abs(x) @ xp.abs(y)

    yield (Misreading.SCALES_IGNORED, "", *product(qa, qb))
    yield (Misreading.A_SCALES_IGNORED, "", *product(qa, exact[1]))
    yield (Misreading.B_SCALES_IGNORED, "", *product(exact[0], qb))
    for i, op in enumerate("AB"):
        grid, q = grids[i], values[i]
        pair = list(exact)
        reread = _reread(grid, scales.transposed(op)) if min(grid.shape) > 1 else grid
        if not bool((reread == grid).all()):  # a square grid equal to its transpose reads the same either way
            pair[i] = dequantised(xp, q, reread, blocks[i])
            kind = Misreading.A_SCALES_TRANSPOSED if op == "A" else Misreading.B_SCALES_TRANSPOSED
            yield (kind, "", *product(*pair))
        declared = scales.granularity(op)
        for name, block in _alternatives(op, shape).items():
            fits = all(-(-n // b) <= g for n, b, g in zip(q.shape, block, grid.shape))
            if name == declared or block == blocks[i] or not fits:
                continue
            read = _read_at(xp, grid, block, *q.shape)
            if bool((read == expand(xp, grid, blocks[i], *q.shape)).all()):  # the same scales: nothing to tell
                continue
            pair[i] = q * read
            kind = Misreading.A_SCALES_GRANULARITY if op == "A" else Misreading.B_SCALES_GRANULARITY
            yield (kind, name, *product(*pair))
    if other is not None:
        x, y = (dequantised(xp, o, g, b) for o, g, b in zip(other, grids, blocks))
        yield (Misreading.OTHER_FP8, "", *product(x, y))


def int_candidates(xp: Any, truth: Any, gscale: Any) -> Iterator[tuple[Misreading, str, Any, Any]]:
    """An INT8 case's misreading: its sums wrapped at 16 bits (an int16 accumulator), as two's complement does."""
    wrapped = (truth + 32768.0) % 65536.0 - 32768.0
    yield (Misreading.INT16_ACCUMULATION, "", wrapped, gscale)
