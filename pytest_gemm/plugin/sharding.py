"""``--gemm-shard I/N``, and what a saved run carries so that ``pytest-gemm merge`` can combine shards.

The shard is chosen from every selected test (pytest-gemm's and any other), by its id alone
(``specs/sharding.py``), after -k, -m and test ids have selected: the union of the N shards is the
unsharded run, each test in exactly one. Under pytest-xdist each xdist worker collects and picks the
same tests. The plugin object also gathers, in the controlling process, what a saved run needs to be
merged (``report/run_data.py``): each test's outcome and seconds, each collection error, each kernel
file's SHA-256 and whether the run selected all of it, the settings that change results, and how pytest
ended (its exit status, the tests collected, selected and run). A shard that holds none of the selected
tests (more shards than tests) ends with exit status 0, not 5: its job has nothing to do, and did it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..options import Settings, label
from ..report.run_data import ItemResult, KernelFileRun, SessionEnd, Shards
from ..specs.sharding import in_shard
from .items import GemmCaseItem
from .properties import CASE, SOURCE, WHOLE_FILE, WORKER

__all__ = ["LEDGER", "Sharding", "result_settings"]

#: the run's :class:`Sharding` (the report and the saved run read it)
LEDGER = pytest.StashKey["Sharding"]()


def _timed(config: pytest.Config) -> bool:
    """Whether GPU cases are timed in this run (pytest-benchmark on, and not under pytest-xdist)."""
    off = config.getoption("benchmark_skip", False) or config.getoption("benchmark_disable", False)
    return not off and config.getoption("dist", "no") == "no"


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


def _props(report: pytest.TestReport, key: str) -> list[Any]:
    return [value for name, value in report.user_properties if name == key]


def _kind(report: pytest.TestReport) -> str:
    if _props(report, CASE):
        return "case"
    for marker, kind in (("gemm_compile", "compile"), ("gemm_sanitize", "sanitize")):
        if marker in report.keywords:
            return kind
    return "test"


def _first_line(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The skip reason, or the first line of the failure."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")[:200]
    text = report.longreprtext.strip()
    return text.splitlines()[0][:200] if text else ""


class Sharding:
    """Keeps this shard's tests, and records each test and kernel file as the saved run needs them."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        given = config.getoption("gemm_shard")  # None when not given (the option machinery's default is '')
        if given is not None and not str(given).strip():
            raise pytest.UsageError(f"{label('shard')}: expected I/N with 1 <= I <= N, such as 1/4, got {given!r}")
        self.config, self.settings, self.shard = config, settings, settings.shard
        self.started = time.monotonic()
        self.tests: dict[str, ItemResult] = {}
        self.files: dict[str, KernelFileRun] = {}
        self.session: pytest.Session | None = None
        self.collected: int | None = None  # None under pytest-xdist: its workers collect
        self.selected: int | None = None
        self.left_out = 0  # tests this shard left to the other shards
        self.empty_note = ""

    def pytest_report_header(self) -> list[str]:
        if self.shard is None:
            return []
        index, count = self.shard
        return [f"pytest-gemm: shard {index} of {count} of the selected tests (by the SHA-256 of each test id)"]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> Generator[None]:
        """After every other selection (and the session's note of which kernel files are selected whole),
        keep this shard's tests, and note each case's kernel source."""
        collected = len(items)
        result = yield
        if self.shard is not None:
            kept = [item for item in items if in_shard(item.nodeid, self.shard)]
            if len(kept) < len(items):
                chosen = {id(item) for item in kept}
                config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
                self.left_out = len(items) - len(kept)
                items[:] = kept
            if hasattr(config, "workeroutput"):  # an xdist worker: its controller learns it (pytest_testnodedown)
                config.workeroutput["gemm_shard_left_out"] = self.left_out
        for item in items:
            if isinstance(item, GemmCaseItem):
                item.user_properties.append((SOURCE, {"file": item.case.spec.path, "sha256": item.source_sha256}))
        if not hasattr(config, "workerinput"):  # an xdist worker's counts are its own
            self.collected = collected
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(session.config, "workerinput"):
            self.selected = len(session.items)  # after every selection (--lf's comes after the shard's)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A collection error is saved like a failed test (kind ``collect``): merge fails on it too."""
        if report.failed:
            where = report.nodeid or str(report.fspath)
            self.tests[where] = ItemResult("failed", _first_line(report), kind="collect")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for value in _props(report, WHOLE_FILE):
            self._file(value["file"], whole=bool(value["whole"]))
        for value in _props(report, SOURCE):
            self._file(value["file"], sha256=str(value["sha256"]))
        old = self.tests.get(report.nodeid) or ItemResult("passed", kind=_kind(report))
        outcome, message = old.outcome, old.message
        if report.failed or (report.skipped and outcome == "passed"):
            outcome = "failed" if report.failed else "skipped"
            message = message or _first_line(report)
        duration = round(old.duration_s + float(getattr(report, "duration", 0.0)), 6)
        worker = sum(sum((w.get("phase_s") or {}).values()) for w in _props(report, WORKER) if report.when == "call")
        self.tests[report.nodeid] = dataclasses.replace(
            old, outcome=outcome, message=message, duration_s=duration, worker_s=round(old.worker_s + worker, 6)
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Under pytest-xdist the workers select: what the shard left out comes from theirs."""
        said = getattr(node, "workeroutput", None) or {}
        self.left_out = max(self.left_out, int(said.get("gemm_shard_left_out", 0)))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A shard that holds none of the selected tests has done its part: exit status 0, said in one line."""
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and self.shard is not None and self.left_out:
            session.exitstatus = pytest.ExitCode.OK
            index, count = self.shard
            self.empty_note = (
                f"pytest-gemm: shard {index} of {count} holds none of the {self.left_out} selected tests "
                "(more shards than tests): nothing to run, exit status 0"
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.empty_note:
            terminalreporter.write_line(self.empty_note)

    def _file(self, file: str, **changes: Any) -> None:
        self.files[file] = dataclasses.replace(self.files.get(file, KernelFileRun()), **changes)

    def _ended(self) -> SessionEnd | None:
        if self.session is None:
            return None
        ran = sum(1 for result in self.tests.values() if result.kind != "collect")
        maxfail = int(self.config.getoption("maxfail", 0) or 0)
        return SessionEnd(int(self.session.exitstatus), self.collected, self.selected, ran, maxfail)

    def saved(self) -> dict[str, Any]:
        """The saved run's keys for ``pytest-gemm merge`` (fields of :class:`~pytest_gemm.report.run_data.RunData`)."""
        return {
            "version": __version__,
            "settings": result_settings(self.settings, _timed(self.config), self.config.rootpath),
            "shard": Shards((self.shard[0],), self.shard[1]) if self.shard else None,
            "files": dict(self.files),
            "tests": dict(self.tests),
            "wall_s": round(time.monotonic() - self.started, 3),
            "session": self._ended(),
        }
