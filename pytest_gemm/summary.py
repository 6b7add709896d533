"""The end-of-run timing tables: one per dtype, the GPU and its clocks on top, sized to the terminal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .nvml import sampled

__all__ = ["format_time", "gpu_line", "row_flags", "timing_tables"]


def format_time(seconds: float) -> str:
    """A duration with 4 significant digits in s, ms or us."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-6:.4g} us"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def row_flags(row: dict[str, Any]) -> str:
    """Short marks for what makes a row worth a second look."""
    flags = []
    if row.get("verdict") == "wrong":
        flags.append("WRONG OUTPUT")
    if row.get("suspicious"):
        flags.append("SUSPICIOUS")
    gate = row.get("gate") or {}
    verdict, change = gate.get("verdict"), gate.get("change")
    if verdict == "regressed":
        flags.append(f"REGRESSED {100 * change:+.1f}%")
    elif verdict == "improved":
        flags.append(f"improved {100 * change:+.1f}%")
    elif verdict in ("new", "unstable"):
        flags.append(verdict)
    if any("source changed" in note for note in gate.get("notes", [])):
        flags.append("source changed")
    if any(note.startswith("reference moved") for note in gate.get("notes", [])):
        flags.append("cuBLAS moved")
    if row.get("throttle"):
        flags.append("throttled")
    if row.get("stop") == "time cap":
        flags.append("time cap")
    if row.get("cache") == "hot":
        flags.append("hot L2")
    return ", ".join(flags)


def _clock_range(rows: Iterable[dict[str, Any]], key: str) -> str:
    values = sampled(rows, key)
    if not values:
        return "?"
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}-{high}"


def gpu_line(gpu: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The GPU, its software and the clocks seen while timing."""
    if not gpu:
        return "GPU: unknown"
    parts = [str(gpu.get("name", "GPU"))]
    if gpu.get("sm_count"):
        parts.append(f"{gpu['sm_count']} SMs")
    max_clock = gpu.get("max_sm_clock_mhz") or gpu.get("cuda_max_sm_clock_mhz")
    parts.append(f"SM clock {_clock_range(rows, 'sm_clock_mhz')} MHz while timing (max {max_clock:g})")
    parts.append(f"memory clock {_clock_range(rows, 'mem_clock_mhz')} MHz")
    if gpu.get("driver_version"):
        parts.append(f"driver {gpu['driver_version']}")
    if gpu.get("cublas_version"):
        parts.append(f"cuBLAS {gpu['cublas_version']}")
    if gpu.get("nvml") is False:
        parts.append(f"no NVML ({gpu.get('nvml_reason', 'unavailable')})")
    return ", ".join(parts)


_COLUMNS = ("kernel", "shape", "median", "TFLOP/s", "% cuBLAS", "% peak", "noise", "n", "flags")
_RIGHT = {"median", "TFLOP/s", "% cuBLAS", "% peak", "noise", "n"}
_MIN_KERNEL = 10


def _cells(row: dict[str, Any]) -> list[str]:
    return [
        row["kernel"] + (f" {row['ab']}" if row.get("ab") else ""),
        row["shape"],
        format_time(row["median_s"]),
        f"{row['tflops']:.2f}",
        _pct(row.get("pct_cublas")),
        _pct(row.get("pct_peak")),
        f"{100 * row['noise']:.2f}%",
        str(row["samples"]),
        row_flags(row),
    ]


def _rest_width(widths: dict[int, int], columns: list[int]) -> int:
    """Width of every column but the first, with the two-space gaps."""
    return sum(widths[i] for i in columns[1:]) + 2 * (len(columns) - 1)


def timing_tables(rows: list[dict[str, Any]], gpu: dict[str, Any], width: int = 120) -> list[str]:
    """Lines of text: a GPU line, then per dtype a table of every timed case, in run order.

    When the table would be wider than ``width``, the "% peak" column goes first, then the
    kernel column is shortened (with a trailing '~').
    """
    lines = [gpu_line(gpu, rows)]
    for dtype in sorted({row["dtype"] for row in rows}):
        table = [_cells(row) for row in rows if row["dtype"] == dtype]
        columns = list(range(len(_COLUMNS)))
        widths = {i: max(len(_COLUMNS[i]), *(len(cells[i]) for cells in table)) for i in columns}

        if widths[0] + _rest_width(widths, columns) > width:
            columns.remove(_COLUMNS.index("% peak"))
        widths[0] = max(_MIN_KERNEL, min(widths[0], width - _rest_width(widths, columns)))
        lines.append("")
        lines.append(f"{dtype}:")
        for cells in [list(_COLUMNS), *table]:
            out = []
            for i in columns:
                cell, w = cells[i], widths[i]
                if len(cell) > w:
                    cell = cell[: w - 1] + "~"
                out.append(cell.rjust(w) if _COLUMNS[i] in _RIGHT else cell.ljust(w))
            lines.append("  ".join(out).rstrip())
    total = sum(row.get("timing_s", 0.0) for row in rows)
    lines.append("")
    lines.append(f"{len(rows)} case(s) timed in {total:.1f} s (warm-up, timing and re-verification).")
    return lines
