"""What the end of a run prints: the compile report, the timing tables, the gate, the workers, and where the
rest is. At default verbosity the tables are condensed so that a run fits on a screen; ``-v`` shows them whole.
"""

from __future__ import annotations

import shutil
from typing import Any

from ..report.failure import calibration_line
from ..report.tables import compile_table, timer_names, timing_tables
from .terminal import no_device_line, workers_line

GemmSession = Any  # the session (plugin/session.py) that calls these: typed loosely, as its stash key is

__all__ = ["empty_shard_line", "write"]


def empty_shard_line(shard: tuple[int, int], left_out: int) -> str:
    index, count = shard
    return (
        f"pytest-gemm: shard {index} of {count} holds none of the {left_out} selected tests "
        "(more shards than tests): nothing to run, exit status 0"
    )


def _elsewhere(session: GemmSession, timed: int) -> str:
    """Where every timed case is, when the terminal shows one row per kernel and shape."""
    places = ["-v"]
    if session.settings.gate.summary is not None:
        places.append(f"the summary {session.settings.gate.summary}")
    if session.pictures.folder is not None:
        places.append(f"the report {session.pictures.folder / 'index.html'}")
    return (
        "pytest-gemm: the tables show each kernel's fastest variant at each shape (alpha = 1, beta = 0); "
        f"all {timed} timed case(s): {', '.join(places)}"
    )


def _tables(session: GemmSession, tr: Any) -> None:
    full = session.facts.full_tables
    if session.compiled:
        tr.section("pytest-gemm compile report (ptxas)")
        # without a GPU the compile report is the run's news: it lists the variants near a limit too
        for line in compile_table(session.compiled, full=full, near=not session.worker_pids):
            tr.write_line(line)
    records = session.ledger.records
    if not records:
        return
    tr.section(f"pytest-gemm timing (device time, {timer_names(records)})")
    width = shutil.get_terminal_size((120, 24)).columns
    for model in sorted({r.gpu for r in records}):  # a table per GPU model (mixed models time each case on one)
        mine = [r for r in records if r.gpu == model]
        for line in timing_tables(mine, session.gpus.get(model, {}), width=width, full=full):
            tr.write_line(line)
    if not full:
        tr.write_line(_elsewhere(session, len(records)))


def _workers(session: GemmSession, tr: Any) -> None:
    workers = workers_line(session.worker_pids, session.replaced, session.worker_compiles, session.per_gpu)
    if workers:
        tr.write_line(workers)
    now = session.started_workers
    for index, why in sorted((now.retired if now else {}).items()):
        gpu = now.gpus[index].label if now.gpus else f"GPU {index}"
        tr.write_line(f"pytest-gemm: {gpu} was taken out of service ({why}); the other GPUs ran its cases", red=True)
    for index, pool in enumerate(now.pools if now else []):
        if pool.lost and index not in now.retired:  # the last GPU serving: its later cases failed
            gpu = now.gpus[index].label if index < len(now.gpus) else "the GPU"
            tr.write_line(
                f"pytest-gemm: {gpu} was lost during the run ({pool.lost}); the GPU cases after that failed", red=True
            )


def write(session: GemmSession, tr: Any) -> None:
    """The end of the run, in the controlling process."""
    _tables(session, tr)
    gate = session.gatekeeper.summary_lines()
    if gate is not None:
        tr.section(gate[0])
        for line in gate[1]:
            tr.write_line(line, red=line.startswith("error:"))
    _workers(session, tr)
    for reason, count in session.no_device.items():
        tr.write_line(no_device_line(reason, count, ahead=False), yellow=True)
    for kernel, lines in sorted(session.declared.items()):
        tr.write_line(f"pytest-gemm: {kernel} declares {'; '.join(lines)}")
    tests = session.ledger.tests.values()
    miscalibrated = sum(r.diagnosis is not None and r.diagnosis.miscalibrated for r in tests)
    if miscalibrated:  # a calibration error: not silent, though no correct kernel fails for it
        tr.write_line(calibration_line(miscalibrated), yellow=True)
    untimed: dict[str, int] = {}  # verified, but cuBLAS has no GEMM of them to time against
    for r in tests:
        if r.kind == "case" and r.outcome == "passed" and r.timing is None and r.message:
            untimed[r.message] = untimed.get(r.message, 0) + 1
    for reason, count in untimed.items():
        tr.write_line(f"pytest-gemm: {count} case(s) verified but not timed: {reason}", yellow=True)
    facts = session.facts
    benchmarked = any(r.timing is not None and r.diagnosis is None for r in session.ledger.tests.values())
    if facts.saved_json is not None and benchmarked and not facts.benchmark_tables:  # its own line is quiet then
        tr.write_line(f"pytest-gemm: saved run (pytest-benchmark's JSON): {facts.saved_json}")
    for text, red in session.lines:
        tr.write_line(text, red=red)
