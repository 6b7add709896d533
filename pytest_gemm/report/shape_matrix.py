"""The terminal's timing table at default verbosity, where it fits: per dtype, one row per kernel and one column per
shape, each cell the median and % of cuBLAS of the kernel's fastest variant there (alpha = 1, beta = 0:
:func:`.tables.condensed`), then the flags of the cases the row stands for, each once. ``-v`` shows every case, a row
each."""

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
    kernels: dict[str, dict[str, CaseRecord]] = {}
    said: dict[str, dict[str, str]] = {}
    for row in shown:
        cells = text(row)
        kernel = kernel_base(cells["kernel"])
        kernels.setdefault(kernel, {})[row.shape.id] = row
        said.setdefault(kernel, {})[row.shape.id] = f"{cells['median']} {cells['% cuBLAS']:>6}"
    table = [["kernel", *shapes, "flags"]]
    for kernel, by_shape in kernels.items():
        rows = list(by_shape.values())
        flags = [flag for row in rows for flag in text(row)["flags"].split(", ") if flag]
        flags += [f"{row.shape.id} at {row.ab} only" for row in rows if row.ab]  # no alpha = 1, beta = 0 case there
        others = sum(map(more, rows))
        flags += [f"{others} more flagged"] if others else []
        row_cells = [said[kernel].get(shape, "-") for shape in shapes]
        table.append([kernel, *row_cells, ", ".join(dict.fromkeys(flags))])
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    if sum(widths) + 2 * (len(widths) - 1) > width:
        return None
    lines = []
    for line in table:
        out = [line[0].ljust(widths[0]), *(cell.rjust(w) for cell, w in zip(line[1:-1], widths[1:-1], strict=True))]
        lines.append("  ".join([*out, line[-1]]).rstrip())
    return lines
