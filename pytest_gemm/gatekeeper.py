"""The regression gate and the baseline update, as a pytest plugin object.

The gate judges each timed case when its report is made (in the process that ran it, so it
works under pytest-xdist): a regression turns the passing report into a failure of that test,
with the comparison as its text. The update collects the rows of timed cases from reports in the
controlling process and writes each GPU's baseline file once, at the end of the session.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from . import __version__
from .baselines import (
    BaselineError,
    BaselineFile,
    Changes,
    baseline_paths,
    entry_from_row,
    gpu_slug,
    load,
    merge,
    recorded_info,
    save,
    set_aside,
)
from .gate import METRICS, judge, regression_text
from .kernel_files import case_ids, shown_path
from .options import GateSettings
from .shapes import Shape
from .spec import KernelFileError

__all__ = ["WHOLE_FILE", "GateKeeper"]

#: user property of every case item: whether its whole kernel file is selected in this run
WHOLE_FILE = "gemm_file_whole"
_LISTED = 20  # most keys listed per kind of change


def _rows(report: pytest.TestReport, key: str) -> list[Any]:
    return [value for name, value in report.user_properties if name == key]


class GateKeeper:
    """Applies the gate to timed cases, or records them as baselines with ``--gemm-update-baselines``."""

    def __init__(self, settings: GateSettings, rootpath: Path) -> None:
        self.settings, self.rootpath = settings, rootpath
        self._baselines: dict[str, BaselineFile | None] = {}
        self.unreadable: dict[Path, str] = {}
        # controller side
        self.rows: list[dict[str, Any]] = []
        self.whole_files: dict[str, bool] = {}
        self.verdicts: Counter[str] = Counter()
        self.missing: set[str] = set()
        self.written: list[tuple[Path, Changes, list[str]]] = []
        self.update_errors: list[str] = []
        self.gpu: dict[str, Any] | None = None

    # -- start: every baseline file must be readable -------------------------------------------
    def check_files(self) -> None:
        """Read every baseline file now; an unreadable one stops a normal run with a usage error naming it."""
        for path in baseline_paths(self.settings.folder):
            try:
                load(path)
            except BaselineError as exc:
                if not self.settings.update:
                    raise pytest.UsageError(f"pytest-gemm: {exc}") from None
                self.unreadable[path] = str(exc)

    def _baseline(self, gpu: str) -> BaselineFile | None:
        if gpu not in self._baselines:
            self._baselines[gpu] = load(self.settings.folder / f"{gpu_slug(gpu)}.json", gpu=gpu)
        return self._baselines[gpu]

    def _shown(self, path: Path) -> str:
        return shown_path(path, self.rootpath)

    # -- the gate, where the test ran ---------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report: pytest.TestReport = yield
        if report.when == "call" and report.passed and not self.settings.update:
            for row in _rows(report, "gemm_timing"):
                if "gpu" in row:  # rows of pytest-gemm cases always name their GPU
                    self._gate(report, row)
        return report

    def _gate(self, report: pytest.TestReport, row: dict[str, Any]) -> None:
        s = self.settings
        path = s.folder / f"{gpu_slug(row['gpu'])}.json"
        try:
            baseline = self._baseline(row["gpu"])
        except BaselineError as exc:
            report.outcome, report.longrepr = "failed", f"pytest-gemm gate: {exc}"
            return
        entry = baseline.get(row["test"]) if baseline else None
        threshold = row.get("regression_threshold") or s.threshold
        result = judge(row, entry, metric=s.metric, threshold=threshold)
        row["gate"] = {
            **result.as_dict(),
            "baseline_file": self._shown(path),
            "baseline_file_missing": baseline is None,
        }
        accept = self.accept_command(row)
        text = None
        if result.verdict == "regressed":
            text = regression_text(row["test"].split("::")[-1], row, entry, result, accept)
        elif result.verdict == "new" and s.fail_new:
            text = (
                f"no baseline entry for {row['test']} in {self._shown(path)} (--gemm-fail-new / gemm_fail_new); "
                f"record it with: {accept}"
            )
        elif result.verdict == "unstable" and s.fail_unstable:
            text = f"{row['test']}: {'; '.join(result.notes)} (--gemm-fail-unstable / gemm_fail_unstable)"
        if text:
            report.outcome, report.longrepr = "failed", text

    def accept_command(self, row: dict[str, Any]) -> str:
        """The command that records this case's new number as its baseline."""
        folder = self._shown(self.settings.folder)
        extra = "" if folder == "baselines" else f" --gemm-baselines {folder}"
        return f"pytest '{row['test']}' --gemm-kernels --gemm-shapes {row['shape']} --gemm-update-baselines{extra}"

    # -- the controller: gather, then write once ----------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for whole in _rows(report, WHOLE_FILE):
            self.whole_files[whole["file"]] = whole["whole"]
        if report.when != "call":
            return
        for row in _rows(report, "gemm_timing"):
            if self.settings.update:
                if report.passed and row.get("verdict") == "ok":
                    self.rows.append(row)
            elif "gate" in row:
                self.verdicts[row["gate"]["verdict"]] += 1
                if row["gate"]["baseline_file_missing"]:
                    self.missing.add(f"{row['gpu']} ({row['gate']['baseline_file']})")
        self.gpu = next(iter(_rows(report, "gemm_gpu")), self.gpu)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.settings.update and not hasattr(session.config, "workerinput"):
            self._write()
            if self.update_errors and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _write(self) -> None:
        by_gpu: dict[str, list[dict[str, Any]]] = {}
        for row in self.rows:
            by_gpu.setdefault(row["gpu"], []).append(row)
        for gpu, rows in sorted(by_gpu.items()):
            path = self.settings.folder / f"{gpu_slug(gpu)}.json"
            notes = []
            if path in self.unreadable:
                moved = set_aside(path)
                notes.append(f"the unreadable file was kept as {self._shown(moved)} ({self.unreadable.pop(path)})")
            try:
                baseline = load(path, gpu=gpu) or BaselineFile(path, gpu)
            except BaselineError as exc:
                self.update_errors.append(f"{exc}; nothing written")
                continue
            recorded = recorded_info(self.gpu or {}, rows, __version__)
            new = {row["test"]: entry_from_row(row, recorded) for row in rows}
            notes += [
                f"{row['test']} was timed while throttled ({', '.join(row['throttle'])})"
                for row in rows
                if row.get("throttle")
            ]
            changes = merge(baseline, new, self._gone(baseline, new))
            if changes:
                save(baseline)
            self.written.append((path, changes, notes))

    def _gone(self, baseline: BaselineFile, new: dict[str, Any]) -> list[str]:
        """Entries whose case no longer exists, among kernel files this run selected whole."""
        gone = []
        for key, entry in baseline.entries.items():
            if key in new or not self.whole_files.get(entry["file"]):
                continue
            try:
                shape = Shape(*(int(v) for v in entry["shape"].split("x")))
                exists = key in case_ids(self.rootpath / entry["file"], entry["file"], shape)
            except (KernelFileError, ValueError, TypeError):
                continue  # unreadable today: keep the entry; `pytest-gemm prune` can decide
            if not exists:
                gone.append(key)
        return gone

    # -- what the run says at the end ---------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr, s = terminalreporter, self.settings
        if s.update:
            tr.section("pytest-gemm baselines")
            if not self.written and not self.update_errors:
                tr.write_line(
                    "nothing recorded: no case was timed and passed (timing needs a GPU; it is off with "
                    "--benchmark-skip or --benchmark-disable, and under pytest-xdist unless --benchmark-enable)"
                )
            for path, changes, notes in self.written:
                tr.write_line(f"{self._shown(path)}: {changes.summary() if changes else 'unchanged'}")
                for kind, keys in (
                    ("added", changes.added),
                    ("changed", changes.changed),
                    ("removed", changes.removed),
                ):
                    for key in keys[:_LISTED]:
                        tr.write_line(f"  {kind}: {key}")
                    if len(keys) > _LISTED:
                        tr.write_line(f"  ... and {len(keys) - _LISTED} more {kind}")
                for note in notes:
                    tr.write_line(f"  note: {note}")
            for error in self.update_errors:
                tr.write_line(f"error: {error}", red=True)
            return
        if not self.verdicts:
            return
        tr.section("pytest-gemm gate")
        label = METRICS[s.metric][2]
        counts = ", ".join(f"{self.verdicts[v]} {v}" for v in ("regressed", "improved", "same", "new", "unstable"))
        tr.write_line(f"{label}, threshold {100 * s.threshold:g}% (or the kernel's own): {counts}")
        for missing in sorted(self.missing):
            tr.write_line(
                f"no baselines for {missing}: every timed case is new; record them with --gemm-update-baselines"
            )
