"""What the reporting process records of the run, as the session's hooks see the reports, and the frozen summary
it ends in (:class:`RunSummary`), which the end of the run, the saved run, the report and the terminal read.

For each test the ledger keeps one :class:`~pytest_gemm.records.result.CaseResult`: pytest's outcome, the first
line of its failure (or the skip reason), its seconds, and what the process that ran it made of it (its
:class:`~pytest_gemm.records.result.ItemResult`: a GEMM case's diagnosis, margin and gated timing record); each
collection error as a failed test of kind ``collect``; each kernel file's SHA-256 and whether the run selected all
of it; where the cases ran, and what the compile items reported.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..judge.verdict import unchecked
from ..records.case_record import CaseRecord, CompileRecord
from ..records.result import CaseResult, ItemResult, Kind
from ..runs.data import KernelFileRun, RunData, SessionEnd, Shards
from ..settings import Settings
from .facts import RunFacts
from .properties import facts_of, result_of

__all__ = ["RunLedger", "RunSummary", "result_settings"]


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


def _kind(report: pytest.TestReport, case: bool) -> Kind:
    if case:
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


@dataclass(frozen=True)
class RunSummary:
    """The run as the reporting process saw it, frozen at its end: every test's result in run order, each kernel
    file, the GPU models that timed cases (model -> facts), where the cases ran and what the compile items said."""

    tests: dict[str, CaseResult]
    files: dict[str, KernelFileRun]
    gpus: dict[str, dict[str, Any]]
    compiled: tuple[CompileRecord, ...] = ()
    worker_pids: frozenset[int] = frozenset()
    replaced: dict[str, int] = field(default_factory=dict)  # GPU workers replaced, by why
    worker_compiles: dict[str, int] = field(default_factory=dict)  # kernels workers compiled, and found compiled
    per_gpu: dict[str, int] = field(default_factory=dict)  # cases run on each GPU (a run on several)
    drawn: frozenset[str] = frozenset()  # failed cases whose heatmaps were drawn as they ended
    no_device: dict[str, int] = field(default_factory=dict)  # GPU cases skipped for want of a device, by reason
    declared: dict[str, tuple[str, ...]] = field(default_factory=dict)  # kernel -> its declarations, in words

    @property
    def records(self) -> list[CaseRecord]:
        """The timed cases, in run order."""
        return [result.timing for result in self.tests.values() if result.timing is not None]

    @property
    def gpu(self) -> dict[str, Any]:
        """The facts of the first GPU model that timed a case (the run's GPU on a host of one model)."""
        return next(iter(self.gpus.values()), {})

    @property
    def unchecked(self) -> list[CaseRecord]:
        """Passing timed cases whose streams were not checked: their times make no speed claim
        (``judge.verdict.unchecked``)."""
        return [result.timing for result in self.tests.values() if unchecked(result) and result.timing is not None]


class RunLedger:
    """Every test's result, every kernel file, and the run's tallies, as reports arrive."""

    def __init__(self, config: pytest.Config, settings: Settings, facts: RunFacts) -> None:
        self.config, self.settings, self.facts = config, settings, facts
        self.started = time.monotonic()
        self.tests: dict[str, CaseResult] = {}
        self.files: dict[str, KernelFileRun] = {}
        self.gpus: dict[str, dict[str, Any]] = {}
        self.compiled: list[CompileRecord] = []
        self.worker_pids: set[int] = set()
        self.replaced: Counter[str] = Counter()
        self.worker_compiles: Counter[str] = Counter()
        self.per_gpu: Counter[str] = Counter()
        self.drawn: set[str] = set()
        self.no_device: Counter[str] = Counter()
        self.declared: dict[str, tuple[str, ...]] = {}
        self.collected: int | None = None  # None under pytest-xdist: its workers collect
        self.selected: int | None = None
        self.session: pytest.Session | None = None  # set when the session starts: how it ended is read from it

    def collection_error(self, report: pytest.CollectReport) -> None:
        """A collection error is kept like a failed test (kind ``collect``): merge fails on it too."""
        where = report.nodeid or str(report.fspath)
        self.tests[where] = CaseResult("failed", first_line(report), kind="collect")

    def add(self, report: pytest.TestReport, ran: ItemResult | None = None) -> None:
        """One phase's report of a test (``ran``: the call's result, where this process made it; else its report's
        is read). A case's facts are read from its first report."""
        old = self.tests.get(report.nodeid)
        if old is None:
            case = facts_of(report)
            if case is not None:
                self._file(case.file, sha256=case.sha256, whole=case.whole)
                if case.declared:
                    self.declared[f"{case.file}::{case.kernel}"] = case.declared
            old = CaseResult("passed", kind=_kind(report, case is not None))
        outcome, message = old.outcome, old.message
        if report.failed or (report.skipped and outcome == "passed"):
            outcome = "failed" if report.failed else "skipped"
            message = message or first_line(report)
        changes: dict[str, Any] = {
            "outcome": outcome,
            "message": message,
            "duration_s": round(old.duration_s + float(getattr(report, "duration", 0.0)), 6),
        }
        if ran is None and report.when == "call":
            ran = result_of(report)
        if ran is not None:
            self._ran(report, ran, changes, old)
        self.tests[report.nodeid] = dataclasses.replace(old, **changes)

    def _ran(self, report: pytest.TestReport, ran: ItemResult, changes: dict[str, Any], old: CaseResult) -> None:
        """What the process that ran the test made of it."""
        result, worker = ran.result, ran.worker
        if worker is not None:
            changes["worker_s"] = round(old.worker_s + sum(worker.phase_s.values()), 6)
            self.worker_pids |= {worker.pid} if worker.pid else set()
            self.per_gpu.update([worker.gpu] if worker.gpu else [])
            self.replaced.update([worker.replaced] if worker.replaced else [])
            self.worker_compiles.update(compiled=worker.compiled, cached=worker.cached)
        changes.update(diagnosis=result.diagnosis, margin=result.margin, timing=result.timing)
        if result.outcome == "passed" and result.message:  # verified, not timed: why
            changes["message"] = result.message
        if ran.gpu is not None:
            self.gpus.setdefault(str(ran.gpu.get("name", "")), ran.gpu)
        if ran.heatmap:
            self.drawn.add(report.nodeid)
        if ran.no_device and report.skipped:
            self.no_device[ran.no_device] += 1
        if ran.compiled is not None:
            self.compiled.append(ran.compiled)

    def _file(self, file: str, **changes: Any) -> None:
        self.files[file] = dataclasses.replace(self.files.get(file, KernelFileRun()), **changes)

    def summary(self) -> RunSummary:
        """The run so far, frozen."""
        return RunSummary(
            tests=dict(self.tests),
            files=dict(self.files),
            gpus=dict(self.gpus),
            compiled=tuple(self.compiled),
            worker_pids=frozenset(self.worker_pids),
            replaced=dict(self.replaced),
            worker_compiles=dict(self.worker_compiles),
            per_gpu=dict(self.per_gpu),
            drawn=frozenset(self.drawn),
            no_device=dict(self.no_device),
            declared=dict(self.declared),
        )

    def _ended(self, exit_status: int | None) -> SessionEnd | None:
        if self.session is None:
            return None
        ran = sum(1 for result in self.tests.values() if result.kind != "collect")
        maxfail = int(self.config.getoption("maxfail", 0) or 0)
        status = int(self.session.exitstatus) if exit_status is None else exit_status
        return SessionEnd(status, self.collected, self.selected, ran, maxfail)

    def run(self, summary: RunSummary, exit_status: int | None = None) -> RunData:
        """The run as a saved run holds it (``exit_status``: how it ended; pytest's so far when not given)."""
        shard = self.settings.shard
        return RunData(
            gpu=summary.gpu,
            tests=dict(summary.tests),
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            command=shlex.join(["pytest", *self.config.invocation_params.args]),
            version=__version__,
            settings=result_settings(self.settings, self.facts.timed, self.config.rootpath),
            shard=Shards((shard[0],), shard[1]) if shard else None,
            files=dict(summary.files),
            wall_s=round(time.monotonic() - self.started, 3),
            gpus=summary.gpus if len(summary.gpus) > 1 else {},
            session=self._ended(exit_status),
        )
