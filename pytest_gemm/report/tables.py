"""The end-of-run timing tables: one per dtype, the GPU and its clocks on top, sized to the terminal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ..records.case_record import CaseRecord, CompileRecord, max_sm_clock, nvml_values
from ..records.request import TIMERS
from ..records.verdicts import NOT_CONFIRMED, REFERENCE_MOVED, SOURCE_CHANGED, GateVerdict, Stop
from .names import kernel_key, kernel_labels
from .shape_matrix import shape_matrix
from .style import kernel_base

__all__ = [
    "BATCH_VARIANT_FLAG",
    "COLUMNS",
    "CONDENSED",
    "NO_GRAPH_FLAG",
    "NUMERIC",
    "UNCHECKED_STREAMS",
    "autotune_lines",
    "cells",
    "compile_table",
    "condensed",
    "dtype_label",
    "format_time",
    "gate_tally",
    "gpu_line",
    "launch_bound",
    "notable",
    "row_flags",
    "timer_names",
    "timing_tables",
]


#: what the gate says of the timed cases it leaves alone (records.case_record.CaseRecord.unchecked_streams)
UNCHECKED_STREAMS = (
    "timed case(s) of Python kernels whose launches CUPTI could not check for work on other streams, which CUDA "
    "events cannot see"
)
#: the flag of a timed case whose rows of C differed at a smaller M (docs/verification.md#batch-invariance)
BATCH_VARIANT_FLAG = "rows vary with M"
#: the flag of a timed case whose launch a CUDA graph could not capture (docs/verification.md#cuda-graphs)
NO_GRAPH_FLAG = "no CUDA graph"


def format_time(seconds: float) -> str:
    """A duration with 4 significant digits in s, ms or us."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-6:.4g} us"


def dtype_label(dtype: str, accumulate: str = "") -> str:
    """A dtype as tables show it, with the accumulation its kernel declares: ``fp16 (fp16 acc)``; such
    cases are timed against cuBLAS accumulating the same way, so they get tables of their own."""
    return f"{dtype} ({accumulate} acc)" if accumulate else dtype


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def notable(record: CaseRecord) -> bool:
    """Whether a timed case's verdicts say more than that it passed: wrong, suspicious, regressed, improved,
    unstable, or throttled (how its timing stopped, a hot L2, or a first run's new cases are no news)."""
    gate = record.gate
    moved = gate is not None and gate.verdict not in (GateVerdict.SAME, GateVerdict.NEW)
    return bool(record.verdict.flag or record.suspicious or moved or record.throttle)


def launch_bound(record: CaseRecord) -> bool:
    """Whether the host takes longer to make a Python kernel's launch call than the GPU to run it."""
    return record.host_s is not None and record.host_s > record.median_s


def row_flags(record: CaseRecord) -> str:
    """Short marks for what makes a row worth a second look."""
    flags = [record.verdict.flag] if record.verdict.flag else []
    if record.suspicious and record.verdict.flag != "SUSPICIOUS":
        flags.append("SUSPICIOUS")
    gate = record.gate
    if gate is not None:
        if gate.verdict == GateVerdict.REGRESSED:
            flags.append(f"REGRESSED {100 * (gate.change or 0):+.1f}%")
        elif gate.verdict == GateVerdict.IMPROVED:
            flags.append(f"improved {100 * (gate.change or 0):+.1f}%")
        elif gate.verdict in (GateVerdict.NEW, GateVerdict.UNSTABLE):
            flags.append(str(gate.verdict))
        if SOURCE_CHANGED in gate.notes:
            flags.append("source changed")
        if any(note.startswith(REFERENCE_MOVED) for note in gate.notes):
            flags.append("cuBLAS moved")
        if NOT_CONFIRMED in gate.notes:
            again = 100 * (gate.confirmed_change or 0)
            flags.append(f"{NOT_CONFIRMED} {100 * (gate.change or 0):+.1f}% then {again:+.1f}%")
    if record.unchecked_streams:
        flags.append("not gated")
    if record.persisting_l2:
        flags.append("persisting L2 reset")
    if record.batch_invariant is False:
        flags.append(BATCH_VARIANT_FLAG)
    if record.graph_refused:
        flags.append(NO_GRAPH_FLAG)
    if launch_bound(record):
        flags.append("launch-bound")
    if record.throttle:
        flags.append("throttled")
    if record.stop in (Stop.TIME_CAP, Stop.CLOCK_RESOLUTION):
        flags.append(record.stop)
    if record.cache == "hot":
        flags.append("hot L2")
    if record.peer != "cuBLAS":  # its "% cuBLAS" is of this peer
        flags.append(f"vs {record.peer}")
    if record.library_gemm:  # its time is a library's GEMM (docs/verification.md#library-gemms)
        flags.append(f"library GEMM ({record.library_gemm})")
    return ", ".join(flags)


def _clock_range(records: Iterable[CaseRecord], key: str) -> str:
    values = nvml_values(records, key)
    if not values:
        return "?"
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}-{high}"


def gpu_line(gpu: dict[str, Any], rows: list[CaseRecord]) -> str:
    """The GPU, its software and the clocks seen while timing."""
    if not gpu:
        return "GPU: unknown"
    parts = [str(gpu.get("name", "GPU"))]
    if gpu.get("sm_count"):
        parts.append(f"{gpu['sm_count']} SMs")
    max_clock = max_sm_clock(gpu)
    top = f" (max {max_clock:g})" if max_clock else ""
    parts.append(f"SM clock {_clock_range(rows, 'sm_clock_mhz')} MHz while timing{top}")
    parts.append(f"memory clock {_clock_range(rows, 'mem_clock_mhz')} MHz")
    if gpu.get("driver_version"):
        parts.append(f"driver {gpu['driver_version']}")
    if gpu.get("cublas_version"):
        parts.append(f"cuBLAS {gpu['cublas_version']}")
    if gpu.get("nvml") is False:
        parts.append(f"no NVML ({gpu.get('nvml_reason', 'unavailable')})")
    return ", ".join(parts)


#: the columns of a timed case's row, and those that hold numbers (right-aligned)
COLUMNS = ("kernel", "shape", "median", "host", "TFLOP/s", "% cuBLAS", "% peak", "noise", "n", "flags")
NUMERIC = frozenset({"median", "host", "TFLOP/s", "% cuBLAS", "% peak", "noise", "n"})
#: the columns of the condensed table (the terminal's at default verbosity)
CONDENSED = ("kernel", "shape", "median", "TFLOP/s", "% cuBLAS", "flags")
_MIN_KERNEL = 10
_DROPPED_FIRST = ("% peak", "host")


def cells(row: CaseRecord, label: str | None = None) -> dict[str, str]:
    """One timed case's row as text, by column (:data:`COLUMNS`): the terminal's table and the HTML page's. ``label``:
    its kernel's, from :func:`.names.kernel_labels` of the run (default: its ``name[variant]``)."""
    return {
        "kernel": (label or row.kernel) + (f" {row.ab}" if row.ab else ""),
        "shape": row.shape.id,
        "median": format_time(row.median_s),
        "host": "-" if row.host_s is None else format_time(row.host_s),
        "TFLOP/s": f"{row.tflops:.2f}",
        "% cuBLAS": _pct(row.pct_cublas),
        "% peak": _pct(row.pct_peak),
        "noise": f"{100 * row.noise:.2f}%",
        "n": str(row.samples),
        "flags": row_flags(row),
    }


def gate_tally(records: Iterable[CaseRecord]) -> str:
    """How many cases got each gate verdict (``3 regressed, 0 improved, ...``); '' when none was gated."""
    verdicts = [r.gate.verdict for r in records if r.gate is not None]
    return ", ".join(f"{verdicts.count(v)} {v}" for v in GateVerdict) if verdicts else ""


def _rest_width(widths: dict[int, int], columns: list[int]) -> int:
    """Width of every column but the first, with the two-space gaps."""
    return sum(widths[i] for i in columns[1:]) + 2 * (len(columns) - 1)


def _group(row: CaseRecord) -> tuple[str, str, str, Any]:
    """A kernel (its file and name, whatever the variant), dtype and shape: one row of the condensed table."""
    return row.file, row.kernel.split("[")[0], dtype_label(row.dtype, row.accumulate), row.shape


def condensed(rows: Sequence[CaseRecord]) -> list[CaseRecord]:
    """One row per kernel, dtype and shape: its fastest variant's alpha = 1, beta = 0 case (else its fastest case),
    in run order. What the others say is not lost: :func:`timing_tables` counts their notable flags on the row."""
    groups: dict[tuple[str, str, str, Any], list[CaseRecord]] = {}
    for row in rows:
        groups.setdefault(_group(row), []).append(row)
    return [min([r for r in group if not r.ab] or group, key=lambda r: r.ratio) for group in groups.values()]


def _table(table: list[list[str]], width: int, names: Sequence[str] = COLUMNS) -> list[str]:
    """Rows of cells (:data:`COLUMNS`) as aligned lines within ``width``, of the columns ``names``: "host" only where
    some row has a host time; "% peak" goes first, then "host", then the kernel column is shortened (with a trailing
    '~')."""
    columns = [COLUMNS.index(name) for name in names]
    host = COLUMNS.index("host")
    if host in columns and all(line[host] == "-" for line in table):  # no host times (runs saved before them)
        columns.remove(host)
    widths = {i: max(len(COLUMNS[i]), *(len(line[i]) for line in table)) for i in columns}
    for name in _DROPPED_FIRST:  # what goes when the table is too wide, before the kernel column is shortened
        if widths[0] + _rest_width(widths, columns) > width and COLUMNS.index(name) in columns:
            columns.remove(COLUMNS.index(name))
    widths[0] = max(_MIN_KERNEL, min(widths[0], width - _rest_width(widths, columns)))
    lines = []
    for line in [list(COLUMNS), *table]:
        out = []
        for i in columns:
            cell, w = line[i], widths[i]
            if len(cell) > w:
                cell = cell[: w - 1] + "~"
            out.append(cell.rjust(w) if COLUMNS[i] in NUMERIC else cell.ljust(w))
        lines.append("  ".join(out).rstrip())
    return lines


def timing_tables(rows: list[CaseRecord], gpu: dict[str, Any], width: int = 120, *, full: bool = True) -> list[str]:
    """Lines of text: a GPU line, then per dtype a table of the timed cases, in run order (``full``: every case;
    else :func:`condensed`, each row's flags saying how many of the cases it stands for are flagged)."""
    lines = [gpu_line(gpu, rows)]
    shown = rows if full else condensed(rows)
    labels = kernel_labels(rows)
    flagged: Counter[tuple[str, str, str, Any]] = Counter()
    if not full:
        seen = {id(r) for r in shown}
        flagged.update(_group(r) for r in rows if notable(r) and id(r) not in seen)
    for dtype in sorted({dtype_label(row.dtype, row.accumulate) for row in shown}):
        mine = [r for r in shown if dtype_label(r.dtype, r.accumulate) == dtype]
        matrix = None if full else shape_matrix(mine, lambda r: cells(r, labels[kernel_key(r)]),
                                                lambda r: flagged[_group(r)], width)  # fmt: skip
        if matrix is not None:  # a row per kernel, a column per shape
            lines += ["", f"{dtype}:", *matrix]
            continue
        table = []
        for row in mine:
            line = cells(row, labels[kernel_key(row)])
            more = flagged[_group(row)]
            if more:
                line["flags"] = ", ".join(filter(None, (line["flags"], f"{more} more flagged")))
            table.append(list(line.values()))
        lines += ["", f"{dtype}:", *_table(table, width, COLUMNS if full else CONDENSED)]
    total = sum(row.timing_s for row in rows)
    lines.append("")
    lines.append(f"{len(rows)} case(s) timed in {total:.1f} s (warm-up, timing and re-verification).")
    fresh = [row for row in rows if row.fresh_inputs]
    if fresh:
        checked = sum(row.checked_outputs for row in fresh)
        lines.append(
            f"{len(fresh)} of them with inputs of their own for each timed launch; {checked} timed output(s) checked "
            "besides each case's last"
        )
    measured = [row.batch_invariant for row in rows if row.batch_invariant is not None]
    if measured:
        lines.append(
            f"batch invariance: {measured.count(True)} case(s) gave the same rows of C at a smaller M, bit for bit; "
            f"{measured.count(False)} did not ({BATCH_VARIANT_FLAG})"
        )
    graphs = [row.graph_refused for row in rows if row.graph_refused is not None]
    if graphs:
        refused = Counter(why for why in graphs if why)
        said = "; ".join(f"{count}: {why}" for why, count in refused.most_common(2))
        lines.append(
            f"CUDA graphs: {graphs.count('')} case(s) captured into one and replayed right; {sum(refused.values())} "
            f"could not be captured ({NO_GRAPH_FLAG}{': ' + said if said else ''})"
        )
    notes = Counter((row.timer_asked, row.timer_note) for row in rows if row.timer_note)
    for (asked, note), count in notes.items():
        lines.append(f"{count} case(s) timed with {TIMERS['events']}, not {TIMERS.get(asked, asked)}: {note}")
    unchecked = Counter(row.unchecked_streams for row in rows if row.unchecked_streams)
    for why, count in unchecked.items():
        lines.append(f"{count} {UNCHECKED_STREAMS}: not gated, no speed claim ({why})")
    if any(map(launch_bound, rows)):
        lines.append(
            "launch-bound: the host takes longer to make the launch call (host) than the GPU to run it (median); "
            "called in a loop, such a kernel runs at the host's pace"
        )
    return lines + autotune_lines(rows, full=full)


def autotune_lines(rows: Sequence[CaseRecord], *, full: bool = True, most: int = 12) -> list[str]:
    """What each autotuned Triton kernel chose, by kernel and shape (the first ``most`` lines unless ``full``)."""
    chosen: dict[tuple[str, str], list[str]] = {}
    labels = kernel_labels(rows)
    for row in rows:
        for choice in row.autotuned:
            chosen.setdefault((kernel_base(labels[kernel_key(row)]), choice), []).append(row.shape.id)
    lines = [f"autotuned: {kernel} chose {choice} at {', '.join(dict.fromkeys(shapes))}"
             for (kernel, choice), shapes in chosen.items()]  # fmt: skip
    if not full and len(lines) > most:
        lines = [*lines[:most], f"autotuned: {len(lines) - most} more choice(s) (-v: all)"]
    return lines


def timer_names(rows: Iterable[CaseRecord]) -> str:
    """What the cases' times were measured with, in words: 'CUPTI kernel records', 'CUDA events' or both."""
    used = {row.timer for row in rows}
    return " and ".join(TIMERS.get(name, name) for name in [*TIMERS, *sorted(used - set(TIMERS))] if name in used)


def _compile_flags(row: CompileRecord) -> list[str]:
    flags = ["CANNOT LAUNCH"] if row.cannot_launch else []
    if row.spill_stores or row.spill_loads:
        flags.append("SPILLS")
    flags += [f"near the {limit} limit" for limit in row.near_limits]
    return flags


def compile_table(rows: list[CompileRecord], *, full: bool = True, near: bool = True) -> list[str]:
    """What ptxas said about each compiled kernel variant, and how many blocks fit on an SM, one line each.

    ``full``: every variant; else a summary line and the variants that cannot launch or spill, and with
    ``near`` those that sit near a launch limit too (the compile report is then all a run without a GPU shows).
    """
    cached = sum(r.from_cache for r in rows)
    head = (
        f"{len(rows) - cached} variant(s) compiled by NVRTC, {cached} found in the compile cache "
        "(pytest's cache directory; --cache-clear empties it)"
    )
    shown = rows
    if not full:
        launch, spill = sum(r.cannot_launch for r in rows), sum(bool(r.spill_stores or r.spill_loads) for r in rows)
        close = sum(bool(r.near_limits) for r in rows)
        head += f"; {launch} cannot launch, {spill} spill, {close} sit near a launch limit (-v: every variant)"
        shown = [r for r in rows if r.cannot_launch or r.spill_stores or r.spill_loads or (near and r.near_limits)]
    if not shown:
        return [head]
    width = max(len(r.file + "::" + r.kernel) for r in shown) + 2
    lines = [
        head,
        f"{'kernel':<{width}} {'arch':<8} {'regs':>5} {'spill st/ld B':>14} {'stack B':>8} {'static smem B':>14}"
        f" {'dynamic smem B':>15} {'threads':>8}  occupancy (blocks/SM, warps, bound by)",
    ]
    for row in sorted(shown, key=lambda r: (r.file, r.kernel, r.arch)):
        spills = f"{row.spill_stores}/{row.spill_loads}"
        flags = "".join(f"  {flag}" for flag in _compile_flags(row))
        occ = "-"
        if row.blocks_per_sm is not None:
            occ = f"{row.blocks_per_sm}, {row.occupancy_percent:g}%, {row.occupancy_limit}"
        lines.append(
            f"{row.file + '::' + row.kernel:<{width}} {row.arch:<8} {row.registers!s:>5} "
            f"{spills:>14} {row.stack_bytes!s:>8} {row.static_smem!s:>14} {row.dynamic_smem!s:>15}"
            f" {row.threads if row.threads is not None else 'by shape'!s:>8}  {occ}{flags}"
        )
    return lines
