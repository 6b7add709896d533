"""The heatmap of a wrong output: where over C the output is wrong, in units of the bound.

Each cell of the :class:`~pytest_gemm.records.outcome.ErrorMap` shows its worst |error| / bound on a
log cividis scale; a cell whose worst element has a cause of its own (read past A or B, C read
although beta = 0, unwritten, NaN or Inf from arithmetic) gets that cause's colour and hatch instead.
The worker has already pooled a large C honestly (:func:`pytest_gemm.judge.causes.error_map`: at
most ``MAX_CELLS`` cells a side, each keeping its worst element and most telling cause; a saved run's
maps are pooled further, ``runs.data.STORED_CELLS``), so every cell is drawn as it is; a cell with a
cause is drawn at least about 10 pixels wide, so that one such cell in a large matrix shows. The
kernel's tiles are outlined. The axes are placed by hand, not by a layout engine: a report of a few
hundred failed cases draws as many heatmaps.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..records.diagnosis import Diagnosis
from ..records.outcome import ErrorMap
from ..records.verdicts import ErrorCause
from .style import INK, new_figure, save, title

__all__ = ["CAUSE_STYLE", "OUTSIDE_STYLE", "heatmap"]

#: each cause that is not a plain error: colour and hatch, distinct from cividis and from each other in grey
CAUSE_STYLE = {
    ErrorCause.GUARD_A: ("#009E73", "xx"),
    ErrorCause.GUARD_B: ("#56B4E9", "++"),
    ErrorCause.GUARD_C: ("#0072B2", "--"),
    ErrorCause.GUARD_SCALES: ("#E69F00", "||"),
    ErrorCause.GUARD_EPILOGUE: ("#F0E442", "**"),
    ErrorCause.READ_C: ("#CC79A7", "\\\\"),
    ErrorCause.UNWRITTEN: ("#D55E00", "//"),
    ErrorCause.ARITHMETIC: ("#000000", ".."),
}
#: writes that landed outside C (in its guard): Tol's wine, ring hatch
OUTSIDE_STYLE = ("#882255", "oo")
_RANK = {cause.value: cause.rank for cause in ErrorCause}
_NONE = len(_RANK)  # rank of a cell within the bound


def _arrays(emap: ErrorMap) -> tuple[Any, Any]:
    """The map's worst ratio and cause rank (``_NONE``: no cause) of each cell, as NumPy arrays."""
    import numpy as np

    ratio = np.asarray(emap.ratio, dtype=float).reshape(len(emap.ratio), -1)
    ranks = np.array([[_RANK.get(w, _NONE) for w in line] for line in emap.cause], dtype=int)
    return ratio, ranks.reshape(ratio.shape)


def _runs(
    mask: Any, cell: tuple[int, int], rows: int, cols: int, least: tuple[float, float] = (0.0, 0.0)
) -> list[tuple[float, float, float, float]]:
    """Rectangles (x, y, width, height) in elements covering the True cells, merged along each row.

    Each is at least ``least`` (width, height) in elements, grown about its centre, so that one cell shows.
    """
    rects = []
    for i, line in enumerate(mask):
        j = 0
        while j < len(line):
            if not line[j]:
                j += 1
                continue
            start = j
            while j < len(line) and line[j]:
                j += 1
            y0, x0 = i * cell[0], start * cell[1]
            w, h = min(j * cell[1], cols) - x0, min((i + 1) * cell[0], rows) - y0
            grow_w, grow_h = max(0.0, least[0] - w) / 2, max(0.0, least[1] - h) / 2
            rects.append((x0 - grow_w, y0 - grow_h, w + 2 * grow_w, h + 2 * grow_h))
    return rects


def _outline_tiles(ax: Any, emap: ErrorMap, span: tuple[float, float, float, float]) -> str:
    """Draw the tile grid over ``span`` (x0, x1, y0, y1: C and what is drawn outside it); say what it is."""
    tile, what = emap.tile, "the kernel's output tiles"
    if tile is None:
        tile, what = (32, 32), "a 32×32 grid (the kernel's tile is not known)"
    step = [1, 1]
    for axis, (n, t) in enumerate(((emap.rows, tile[0]), (emap.cols, tile[1]))):
        while n / (t * step[axis]) > 64:  # keep lines at least ~8 pixels apart
            step[axis] *= 2
    kw = {"colors": "#000000", "linewidths": 0.7, "alpha": 0.45, "zorder": 4}
    x0, x1, y0, y1 = span
    dy, dx = tile[0] * step[0], tile[1] * step[1]
    ax.hlines(range(math.floor(y0 / dy) * dy, math.floor(y1) + 1, dy), x0, x1, **kw)
    ax.vlines(range(math.floor(x0 / dx) * dx, math.floor(x1) + 1, dx), y0, y1, **kw)
    every = "" if step == [1, 1] else f", every {step[0]}×{step[1]} tiles"
    return f"lines: {what}, {tile[0]}×{tile[1]}{every}"


def heatmap(test: str, case: Diagnosis, gpu_name: str, day: str, out: Path) -> Path:
    """Draw the error map of ``test``'s diagnosis to ``out`` (PNG)."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.collections import PatchCollection
    from matplotlib.colors import LogNorm
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

    emap = case.error_map
    assert emap is not None, "a diagnosis without an error map has no heatmap"
    ratio, ranks = _arrays(emap)
    cell = emap.cell
    special = {cause: ranks == cause.rank for cause in CAUSE_STYLE}
    plain = ~np.logical_or.reduce([*special.values(), np.zeros(ranks.shape, bool)])
    top = max(10.0, float(ratio.max()) if ratio.size else 10.0)
    positive = ratio[(ratio > 0) & plain]
    low = min(1e-2, float(positive.min()) if positive.size else 1e-2, top / 1e3)
    cmap = colormaps["cividis"].with_extremes(under=colormaps["cividis"](0.0), bad=(1, 1, 1, 0))
    shown = np.where(plain, np.maximum(ratio, low * 0.999), np.nan)
    tall = emap.rows / max(emap.cols, 1)
    fig = new_figure(9.0, 8.2 if 0.25 <= tall <= 4 else 6.0, layout=None)
    ax, cax = fig.add_axes((0.09, 0.2, 0.74, 0.66)), fig.add_axes((0.85, 0.24, 0.022, 0.58))
    image = ax.imshow(shown, cmap=cmap, norm=LogNorm(vmin=low, vmax=top), interpolation="nearest",
                      extent=(0, emap.cols, emap.rows, 0), aspect="equal" if 0.25 <= tall <= 4 else "auto")  # fmt: skip
    bar = fig.colorbar(image, cax=cax, extend="min")
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # plain text: no mathtext to parse
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.set_label("|error| / bound: the worst element of each cell (1 = at the bound)")
    bar.ax.axhline(1.0, color=INK, linewidth=2)
    bar.ax.text(-0.3, 1.0, "bound", transform=bar.ax.get_yaxis_transform(), ha="right", va="center", fontsize=8)
    handles = []
    for cause, mask in special.items():
        if not mask.any():
            continue
        colour, hatch = CAUSE_STYLE[cause]
        least = (emap.cols / 60, emap.rows / 60)  # about 10 pixels: one cell of a large matrix still shows
        rects = [Rectangle((x, y), w, h) for x, y, w, h in _runs(mask, cell, emap.rows, emap.cols, least)]
        ax.add_collection(PatchCollection(rects, facecolor=colour, edgecolor="white", hatch=hatch, linewidth=0,
                                          zorder=3))  # fmt: skip
        label = f"{cause}: {int(mask.sum())} cell(s)"
        handles.append(Patch(facecolor=colour, edgecolor="white", hatch=hatch + hatch, label=label))
    if ratio.size and ratio.max() > 1.0:  # ring the worst cell: alone in a large matrix it is a few pixels
        i, j = np.unravel_index(int(ratio.argmax()), ratio.shape)
        x, y = min((j + 0.5) * cell[1], emap.cols), min((i + 0.5) * cell[0], emap.rows)
        ax.plot(x, y, marker="o", markersize=16, markerfacecolor="none", markeredgecolor="#E69F00",
                markeredgewidth=2.2, linestyle="none", zorder=5)  # fmt: skip
        handles.append(
            Line2D(
                [],
                [],
                marker="o",
                markersize=10,
                markerfacecolor="none",
                markeredgecolor="#E69F00",
                markeredgewidth=2,
                linestyle="none",
                label=f"worst cell: {ratio.max():.4g}× the bound",
            )
        )
    x0, x1, y0, y1 = 0.0, float(emap.cols), 0.0, float(emap.rows)
    if emap.outside:
        x0, x1, y0, y1 = _draw_outside(ax, emap, handles)
    tiles = _outline_tiles(ax, emap, (x0, x1, y0, y1))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1, y0)
    ax.xaxis.set_major_locator(MaxNLocator(6, integer=True))  # few labels: a report draws hundreds of these
    ax.yaxis.set_major_locator(MaxNLocator(6, integer=True))
    ax.set_xlabel(f"column of C (N = {emap.cols})")
    batch = case.shape.batch  # a batch's matrices are stacked, one below the other
    ax.set_ylabel(
        f"row of C ({batch} matrices of M = {case.shape.M}, stacked)" if batch > 1 else f"row of C (M = {emap.rows})"
    )
    over = int(((ranks == ErrorCause.OVER_BOUND.rank) & plain).sum())
    handles.append(Patch(facecolor=cmap(0.95), label=f"over the bound (colour scale): {over} cell(s)"))
    fig.legend(handles=handles, loc="lower center", ncols=2, frameon=False, fontsize=8.5)
    shape = case.shape
    detail = (
        f"{case.dtype}, M={shape.M} N={shape.N} K={shape.K}{f' batch={shape.batch}' if shape.batch > 1 else ''}, "
        f"alpha={case.alpha:g}, beta={case.beta:g}\none cell = "
        f"{cell[0]}×{cell[1]} elements ({ratio.shape[0]}×{ratio.shape[1]} cells); {tiles}"
    )
    what = f"Where {test.split('::')[-1]} is wrong"
    title(fig, ax, what, gpu_name, day, detail, wrap=len(what) + len(gpu_name) > 80)  # wrapping costs: long only
    return save(fig, out, palette=True)


def _draw_outside(ax: Any, emap: ErrorMap, handles: list[Any]) -> tuple[float, float, float, float]:
    """Draw the writes that landed outside C, and C's frame; the limits (x0, x1, y0, y1) that show both."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle

    colour, hatch = OUTSIDE_STYLE
    x0, x1 = min(0, *(c for _, c, _, _, _ in emap.outside)), max(emap.cols, *(c + w for _, c, _, w, _ in emap.outside))
    y0, y1 = min(0, *(r for r, _, _, _, _ in emap.outside)), max(emap.rows, *(r + h for r, _, h, _, _ in emap.outside))
    margin = 0.03 * max(x1 - x0, y1 - y0)
    x0, x1, y0, y1 = x0 - margin, x1 + margin, y0 - margin, y1 + margin
    least = ((x1 - x0) / 60, (y1 - y0) / 60)  # about 10 pixels
    rects = []
    for r, c, h, w, _ in emap.outside:
        gw, gh = max(0.0, least[0] - w) / 2, max(0.0, least[1] - h) / 2
        rects.append(Rectangle((c - gw, r - gh), w + 2 * gw, h + 2 * gh))
    ax.add_collection(PatchCollection(rects, facecolor=colour, edgecolor="white", hatch=hatch, linewidth=0, zorder=3))
    ax.add_patch(Rectangle((0, 0), emap.cols, emap.rows, fill=False, edgecolor=INK, linewidth=1.8, zorder=6))
    ax.text(emap.cols, 0, " C ", ha="right", va="bottom", fontsize=9, color=INK)
    written = sum(n for *_, n in emap.outside)
    label = f"written outside C (its guard, as if C went on): {written} element(s)"
    handles.append(Patch(facecolor=colour, edgecolor="white", hatch=hatch + hatch, label=label))
    return x0, x1, y0, y1
