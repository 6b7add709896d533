"""The terminal's timing table at default verbosity, where it fits: per dtype, one row per kernel and one column per
shape, each cell the median and % of cuBLAS of the kernel's fastest variant there (alpha = 1, beta = 0:
:func:`.tables.condensed`), then the flags of the cases the row stands for: once where every shape of the row has it,
else after its shape (``4096x4096x4096: REGRESSED +20.0%``). ``-v`` shows every case, a row each."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..records.case_record import CaseRecord
from .style import kernel_base

__all__ = ["shape_matrix"]


def shape_matrix(
    shown: Sequence[CaseRecord],
    text: Callable[[CaseRecord], dict[str, str]],
    more: Callable[[CaseRecord], int],
    width: int,
) -> list[str] | None:
    """The lines of one dtype's table (``shown``: its condensed rows, in run order; ``text``: a row's cells by column,
    as :func:`.tables.cells` gives them; ``more``: how many other cases a row stands for are flagged), or None where
    it is wider than ``width`` (the caller shows a row per kernel and shape)."""
    shapes = list(dict.fromkeys(row.shape.id for row in shown))
    said: dict[str, dict[str, str]] = {}  # each kernel's cell at each shape
    flagged: dict[str, dict[str, list[str]]] = {}  # each kernel's flags at each shape
    for row in shown:
        cells = text(row)
        kernel = kernel_base(cells["kernel"].removesuffix(f" {row.ab}") if row.ab else cells["kernel"])
        said.setdefault(kernel, {})[row.shape.id] = f"{cells['median']} {cells['% cuBLAS']:>6}"
        flagged.setdefault(kernel, {})[row.shape.id] = _flags(row, cells["flags"], more(row))
    table = [["kernel", *shapes, "flags"]]
    for kernel, at in flagged.items():
        everywhere = set.intersection(*map(set, at.values())) if len(at) > 1 else set()
        flags = [f for f in next(iter(at.values())) if f in everywhere]  # said once: every shape of the row has it
        flags += [f"{shape}: {f}" for shape, there in at.items() for f in there if f not in everywhere]
        table.append([kernel, *(said[kernel].get(shape, "-") for shape in shapes), ", ".join(flags)])
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    if sum(widths) + 2 * (len(widths) - 1) > width:
        return None
    lines = []
    for line in table:
        out = [line[0].ljust(widths[0]), *(cell.rjust(w) for cell, w in zip(line[1:-1], widths[1:-1], strict=True))]
        lines.append("  ".join([*out, line[-1]]).rstrip())
    return lines


def _flags(row: CaseRecord, flags: str, more: int) -> list[str]:
    """One shape's flags in a row: its case's, the alpha/beta case it stands for where it has no alpha = 1, beta = 0
    case, and how many other cases of that shape are flagged."""
    said = [flag for flag in flags.split(", ") if flag]
    said += [f"at {row.ab} only"] if row.ab else []
    return said + ([f"{more} more flagged"] if more else [])
