"""The end of a run, in one step: what the reporting process writes (the baselines, the summary file, the report)
and the exit status that follows from how pytest ended and what could not be written (:func:`finish`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..judge.verdict import claims_speed
from ..records.case_record import CaseRecord
from ..report.markdown import markdown, summary_cases
from ..runs.data import RunData
from ..runs.merge import prunable_files
from ..settings import Settings
from .gating import Recorded, write_baselines
from .ledger import RunSummary
from .pictures import Pictures
from .terminal import summary_file_text

__all__ = ["Ending", "empty_shard_line", "finish", "recordable"]


@dataclass(frozen=True)
class Ending:
    """How the run ends: its exit status, what the end of the run says beside its tables (each line with whether it
    says a failure), and what an update of the baselines wrote."""

    exit_status: int
    lines: list[tuple[str, bool]] = field(default_factory=list)
    recorded: Recorded | None = None


def empty_shard_line(shard: tuple[int, int], left_out: int) -> str:
    index, count = shard
    return (
        f"pytest-gemm: shard {index} of {count} holds none of the {left_out} selected tests "
        "(more shards than tests): nothing to run, exit status 0"
    )


def recordable(summary: RunSummary) -> list[CaseRecord]:
    """The timed cases an update records: those whose times make a speed claim (``judge.verdict.claims_speed``)."""
    return [result.timing for result in summary.tests.values() if claims_speed(result) and result.timing is not None]


def finish(
    status: int,
    summary: RunSummary,
    run: Callable[[int], RunData],
    settings: Settings,
    pictures: Pictures,
    *,
    left_out: int,
    selection_error: bool,
    rootpath: Path,
) -> Ending:
    """The reporting process's end of the run: ``status`` is pytest's exit status so far; ``run`` the run as saved,
    given the exit status it ended with;
    ``left_out`` the tests this shard left to the others; ``selection_error``: the selection left the run nothing it
    needs (a usage error). Every write that fails is said, and fails a run that would pass."""
    lines: list[tuple[str, bool]] = []
    shard = settings.shard
    if status == pytest.ExitCode.NO_TESTS_COLLECTED and shard is not None and left_out:
        status = pytest.ExitCode.OK  # a shard that holds none of the selected tests did its part
        lines.append((empty_shard_line(shard, left_out), False))
    if selection_error:
        status = pytest.ExitCode.USAGE_ERROR
    failed = False
    recorded = None
    if settings.gate.update:
        whole = dict.fromkeys(prunable_files(summary.files, sharded=shard is not None), True)
        recorded = write_baselines(settings.gate, recordable(summary), summary.gpus, whole, rootpath)
        failed |= bool(recorded.errors)
    path = settings.gate.summary
    if path is not None:
        error = summary_file_text(path, "## pytest-gemm\n\n" + markdown(summary_cases(summary.tests)))
        lines.append((error or f"pytest-gemm summary: {path}", bool(error)))
        failed |= bool(error)
    status = _failed_if(failed, status)  # the report saves the status pytest will exit with
    said = pictures.write(run(status), summary.drawn)
    lines += said
    failed |= bool(said and said[-1][1] and pictures.asked)  # the report itself could not be written
    status = _failed_if(failed, status)
    return Ending(int(status), lines, recorded)


def _failed_if(failed: bool, status: int) -> int:
    """``status``, or TESTS_FAILED where it was OK and something the run's end wrote failed."""
    return pytest.ExitCode.TESTS_FAILED if failed and status == pytest.ExitCode.OK else status
