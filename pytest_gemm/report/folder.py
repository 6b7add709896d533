"""A report folder: every picture, ``index.html`` and ``run.json``, from one :class:`~.run_data.RunData`.

``pytest --gemm-report DIR`` and ``pytest-gemm plot RUN.json --out DIR`` both call :func:`write_report`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from .heatmap import heatmap
from .html import page
from .pictures import gate_chart, largest_shape, pct_cublas_chart, tflops_chart
from .run_data import FailedCase, RunData, run_json
from .style import shape_label

__all__ = ["Report", "chart_name", "heatmap_name", "write_report"]


@dataclass
class Report:
    """What :func:`write_report` wrote: paths relative to the folder."""

    folder: Path
    charts: list[tuple[str, str]] = field(default_factory=list)  # (path, caption)
    heatmaps: dict[str, str] = field(default_factory=dict)  # failed case's test id -> path

    @property
    def files(self) -> list[Path]:
        names = [c[0] for c in self.charts] + list(self.heatmaps.values()) + ["index.html", "run.json"]
        return [self.folder / name for name in names]


def chart_name(dtype: str) -> str:
    """The throughput chart of ``dtype``, relative to the report folder."""
    return f"tflops-{dtype}.png"


def heatmap_name(case: FailedCase) -> str:
    """A failed case's heatmap, relative to the report folder: readable, and unique per test id."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", case.name).strip("_")[:80]
    return f"errors/{slug}-{hashlib.sha256(case.test.encode()).hexdigest()[:8]}.png"


def write_report(
    data: RunData, out: Path, shape: str | None = None, gate_source: str = "", drawn: Collection[str] = ()
) -> Report:
    """Draw every picture of ``data`` into ``out`` and write ``index.html`` and ``run.json`` there.

    ``shape`` (MxNxK) is where the % of cuBLAS chart is drawn (default: the run's largest shape);
    ``gate_source`` says where the gate verdicts came from when they were not in the run; ``drawn``:
    the test ids of failed cases whose heatmaps this run already drew at :func:`heatmap_name` in ``out``.
    """
    out.mkdir(parents=True, exist_ok=True)
    report = Report(out)
    gpu, day = data.gpu_name, data.day
    for dtype in dict.fromkeys(r.dtype for r in data.records):
        if tflops_chart(data.records, dtype, data.gpu, gpu, day, out / chart_name(dtype)):
            report.charts.append((chart_name(dtype), f"{dtype}: TFLOP/s against problem size, cuBLAS and peak"))
    at = shape or largest_shape(data.records)
    if at and pct_cublas_chart(data.records, at, gpu, day, out / "pct-cublas.png"):
        report.charts.append(("pct-cublas.png", f"Each kernel as % of cuBLAS at {shape_label(at)}"))
    if gate_chart(data.records, gpu, day, out / "gate.png", gate_source):
        report.charts.append(("gate.png", "The gate: each case's change against its baseline"))
    for case in data.failures:
        name = heatmap_name(case)
        if case.test not in drawn or not (out / name).is_file():
            heatmap(case, gpu, day, out / name)
        report.heatmaps[case.test] = name
    (out / "index.html").write_text(page(data, report.charts, report.heatmaps), encoding="utf-8")
    (out / "run.json").write_text(json.dumps(run_json(data), indent=1) + "\n", encoding="utf-8")
    return report
