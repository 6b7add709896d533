"""What the run records of each test, as the session's hooks see the reports: one judged case per test.

The session (the one plugin object) hands every report here. In the controlling process the ledger keeps,
for each test, a :class:`~pytest_gemm.records.result.CaseResult`: pytest's outcome, the first line of its
failure (or the skip reason), its seconds, a GEMM case's diagnosis, margin and (gated) timing record; each
collection error as a failed test of kind ``collect``; each kernel file's SHA-256 and whether the run
selected all of it; and how pytest ended. The saved run, the summary, the report and the terminal's
tables are all made from it.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..records.case_record import CaseRecord
from ..records.diagnosis import Diagnosis
from ..records.plain import from_plain
from ..records.result import CaseResult, Kind
from ..runs.data import KernelFileRun, RunData, SessionEnd, Shards
from ..settings import Settings
from .facts import RunFacts
from .properties import CASE, DIAGNOSIS, MARGIN, RECORD, SOURCE, UNTIMED, WHOLE_FILE, WORKER, props

__all__ = ["Ledger", "result_settings"]


def result_settings(settings: Settings, timed: bool, root: Path | None = None) -> dict[str, Any]:
    """The settings that change a case's result or verdict, named as the options are (``--gemm-NAME``).

    What only selects cases (shapes, dtypes, archs, -k) is not among them: runs that differ there
    can be merged. ``baselines`` is the baseline folder relative to ``root`` (the rootdir; absolute when
    outside it), where ``pytest-gemm merge`` looks by default.
    """
    t, g = settings.timing, settings.gate
    folder = g.folder if root is None else Path(os.path.relpath(g.folder, root))
    return {
        "seed": settings.seed,
        "timeout": settings.timeout,
        "noise": t.noise,
        "min-samples": t.min_samples,
        "max-time": t.max_time,
        "hot-cache": not t.cold_cache,
        "timer": t.timer,
        "gate-metric": g.metric,
        "threshold": g.threshold,
        "fail-new": g.fail_new,
        "fail-unstable": g.fail_unstable,
        "timed": timed,  # off with --benchmark-skip, --benchmark-disable or under pytest-xdist
        "baselines": (g.folder if folder.parts[:1] == ("..",) else folder).as_posix(),
    }


def _kind(report: pytest.TestReport) -> Kind:
    if props(report, CASE):
        return "case"
    for marker, kind in (("gemm_compile", "compile"), ("gemm_sanitize", "sanitize")):
        if marker in report.keywords:
            return kind  # type: ignore[return-value]
    return "test"


def first_line(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The skip reason, or the first line of the failure."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")[:200]
    text = report.longreprtext.strip()
    return text.splitlines()[0][:200] if text else ""


class Ledger:
    """Every test's judged result, every kernel file, and how the session ended."""

    def __init__(self, config: pytest.Config, settings: Settings, facts: RunFacts) -> None:
        self.config, self.settings, self.facts = config, settings, facts
        self.started = time.monotonic()
        self.tests: dict[str, CaseResult] = {}
        self.files: dict[str, KernelFileRun] = {}
        self.collected: int | None = None  # None under pytest-xdist: its workers collect
        self.selected: int | None = None
        self.session: pytest.Session | None = None  # set when the session starts: how it ended is read from it

    @property
    def records(self) -> list[CaseRecord]:
        """The timed cases, in run order."""
        return [result.timing for result in self.tests.values() if result.timing is not None]

    def collection_error(self, report: pytest.CollectReport) -> None:
        """A collection error is kept like a failed test (kind ``collect``): merge fails on it too."""
        where = report.nodeid or str(report.fspath)
        self.tests[where] = CaseResult("failed", first_line(report), kind="collect")

    def add(self, report: pytest.TestReport) -> None:
        """One phase's report of a test."""
        for value in props(report, WHOLE_FILE):
            self._file(value["file"], whole=bool(value["whole"]))
        for value in props(report, SOURCE):
            self._file(value["file"], sha256=str(value["sha256"]))
        old = self.tests.get(report.nodeid) or CaseResult("passed", kind=_kind(report))
        outcome, message = old.outcome, old.message
        if report.failed or (report.skipped and outcome == "passed"):
            outcome = "failed" if report.failed else "skipped"
            message = message or first_line(report)
        changes: dict[str, Any] = {
            "outcome": outcome,
            "message": message,
            "duration_s": round(old.duration_s + float(getattr(report, "duration", 0.0)), 6),
        }
        if report.when == "call":
            worker = sum(sum((w.get("phase_s") or {}).values()) for w in props(report, WORKER))
            changes["worker_s"] = round(old.worker_s + worker, 6)
            for value in props(report, DIAGNOSIS):
                changes["diagnosis"] = from_plain(Diagnosis, value)
            for value in props(report, MARGIN):
                changes["margin"] = value
            for value in props(report, UNTIMED):
                changes["message"] = value
            for value in props(report, RECORD):  # as the gate left it
                changes["timing"] = CaseRecord.from_dict(value)
        self.tests[report.nodeid] = dataclasses.replace(old, **changes)

    def _file(self, file: str, **changes: Any) -> None:
        self.files[file] = dataclasses.replace(self.files.get(file, KernelFileRun()), **changes)

    def _ended(self) -> SessionEnd | None:
        if self.session is None:
            return None
        ran = sum(1 for result in self.tests.values() if result.kind != "collect")
        maxfail = int(self.config.getoption("maxfail", 0) or 0)
        return SessionEnd(int(self.session.exitstatus), self.collected, self.selected, ran, maxfail)

    def run(self, gpu: dict[str, Any], gpus: dict[str, dict[str, Any]]) -> RunData:
        """The run as a saved run holds it (``gpu``: the first GPU's facts; ``gpus``: each model's, on several)."""
        shard = self.settings.shard
        return RunData(
            gpu=gpu,
            tests=dict(self.tests),
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            command=shlex.join(["pytest", *self.config.invocation_params.args]),
            version=__version__,
            settings=result_settings(self.settings, self.facts.timed, self.config.rootpath),
            shard=Shards((shard[0],), shard[1]) if shard else None,
            files=dict(self.files),
            wall_s=round(time.monotonic() - self.started, 3),
            gpus=gpus if len(gpus) > 1 else {},
            session=self._ended(),
        )
