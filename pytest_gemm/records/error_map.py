"""A wrong output's error map, pooled to a bounded size and stored as strings: each cell's worst ratio of the bound
(two characters) and its most telling cause (one letter). Part of what a GPU worker sends back (``records.outcome``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from .plain import PlainError, fields_from_plain
from .verdicts import ErrorCause

__all__ = ["CAUSE_LETTERS", "MAX_OUTSIDE_STORED", "ErrorMap"]

#: the letter of each cause in a map's stored rows ('.' within the bound): readable in the JSON itself
CAUSE_LETTERS = {
    ErrorCause.GUARD_A: "A",
    ErrorCause.GUARD_B: "B",
    ErrorCause.GUARD_C: "C",
    ErrorCause.GUARD_SCALES: "S",
    ErrorCause.GUARD_EPILOGUE: "E",
    ErrorCause.READ_C: "R",
    ErrorCause.UNWRITTEN: "U",
    ErrorCause.ARITHMETIC: "N",
    ErrorCause.OVER_BOUND: "x",
}
_WORDS = {letter: cause.value for cause, letter in CAUSE_LETTERS.items()} | {".": ""}
_RANK = {cause.value: cause.rank for cause in ErrorCause} | {"": len(ErrorCause)}
#: a ratio is stored as two characters: 0, or 10 ** ((code - _ZERO) / _STEPS) for codes 1 to 4095, so within
#: 1.2% of its value from 10^-20 to 10^20 (clamped beyond); the map's largest ratio is stored exactly beside
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_"
_STEPS, _ZERO, _TOP = 100, 2048, 64 * 64 - 1
MAX_OUTSIDE_STORED = 64  # rectangles of writes outside C a pooled map keeps


def _code(value: float) -> str:
    if not value > 0.0:
        return "00"
    code = min(_TOP, max(1, _ZERO + round(math.log10(value) * _STEPS))) if math.isfinite(value) else _TOP
    return _DIGITS[code // 64] + _DIGITS[code % 64]


@dataclass(frozen=True)
class ErrorMap:
    """Where in C a wrong output is wrong, downsampled so that the worst value of each cell wins.

    C (``rows`` x ``cols``) is cut into cells of ``cell`` = (rows, columns) elements; the grid is
    ceil(rows / cell[0]) x ceil(cols / cell[1]). ``ratio`` holds each cell's largest |error| / bound over
    its finite elements (0.0 where all are exact); ``cause`` holds each cell's most telling ErrorCause
    word (see ``ErrorCause.rank``), or "" where every element is within the bound.
    ``tile`` is the kernel's output tile (rows, columns) when the launch geometry tells it, for outlines.
    ``outside`` holds the writes that landed in the guard around C, as rectangles (first row, first column,
    rows, columns, elements written) in C's logical coordinates, as if C's storage went on past its ends: for
    a row-major C, rows below 0 before it, rows from ``rows`` on after it, columns from ``cols`` on in its
    row padding (for a column-major C the same with rows and columns exchanged).

    Stored (:meth:`to_plain_value`), a row of ratios is a string of two characters a cell and a row of
    causes a string of one letter a cell (:data:`CAUSE_LETTERS`), so a map of 64 x 64 cells takes about 16 KB.
    """

    rows: int
    cols: int
    cell: tuple[int, int]
    ratio: tuple[tuple[float, ...], ...]
    cause: tuple[tuple[str, ...], ...]
    tile: tuple[int, int] | None = None
    outside: tuple[tuple[int, int, int, int, int], ...] = ()

    @property
    def causes(self) -> tuple[ErrorCause, ...]:
        """The causes present, most telling first."""
        seen = {word for line in self.cause for word in line if word}
        return tuple(sorted((ErrorCause(w) for w in seen), key=lambda c: c.rank))

    @property
    def grid(self) -> tuple[int, int]:
        """How many cells down and across."""
        return len(self.ratio), len(self.ratio[0]) if self.ratio else 0

    def pooled(self, max_cells: int) -> ErrorMap:
        """This map with at most ``max_cells`` cells a side: whole blocks of cells pooled into one, the worst ratio
        and the most telling cause of each block kept (as if C had been pooled with the larger cells at once)."""
        down, across = self.grid
        fr, fc = max(1, math.ceil(down / max_cells)), max(1, math.ceil(across / max_cells))
        outside = _merged(self.outside, MAX_OUTSIDE_STORED, (self.rows, self.cols))
        if fr == fc == 1:
            return replace(self, outside=outside)
        blocks = [(range(i, min(i + fr, down)), range(j, min(j + fc, across))) for i in range(0, down, fr)
                  for j in range(0, across, fc)]  # fmt: skip
        width = math.ceil(across / fc)
        ratio = [max(self.ratio[i][j] for i in rs for j in cs) for rs, cs in blocks]
        cause = [min((self.cause[i][j] for i in rs for j in cs), key=_RANK.__getitem__) for rs, cs in blocks]
        return replace(
            self,
            cell=(self.cell[0] * fr, self.cell[1] * fc),
            ratio=tuple(tuple(ratio[k : k + width]) for k in range(0, len(ratio), width)),
            cause=tuple(tuple(cause[k : k + width]) for k in range(0, len(cause), width)),
            outside=outside,
        )

    def to_plain_value(self) -> dict[str, Any]:
        peak = max((v for line in self.ratio for v in line), default=0.0)
        return {
            "rows": self.rows,
            "cols": self.cols,
            "cell": list(self.cell),
            "tile": list(self.tile) if self.tile else None,
            "outside": [list(r) for r in self.outside],
            "peak": peak,
            "ratio": ["".join(_code(v) for v in line) for line in self.ratio],
            "cause": ["".join(CAUSE_LETTERS[ErrorCause(w)] if w else "." for w in line) for line in self.cause],
        }

    @classmethod
    def from_plain_value(cls, value: Any) -> ErrorMap:
        """A stored map: rows as strings (:meth:`to_plain_value`), or as lists of numbers and words (saved runs
        written before maps were stored this way). Each value is checked; a saved run holds hundreds of maps, so
        the grids are read here, not field by field."""
        if not isinstance(value, dict):
            raise PlainError(f"ErrorMap: expected an object, got {type(value).__name__}")
        data = dict(value)
        peak, ratio, cause = data.pop("peak", None), data.pop("ratio", None), data.pop("cause", None)
        head = fields_from_plain(cls, {**data, "ratio": [], "cause": []})
        _check_head(head)
        ratios, causes = _ratios(ratio, peak), _causes(cause)
        grid = (math.ceil(head.rows / head.cell[0]), math.ceil(head.cols / head.cell[1]))
        for name, rows in (("ratio", ratios), ("cause", causes)):
            if len(rows) != grid[0] or any(len(line) != grid[1] for line in rows):
                raise PlainError(f"ErrorMap.{name}: expected {grid[0]} rows of {grid[1]} cells for its size and cell")
        return replace(head, ratio=ratios, cause=causes)


_TABLE = {a + b: 0.0 if i == 0 else 10.0 ** ((i - _ZERO) / _STEPS) for i, (a, b) in
          enumerate((a, b) for a in _DIGITS for b in _DIGITS)}  # fmt: skip


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_head(emap: ErrorMap) -> None:
    """A stored map's sizes, cell, tile and writes outside C: whole numbers, the sizes at least 1."""
    if not (_positive(emap.rows) and _positive(emap.cols)):
        raise PlainError(
            f"ErrorMap: rows and cols must be whole numbers of at least 1, got {emap.rows!r}, {emap.cols!r}"
        )
    for name, pair in (("cell", emap.cell), ("tile", emap.tile or (1, 1))):
        if len(pair) != 2 or not all(_positive(v) for v in pair):
            raise PlainError(f"ErrorMap.{name}: expected two whole numbers of at least 1, got {list(pair)!r}")
    for rect in emap.outside:
        if len(rect) != 5 or not all(isinstance(v, int) and not isinstance(v, bool) for v in rect):
            raise PlainError(f"ErrorMap.outside: expected rectangles of five whole numbers, got {list(rect)!r}")


def _ratios(rows: Any, peak: Any) -> tuple[tuple[float, ...], ...]:
    """A stored map's ratios: two characters a cell, or numbers (older files)."""
    if not isinstance(rows, list):
        raise PlainError("ErrorMap.ratio: expected a list of rows")
    if all(isinstance(line, str) for line in rows):
        if any(len(line) % 2 for line in rows):
            raise PlainError("ErrorMap.ratio: a row of stored ratios has an odd number of characters")
        try:
            grid = [[_TABLE[line[k : k + 2]] for k in range(0, len(line) - 1, 2)] for line in rows]
        except KeyError as exc:
            raise PlainError(f"ErrorMap.ratio: {exc.args[0]!r} is not a stored ratio") from None
        cells = [(v, i, j) for i, line in enumerate(grid) for j, v in enumerate(line)]
        if cells and isinstance(peak, (int, float)) and math.isfinite(peak) and peak > 0:
            _, i, j = max(cells)  # the largest ratio exactly, and none above it from rounding its code
            grid = [[min(v, float(peak)) for v in line] for line in grid]
            grid[i][j] = float(peak)
        return tuple(map(tuple, grid))
    numbers = all(isinstance(line, list) for line in rows) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for line in rows for v in line
    )
    if not numbers:
        raise PlainError("ErrorMap.ratio: expected rows of stored ratios or of numbers")
    return tuple(tuple(float(v) for v in line) for line in rows)


def _causes(rows: Any) -> tuple[tuple[str, ...], ...]:
    """A stored map's causes: a letter a cell, or words (older files)."""
    if not isinstance(rows, list) or not all(isinstance(line, (str, list)) for line in rows):
        raise PlainError("ErrorMap.cause: expected a list of rows")
    words = set(_RANK)
    if all(isinstance(line, str) for line in rows):
        if any(letter not in _WORDS for line in rows for letter in line):
            raise PlainError(f"ErrorMap.cause: expected rows of {''.join(_WORDS)}")
        return tuple(tuple(_WORDS[letter] for letter in line) for line in rows)
    if any(not isinstance(line, list) or any(w not in words for w in line) for line in rows):
        raise PlainError("ErrorMap.cause: expected rows of cause words")
    return tuple(tuple(line) for line in rows)


def _merged(
    rects: tuple[tuple[int, int, int, int, int], ...], most: int, size: tuple[int, int]
) -> tuple[tuple[int, int, int, int, int], ...]:
    """Rectangles of writes outside C (of ``size`` rows and columns) merged by their corners' grid cells, growing
    the cells until at most ``most`` remain; rectangles on different sides of C never merge, so no box covers C."""
    rows, cols = size
    cell = 1
    while len(rects) > most:
        cell *= 2
        groups: dict[tuple[int, ...], list[int]] = {}
        for r, c, h, w, n in rects:
            side = (r < 0, r >= rows, c < 0, c >= cols)
            box = groups.setdefault((*side, r // cell, c // cell), [r, c, r + h, c + w, 0])
            box[0], box[1] = min(box[0], r), min(box[1], c)
            box[2], box[3], box[4] = max(box[2], r + h), max(box[3], c + w), box[4] + n
        rects = tuple((r0, c0, r1 - r0, c1 - c0, n) for r0, c0, r1, c1, n in groups.values())
    return rects
