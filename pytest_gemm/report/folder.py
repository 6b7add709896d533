"""A report folder: every picture and ``index.html`` from one :class:`~pytest_gemm.runs.data.RunData`.

``pytest --gemm-report DIR`` and ``pytest-gemm plot RUN.json --out DIR`` both call :func:`write_report`. A
run's report folder also holds the run itself (``run.json``, bounded: error maps pooled); a report drawn
from a saved run names that file instead of copying it. The folder is marked as pytest-gemm's first
(``outputs.py``: its callers check before that a folder is new, empty or pytest-gemm's). Nothing is written
outside it, whatever the run's dtypes, kernel names and test ids hold (``names.py``).
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Collection, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..records.diagnosis import Diagnosis
from ..records.shapes import Shape
from ..runs.data import RunData
from ..runs.saved import run_json
from .heatmap import heatmap
from .html import page
from .names import inside
from .outputs import GATE_CHART, PAGE, PCT_CHART, RUN_FILE, chart_name, heatmap_name, mark_report_folder
from .pictures import gate_chart, largest_shape, pct_cublas_chart, tflops_chart
from .style import shape_label

__all__ = ["RUN_FILE", "Report", "chart_name", "heatmap_name", "write_report"]

_PARALLEL_FROM = 8  # heatmaps to draw from which a report draws them in several processes (when it may)


@dataclass
class Report:
    """What :func:`write_report` wrote: paths relative to the folder."""

    folder: Path
    charts: list[tuple[str, str]] = field(default_factory=list)  # (path, caption)
    heatmaps: dict[str, str] = field(default_factory=dict)  # failed case's test id -> path
    run_file: str | None = None  # RUN_FILE when the run was written beside the report

    @property
    def files(self) -> list[Path]:
        names = [c[0] for c in self.charts] + list(self.heatmaps.values()) + [PAGE]
        return [self.folder / name for name in [*names, *([self.run_file] if self.run_file else [])]]


def _draw_some(jobs: Sequence[tuple[str, Diagnosis, str, str, Path]]) -> None:
    for test, diagnosis, gpu, day, out in jobs:
        heatmap(test, diagnosis, gpu, day, out)


def _draw_all(jobs: list[tuple[str, Diagnosis, str, str, Path]], processes: int) -> None:
    """Draw heatmaps, in ``processes`` forked processes when there are enough of them (one chunk each)."""
    forks = "fork" in multiprocessing.get_all_start_methods()
    if processes < 2 or len(jobs) < _PARALLEL_FROM or not forks:
        _draw_some(jobs)
        return
    chunks = [jobs[i::processes] for i in range(processes)]
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        for done in [pool.submit(_draw_some, chunk) for chunk in chunks]:
            done.result()


def write_report(
    data: RunData,
    out: Path,
    shape: Shape | None = None,
    gate_source: str = "",
    drawn: Collection[str] = (),
    *,
    source: Path | None = None,
    processes: int = 1,
) -> Report:
    """Draw every picture of ``data`` into ``out`` and write ``index.html`` there.

    ``shape`` is where the % of cuBLAS chart is drawn (default: the run's largest shape);
    ``gate_source`` says where the gate verdicts came from when they were not in the run; ``drawn``: the test
    ids of failed cases whose heatmaps this run already drew at :func:`heatmap_name` in ``out``. ``source``: the
    saved run the report is drawn from (named on the page, not copied); without it the run is written beside
    the report as :data:`RUN_FILE`, so that it can be drawn again or merged. ``processes``: how many processes
    may draw the heatmaps (only a single-threaded caller, such as the command, may fork).

    Each file's name is made from the run's data by :mod:`.names` and placed in ``out`` by :func:`.names.inside`
    before anything is written: :class:`.names.OutsideFolderError` (an ``OSError``) when one would leave it.
    """
    records = data.records
    charts = {dtype: chart_name(dtype) for dtype in dict.fromkeys(r.dtype for r in records)}
    wrong = {test: d for test, r in data.failures.items() if (d := r.diagnosis) is not None and d.error_map is not None}
    maps = {test: heatmap_name(test) for test in wrong}
    names = [*charts.values(), PCT_CHART, GATE_CHART, *maps.values(), PAGE, RUN_FILE]
    at = {name: inside(out, name) for name in names}  # every file's place checked before anything is written
    mark_report_folder(out)
    report = Report(out)
    gpu, day = data.gpu_name, data.day
    for dtype, name in charts.items():
        if tflops_chart(records, dtype, data.gpu, gpu, day, at[name]):
            report.charts.append((name, f"{dtype}: TFLOP/s against problem size, cuBLAS and peak"))
    shown = shape or largest_shape(records)
    if shown and pct_cublas_chart(records, shown, gpu, day, at[PCT_CHART]):
        report.charts.append((PCT_CHART, f"Each kernel as % of cuBLAS at {shape_label(shown)}"))
    if gate_chart(records, gpu, day, at[GATE_CHART], gate_source):
        report.charts.append((GATE_CHART, "The gate: each case's change against its baseline"))
    report.heatmaps = maps
    jobs = [
        (test, wrong[test], gpu, day, at[name])
        for test, name in maps.items()
        if test not in drawn or not at[name].is_file()
    ]
    _draw_all(jobs, processes)
    if source is None:
        report.run_file = RUN_FILE
        at[RUN_FILE].write_text(json.dumps(run_json(data), indent=1) + "\n", encoding="utf-8")
    at[PAGE].write_text(page(data, report.charts, report.heatmaps, source), encoding="utf-8", errors="replace")
    return report
