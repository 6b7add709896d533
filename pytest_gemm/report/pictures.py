"""The run's charts: throughput against size per dtype, % of cuBLAS at one size, the gate's changes.

Each function draws one PNG from case records and returns its path, or None when the run has
nothing to draw for it. Sizes sit on a log-2 axis, legends outside the axes, and every title
names the GPU and the date (see :mod:`.style`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..records.case_record import METRICS, CaseRecord, max_sm_clock
from ..records.shapes import Shape, parse_shapes
from ..records.verdicts import GateVerdict
from .names import kernel_key, kernel_labels
from .style import DTYPE_STYLE, INK, OKABE_ITO, REFERENCE, kernel_styles, new_figure, plain, save, shape_label, title
from .tables import gate_tally

__all__ = [
    "Bar",
    "gate_chart",
    "largest_shape",
    "one_shape",
    "pct_bars",
    "pct_cublas_chart",
    "tflops_chart",
    "throughput_lines",
]

_Key = tuple[str, str]  # a kernel variant's identity: names.kernel_key


def _volume(shape: Shape) -> int:
    return shape.flops


def largest_shape(records: Sequence[CaseRecord]) -> Shape | None:
    """The shape with the most multiply-adds in the run."""
    return max((r.shape for r in records), key=_volume, default=None)


def _one_per_case(records: Sequence[CaseRecord]) -> dict[tuple[_Key, Shape], list[CaseRecord]]:
    """Records by (kernel variant, shape): the alpha = 1, beta = 0 case where the run has it, else every alpha/beta
    case."""
    groups: dict[tuple[_Key, Shape], list[CaseRecord]] = {}
    for r in records:
        groups.setdefault((kernel_key(r), r.shape), []).append(r)
    return {key: [r for r in rs if not r.ab] or rs for key, rs in groups.items()}


def _ab_note(records: Sequence[CaseRecord]) -> str:
    return "alpha = 1, beta = 0 cases" if any(not r.ab for r in records) else "median over the alpha/beta cases"


def _legend_outside(ax: Any, **kwargs: Any) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False, fontsize=8.5, **kwargs)


def throughput_lines(records: Sequence[CaseRecord], dtype: str) -> dict[str, list[tuple[Shape, float]]]:
    """Each kernel variant's line in ``dtype``'s throughput chart, by its label (:func:`.names.kernel_labels` of
    ``records``): (shape, median TFLOP/s), from the smallest shape."""
    rows = [r for r in records if r.dtype == dtype]
    labels = kernel_labels(records)
    groups = _one_per_case(rows)
    shapes = sorted({r.shape for r in rows}, key=_volume)
    return {
        labels[key]: [(s, statistics.median(r.tflops for r in groups[(key, s)])) for s in shapes if (key, s) in groups]
        for key in dict.fromkeys(map(kernel_key, rows))
    }


def tflops_chart(records: Sequence[CaseRecord], dtype: str, gpu: dict[str, Any], gpu_name: str, day: str, out: Path):
    """TFLOP/s against problem size for every kernel of ``dtype``, cuBLAS and the device's peak as references."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    rows = [r for r in records if r.dtype == dtype]
    if not rows:
        return None
    chosen = [r for case in _one_per_case(rows).values() for r in case]
    lines = throughput_lines(records, dtype)
    shapes = sorted({r.shape for r in rows}, key=_volume)
    size = {s: _volume(s) ** (1 / 3) for s in shapes}
    styles = kernel_styles(list(lines))
    fig = new_figure(11.5, 6.0)
    ax = fig.add_subplot()
    cublas = [statistics.median(r.cublas_tflops for r in chosen if r.shape == s) for s in shapes]
    ax.plot([size[s] for s in shapes], cublas, color=REFERENCE, linewidth=5, alpha=0.8, label="cuBLAS", zorder=1)
    for label, points in lines.items():
        ax.plot([size[s] for s, _ in points], [v for _, v in points], label=plain(label), zorder=3, **styles[label])
    peaks = [r.peak_tflops for r in rows if r.peak_tflops]
    if peaks:
        peak = max(peaks)
        clock = max_sm_clock(gpu)
        how = f", {gpu['sm_count']} SMs at {clock:g} MHz" if gpu.get("sm_count") and clock else ""
        ax.axhline(peak, color=INK, linestyle=(0, (6, 3)), linewidth=1.4, label=f"device peak {peak:.4g} TFLOP/s{how}")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([size[s] for s in shapes]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks([size[s] for s in shapes], [shape_label(s) for s in shapes], rotation=30 if len(shapes) > 5 else 0)
    ax.set_xlim(min(size.values()) / 1.25, max(size.values()) * 1.25)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlabel("problem size (M·N·K)^(1/3), log₂ axis; ticks name the shape M×N×K")
    ax.set_ylabel("TFLOP/s (2·M·N·K / median device time), log axis")
    ax.grid(True, which="both", color="#e4e4e4", linewidth=0.7)
    _legend_outside(ax, ncols=2 if len(lines) > 22 else 1)
    title(fig, ax, f"{dtype} GEMM throughput against problem size", gpu_name, day, _ab_note(rows) + "; cold L2")
    return save(fig, out)


class Bar(NamedTuple):
    """One kernel variant's bar in the % of cuBLAS chart: its dtype, label, median % and 95% interval."""

    dtype: str
    label: str
    value: float
    low: float
    high: float


def pct_bars(records: Sequence[CaseRecord], shape: Shape) -> list[Bar]:
    """The bars of the % of cuBLAS chart at ``shape``, one per kernel variant (labelled by
    :func:`.names.kernel_labels` of ``records``) and dtype, grouped by dtype in run order."""
    rows = [r for r in records if r.shape == shape]
    labels = kernel_labels(records)
    bars = []
    for dtype in dict.fromkeys(r.dtype for r in rows):
        for (key, _), case in _one_per_case([r for r in rows if r.dtype == dtype]).items():
            values = [r.pct_cublas for r in case]
            pick = case[0] if len(case) == 1 else None
            low, high = pick.pct_cublas_ci if pick else (min(values), max(values))
            bars.append(Bar(dtype, labels[key], statistics.median(values), low, high))
    return bars


def pct_cublas_chart(records: Sequence[CaseRecord], shape: Shape | None, gpu_name: str, day: str, out: Path):
    """Each kernel's speed as % of cuBLAS at one shape (default: the largest), grouped by dtype."""
    shape = shape or largest_shape(records)
    bars = pct_bars(records, shape) if shape else []
    if not bars:
        return None
    rows = [r for r in records if r.shape == shape]
    y, position, labels, gaps = [], 0.0, [], []
    for i, bar in enumerate(bars):
        if i and bar.dtype != bars[i - 1].dtype:
            position += 0.8
            gaps.append(position - 0.9)
        y.append(position)
        labels.append(plain(bar.label))
        position += 1
    fig = new_figure(11.0, max(3.4, 1.6 + 0.27 * len(bars)))
    ax = fig.add_subplot()
    seen = set()
    for (dtype, _, value, low, high), pos in zip(bars, y):
        colour, hatch = DTYPE_STYLE.get(dtype, (OKABE_ITO[6], "++"))
        ax.barh(pos, value, height=0.75, color=colour, hatch=hatch, edgecolor="white", linewidth=0,
                label=None if dtype in seen else plain(dtype), zorder=2)  # fmt: skip
        seen.add(dtype)
        ax.errorbar(value, pos, xerr=[[value - low], [high - value]], color=INK, linewidth=0.9, capsize=2, zorder=3)
        ax.text(high + 1, pos, f"{value:.1f}%", va="center", ha="left", fontsize=8, color=INK)
    top = max(110.0, max(b.high for b in bars) + 12)
    ax.axvline(100, color=INK, linestyle=(0, (6, 3)), linewidth=1.2, label="cuBLAS = 100%", zorder=1)
    ax.set_xlim(0, top)
    ax.set_ylim(position - 0.4, -0.6)
    ax.set_yticks(y, labels, fontsize=8.5)
    for gap in gaps:
        ax.axhline(gap, color="#bbbbbb", linewidth=0.8)
    ax.set_xlabel("% of cuBLAS's speed at the same shape and dtype (timed pair by pair)\nwhiskers: 95% interval")
    ax.grid(True, axis="x", color="#e4e4e4", linewidth=0.7)
    _legend_outside(ax)
    title(fig, ax, f"Kernels as % of cuBLAS at {shape_label(str(shape))}", gpu_name, day, _ab_note(rows))
    return save(fig, out)


_VERDICT_STYLE = {  # marker, colour, size
    GateVerdict.SAME: ("o", REFERENCE, 22),
    GateVerdict.REGRESSED: ("^", OKABE_ITO[3], 46),
    GateVerdict.IMPROVED: ("v", OKABE_ITO[2], 46),
    GateVerdict.UNSTABLE: ("D", OKABE_ITO[1], 26),
}


def gate_chart(records: Sequence[CaseRecord], gpu_name: str, day: str, out: Path, source: str = ""):
    """Each case's change of the gated metric against its baseline, one row per kernel, the threshold shaded."""
    gated = [r for r in records if r.gate is not None and r.gate.change is not None]
    if not gated:
        return None
    metric = gated[0].gate.metric  # type: ignore[union-attr]
    dtypes = list(dict.fromkeys(r.dtype for r in gated))
    kernels = sorted(dict.fromkeys((r.dtype, kernel_key(r)) for r in gated), key=lambda key: dtypes.index(key[0]))
    row = {key: i for i, key in enumerate(kernels)}
    shapes = sorted({r.shape for r in gated}, key=_volume)
    fig = new_figure(11.0, max(3.4, 1.9 + 0.25 * len(kernels)))
    ax = fig.add_subplot()
    for (dtype, key), i in row.items():
        thresholds = [r.gate.threshold for r in gated if (r.dtype, kernel_key(r)) == (dtype, key)]  # type: ignore[union-attr]
        t = 100 * max(thresholds)
        ax.fill_betweenx([i - 0.45, i + 0.45], -t, t, color="#ececec", linewidth=0, zorder=0)
    ax.fill_betweenx([], 0, 0, color="#ececec", label="within the threshold (by its size alone)")
    labelled: set[GateVerdict] = set()
    for r in gated:
        gate = r.gate
        assert gate is not None and gate.change is not None
        marker, colour, size = _VERDICT_STYLE.get(gate.verdict, ("o", INK, 22))
        offset = (shapes.index(r.shape) - (len(shapes) - 1) / 2) * (0.6 / max(len(shapes), 1))
        ax.scatter(100 * gate.change, row[(r.dtype, kernel_key(r))] + offset, marker=marker, s=size, color=colour,
                   edgecolors=INK if gate.verdict != GateVerdict.SAME else "none", linewidths=0.6, zorder=3,
                   label=None if gate.verdict in labelled else str(gate.verdict))  # fmt: skip
        labelled.add(gate.verdict)
    ax.axvline(0, color=INK, linewidth=0.8)
    labels = kernel_labels(records)
    ax.set_yticks(range(len(kernels)), [plain(f"{labels[key]} ({dtype})") for dtype, key in kernels], fontsize=8.5)
    ax.set_ylim(len(kernels) - 0.5, -0.5)
    changes = [100 * abs(r.gate.change) for r in gated]  # type: ignore[union-attr]
    reach = max(max(changes), 100 * max(r.gate.threshold for r in gated)) * 1.15  # type: ignore[union-attr]
    ax.set_xlim(-reach, reach)
    ax.set_xlabel(
        f"change of the {METRICS[metric][2]} against the baseline, % (+ is slower)\n"
        "within a row, cases from the smallest shape (top) to the largest"
    )
    ax.grid(True, axis="x", color="#e4e4e4", linewidth=0.7)
    _legend_outside(ax)
    detail = gate_tally(records) + (f"\n{source}" if source else "")
    title(fig, ax, f"The gate: {len(gated)} timed cases against their baselines", gpu_name, day, detail)
    return save(fig, out)


def one_shape(text: str) -> Shape:
    """One shape from an option's text (``1024`` or ``MxNxK``)."""
    shapes = parse_shapes(text)
    if len(shapes) != 1:
        raise ValueError(f"expected one shape, got {text!r}")
    return shapes[0]
