"""Where the wrong elements of C came from, and a map of them: pure rules on arrays (NumPy or CuPy).

The worker gathers the evidence (bit patterns, and re-runs of the kernel with one change each);
these functions turn it into one cause per element, a short list of sources for the failure text,
and an :class:`~pytest_gemm.records.outcome.ErrorMap` for the report's heatmap. Each takes the array
module as ``xp``, so the CPU tests drive them with NumPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..records.outcome import ErrorMap, ErrorSource
from ..records.verdicts import ErrorCause
from .accuracy import TILE, tile_summary, to_host

__all__ = ["MAX_CELLS", "Evidence", "causes_of", "error_map", "error_sources", "guard_cause", "outside_cells", "some"]

MAX_CELLS = 128  # an error map has at most this many cells along each side
MAX_OUTSIDE = 2048  # an error map keeps at most this many rectangles of writes outside C

_CODES = {cause: i + 1 for i, cause in enumerate(ErrorCause)}  # 0: within the bound
_NONE = len(_CODES) + 1


def some(mask: Any) -> bool:
    """Whether any element of a boolean array is set, by a count: verification has compiled CuPy's count of a
    boolean array already, and its ``any`` over a whole array is one more kernel to JIT-compile."""
    return int(mask.sum()) > 0


@dataclass
class Evidence:
    """What the re-runs established; every mask is M x N (logical order), True where it applies.

    ``guard``: for each guard region of A, B or C (e.g. "the guard after A"), the elements that came out
    non-finite when only that region held NaN (and finite when none did). ``read_c``: the elements
    that were right once C held finite prior data (beta = 0 only; None when not re-run).
    """

    guard: dict[str, Any] = field(default_factory=dict)
    read_c: Any | None = None


_GUARDS = {"A": ErrorCause.GUARD_A, "B": ErrorCause.GUARD_B, "C": ErrorCause.GUARD_C}
_GUARDS |= {"scale_a": ErrorCause.GUARD_SCALES, "scale_b": ErrorCause.GUARD_SCALES}  # an FP8 kernel's grids
_GUARDS |= {"bias": ErrorCause.GUARD_EPILOGUE, "residual": ErrorCause.GUARD_EPILOGUE}  # a fused epilogue's inputs


def guard_cause(region: str) -> ErrorCause:
    """The cause a guard region stands for: a region of A, B or C ("the guard after A"), or of a grid of scales
    ("the guard after scale_a")."""
    return _GUARDS[region.split()[-1]]


def causes_of(xp: Any, ratio: Any, unwritten: Any | None, evidence: Evidence) -> Any:
    """One code per element (0 within the bound, else ``ErrorCause`` rank + 1); the most telling cause wins."""
    bad = ratio > 1.0
    nonfinite = ~xp.isfinite(ratio)
    codes = xp.zeros(ratio.shape, dtype=xp.int8)
    codes[bad & ~nonfinite] = _CODES[ErrorCause.OVER_BOUND]
    codes[bad & nonfinite] = _CODES[ErrorCause.ARITHMETIC]
    if unwritten is not None:
        codes[bad & unwritten] = _CODES[ErrorCause.UNWRITTEN]
    if evidence.read_c is not None:
        codes[bad & evidence.read_c] = _CODES[ErrorCause.READ_C]
    guards = (ErrorCause.GUARD_EPILOGUE, ErrorCause.GUARD_SCALES, ErrorCause.GUARD_C, ErrorCause.GUARD_B)
    guards += (ErrorCause.GUARD_A,)
    for cause in guards:  # A last: it wins where all apply
        for region, mask in evidence.guard.items():
            if guard_cause(region) is cause:
                codes[bad & mask] = _CODES[cause]
    return codes


def error_sources(xp: Any, codes: Any, evidence: Evidence, batch: int = 1) -> tuple[ErrorSource, ...]:
    """The causes present, most telling first; a guard cause is listed per region it came from (``batch``: C is a
    batch's matrices, stacked, whose tiles are counted matrix by matrix)."""
    sources = []
    for cause in ErrorCause:
        mask = codes == _CODES[cause]
        if not some(mask):
            continue
        if cause in _GUARDS.values():
            for region, region_mask in evidence.guard.items():
                mine = mask & region_mask
                if guard_cause(region) is cause and some(mine):
                    sources.append(_source(xp, mine, cause, region, batch))
                    mask = mask & ~region_mask  # an element is counted under its first region only
        else:
            sources.append(_source(xp, mask, cause, "", batch))
    return tuple(sources)


def _source(xp: Any, mask: Any, cause: ErrorCause, region: str, batch: int = 1) -> ErrorSource:
    rows = to_host(xp.nonzero(mask.any(axis=1))[0])
    cols = to_host(xp.nonzero(mask.any(axis=0))[0])
    _, n_tiles, _ = tile_summary(xp, mask, TILE, batch)
    return ErrorSource(
        cause=cause,
        count=int(mask.sum()),
        rows=(int(rows[0]), int(rows[-1])),
        cols=(int(cols[0]), int(cols[-1])),
        n_tiles=n_tiles,
        region=region,
    )


def error_map(
    xp: Any, ratio: Any, codes: Any, tile: tuple[int, int] | None = None, max_cells: int = MAX_CELLS
) -> ErrorMap:
    """Downsample to at most ``max_cells`` cells a side; each cell keeps its worst ratio and its most telling cause."""
    m, n = ratio.shape
    cell = (max(1, math.ceil(m / max_cells)), max(1, math.ceil(n / max_cells)))
    gm, gn = math.ceil(m / cell[0]), math.ceil(n / cell[1])
    finite_ratio = xp.where(xp.isfinite(ratio), ratio, 0.0)
    worst = _pool(xp, finite_ratio, cell, (gm, gn), 0.0, "max")
    ranked = xp.where(codes > 0, codes, _NONE).astype(xp.int8)
    best = _pool(xp, ranked, cell, (gm, gn), _NONE, "min")
    words = [""] + [cause.value for cause in ErrorCause] + [""]
    ratio_rows = to_host(worst).tolist()
    code_rows = to_host(best).tolist()
    return ErrorMap(
        rows=m,
        cols=n,
        cell=cell,
        ratio=tuple(tuple(float(f"{v:.3g}") for v in line) for line in ratio_rows),
        cause=tuple(tuple(words[int(c)] for c in line) for line in code_rows),
        tile=tile,
    )


def _pool(xp: Any, a: Any, cell: tuple[int, int], grid: tuple[int, int], fill: Any, how: str) -> Any:
    """Reduce each cell x cell block of ``a`` (padded with ``fill``) with max or min."""
    padded = xp.full((grid[0] * cell[0], grid[1] * cell[1]), fill, dtype=a.dtype)
    padded[: a.shape[0], : a.shape[1]] = a
    blocks = padded.reshape(grid[0], cell[0], grid[1], cell[1])
    return blocks.max(axis=(1, 3)) if how == "max" else blocks.min(axis=(1, 3))


def outside_cells(
    rc: Any, cell: tuple[int, int], max_cells: int = MAX_OUTSIDE
) -> tuple[tuple[int, int, int, int, int], ...]:
    """Writes outside C, (row, column) pairs in C's coordinates (logical order), pooled by the map's ``cell``
    into rectangles (first row, first column, rows, columns, elements).

    Each rectangle is the bounding box of the writes pooled into it, so it never covers C unless they do.
    Cells are grown by powers of two until at most ``max_cells`` (at least 4) remain, so a kernel that
    wrote the whole guard still gives a small map.
    """
    import numpy as np

    rc = np.asarray(rc, dtype=np.int64).reshape(-1, 2)
    if not len(rc):
        return ()
    size = np.array(cell, dtype=np.int64)
    while True:
        keys, inverse, counts = np.unique(np.floor_divide(rc, size), axis=0, return_inverse=True, return_counts=True)
        if len(keys) <= max(max_cells, 4):
            break
        size *= 2
    inverse = inverse.reshape(-1)
    low = np.full((len(keys), 2), np.iinfo(np.int64).max)
    high = np.full((len(keys), 2), np.iinfo(np.int64).min)
    np.minimum.at(low, inverse, rc)
    np.maximum.at(high, inverse, rc)
    return tuple(
        (int(r0), int(c0), int(r1 - r0 + 1), int(c1 - c0 + 1), int(n))
        for (r0, c0), (r1, c1), n in zip(low, high, counts, strict=True)
    )
