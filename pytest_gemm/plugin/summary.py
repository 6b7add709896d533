"""What the end of a run prints: the compile report, the timing tables, the gate, the workers, and where the
rest is, from the run's frozen summary (:class:`~.ledger.RunSummary`). At default verbosity the tables are
condensed so that a run fits on a screen; ``-v`` shows them whole.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..isolation.dispatch import GpuWorkers
from ..report.failure import calibration_line
from ..report.tables import compile_table, timer_names, timing_tables
from ..settings import Settings
from .facts import RunFacts
from .finish import Ending
from .gating import gate_lines
from .ledger import RunSummary
from .terminal import no_device_line, workers_line

__all__ = ["EndOfRun", "write"]


@dataclass(frozen=True)
class EndOfRun:
    """Everything the end of the run is printed from."""

    summary: RunSummary
    ending: Ending
    settings: Settings
    facts: RunFacts
    workers: GpuWorkers | None  # the GPU workers this process started (what became of them)
    report: Path | None  # the report folder
    lines: list[tuple[str, bool]]  # what was said to be said at the end (each with whether it says a failure)
    rootpath: Path


def _elsewhere(end: EndOfRun, timed: int) -> str:
    """Where every timed case is, when the terminal shows one row per kernel and shape."""
    places = ["-v"]
    if end.settings.gate.summary is not None:
        places.append(f"the summary {end.settings.gate.summary}")
    if end.report is not None:
        places.append(f"the report {end.report / 'index.html'}")
    return (
        "pytest-gemm: the tables show each kernel's fastest variant at each shape (alpha = 1, beta = 0), its median "
        f"and % of cuBLAS; all {timed} timed case(s): {', '.join(places)}"
    )


def _tables(end: EndOfRun, tr: Any) -> None:
    full, summary = end.facts.full_tables, end.summary
    if summary.compiled:
        tr.section("pytest-gemm compile report (ptxas)")
        # without a GPU the compile report is the run's news: it lists the variants near a limit too
        for line in compile_table(list(summary.compiled), full=full, near=not summary.worker_pids):
            tr.write_line(line)
    records = summary.records
    if not records:
        return
    tr.section(f"pytest-gemm timing (device time, {timer_names(records)})")
    width = shutil.get_terminal_size((120, 24)).columns
    for model in sorted({r.gpu for r in records}):  # a table per GPU model (mixed models time each case on one)
        mine = [r for r in records if r.gpu == model]
        for line in timing_tables(mine, summary.gpus.get(model, {}), width=width, full=full):
            tr.write_line(line)
    if not full:
        tr.write_line(_elsewhere(end, len(records)))


def _workers(end: EndOfRun, tr: Any) -> None:
    summary, now = end.summary, end.workers
    line = workers_line(set(summary.worker_pids), Counter(summary.replaced), Counter(summary.worker_compiles),
                        Counter(summary.per_gpu))  # fmt: skip
    if line:
        tr.write_line(line)
    for index, why in sorted((now.retired if now else {}).items()):
        gpu = now.gpus[index].label if now and now.gpus else f"GPU {index}"
        tr.write_line(f"pytest-gemm: {gpu} was taken out of service ({why}); the other GPUs ran its cases", red=True)
    for index, pool in enumerate(now.pools if now else []):
        if pool.lost and now is not None and index not in now.retired:  # the last GPU serving: its later cases failed
            gpu = now.gpus[index].label if index < len(now.gpus) else "the GPU"
            tr.write_line(
                f"pytest-gemm: {gpu} was lost during the run ({pool.lost}); the GPU cases after that failed", red=True
            )


def write(end: EndOfRun, tr: Any) -> None:
    """The end of the run, in the reporting process."""
    _tables(end, tr)
    summary = end.summary
    gate = gate_lines(end.settings.gate, summary.records, len(summary.unchecked), end.ending.recorded, end.rootpath)
    if gate is not None:
        tr.section(gate[0])
        for line in gate[1]:
            tr.write_line(line, red=line.startswith("error:"))
    _workers(end, tr)
    for reason, count in summary.no_device.items():
        tr.write_line(no_device_line(reason, count, ahead=False), yellow=True)
    for kernel, lines in sorted(summary.declared.items()) if end.facts.full_tables else ():  # -v; the report says it
        tr.write_line(f"pytest-gemm: {kernel} declares {'; '.join(lines)}")
    tests = summary.tests.values()
    miscalibrated = sum(r.diagnosis is not None and r.diagnosis.miscalibrated for r in tests)
    if miscalibrated:  # a calibration error: not silent, though no correct kernel fails for it
        tr.write_line(calibration_line(miscalibrated), yellow=True)
    untimed: dict[str, int] = {}  # verified, but cuBLAS has no GEMM of them to time against
    for r in tests:
        if r.kind == "case" and r.outcome == "passed" and r.timing is None and r.message:
            untimed[r.message] = untimed.get(r.message, 0) + 1
    for reason, count in untimed.items():
        tr.write_line(f"pytest-gemm: {count} case(s) verified but not timed: {reason}", yellow=True)
    facts = end.facts
    benchmarked = any(r.timing is not None and r.diagnosis is None for r in tests)
    if facts.saved_json is not None and benchmarked and not facts.benchmark_tables:  # its own line is quiet then
        tr.write_line(f"pytest-gemm: saved run (pytest-benchmark's JSON): {facts.saved_json}")
    for text, red in [*end.lines, *end.ending.lines]:
        tr.write_line(text, red=red)
