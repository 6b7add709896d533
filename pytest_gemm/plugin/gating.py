"""The regression gate and the baseline update inside pytest (owned by the session).

The gate judges each timed case when its report is made, in the process that ran it (so it works
under pytest-xdist): a regression turns the passing report into a failure with the comparison as
its text. The update gathers the records of passing timed cases in the controlling process and
writes each GPU's baseline file once, at the end of the session.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..baselines.store import (
    BaselineAccessError,
    BaselineError,
    BaselineFile,
    Changes,
    baseline_path,
    baseline_paths,
    for_gpu,
    load,
    unrecordable,
)
from ..baselines.update import record
from ..judge.gate import GatePolicy, compared_record, judge
from ..records.case_record import COMPARED_WITH, METRICS, CaseRecord
from ..records.verdicts import GateVerdict, Sanity
from ..report.regression import accept_command, gate_failure_text
from ..report.tables import UNCHECKED_STREAMS
from ..settings import GateSettings
from ..specs.files import shown_path

__all__ = ["Gatekeeper"]

_LISTED = 20  # most keys listed per kind of change


class Gatekeeper:
    """Applies the gate to timed cases, or records them as baselines with ``--gemm-update-baselines``."""

    def __init__(self, settings: GateSettings, rootpath: Path) -> None:
        self.settings, self.rootpath = settings, rootpath
        self.policy = GatePolicy(settings.fail_new, settings.fail_unstable)
        self._files: dict[Path, BaselineFile] = {}  # the baseline files read at the start
        self._baselines: dict[str, BaselineFile | None] = {}
        # the controlling process
        self.to_record: list[CaseRecord] = []
        self.whole_files: dict[str, bool] = {}
        self.verdicts: Counter[GateVerdict] = Counter()
        self.compared_with: Counter[str] = Counter()  # how compared cases were: COMPARED_WITH keys
        self.missing: set[str] = set()
        self.written: list[tuple[Path, Changes, list[str]]] = []
        self.update_errors: list[str] = []
        self.unchecked = 0  # passing timed cases left ungated and unrecorded: their streams were not checked

    def shown(self, path: Path) -> str:
        return shown_path(path, self.rootpath)

    def check_files(self) -> None:
        """Read every baseline file now; an unreadable one stops a normal run with a usage error naming it."""
        if self.settings.update:
            return  # an update sets unreadable files aside and starts them again
        for path in baseline_paths(self.settings.folder):
            try:
                baseline = load(path)
            except BaselineError as exc:
                raise pytest.UsageError(f"pytest-gemm: {exc}") from None
            if baseline is not None:
                self._files[path] = baseline

    def _baseline(self, gpu: str) -> BaselineFile | None:
        if gpu not in self._baselines:
            path = baseline_path(self.settings.folder, gpu)
            known = self._files.get(path)
            self._baselines[gpu] = for_gpu(known, gpu) if known is not None else load(path, gpu=gpu)
        return self._baselines[gpu]

    # -- the gate, where the test ran ------------------------------------------------------------
    def gate(self, report: pytest.TestReport, rec: CaseRecord) -> CaseRecord:
        """Judge a passing timed case; fail its report when the gate says so. Returns the judged record."""
        s = self.settings
        if rec.unchecked_streams:  # its device time may miss work on other streams: no speed claim to gate
            return rec
        try:
            path = baseline_path(s.folder, rec.gpu)
            baseline = self._baseline(rec.gpu)
        except BaselineError as exc:
            report.outcome, report.longrepr = "failed", f"pytest-gemm gate: {exc}"
            return rec
        entry = baseline.get(rec.test) if baseline else None
        result = judge(rec, entry, metric=s.metric, threshold=s.threshold, policy=self.policy)
        result = replace(result, baseline_file=self.shown(path), baseline_file_missing=baseline is None)
        rec = rec.with_gate(result)
        if result.fails:
            accept = accept_command(rec, self.shown(s.folder))
            compared = compared_record(entry, rec, result) if entry is not None else None
            text = gate_failure_text(rec, result, compared, accept, self.shown(path))
            report.outcome, report.longrepr = "failed", text
        return rec

    # -- the controller: gather, then write once -------------------------------------------------
    def collect(self, report: pytest.TestReport, rec: CaseRecord) -> None:
        if report.passed and rec.unchecked_streams:  # neither gated nor recorded (gate() left it alone)
            self.unchecked += 1
        elif self.settings.update:
            if report.passed and rec.verdict == Sanity.OK:
                self.to_record.append(rec)
        elif rec.gate is not None:
            self.verdicts[rec.gate.verdict] += 1
            self.compared_with[rec.gate.compared_with] += 1
            if rec.gate.baseline_file_missing:
                self.missing.add(f"{rec.gpu} ({rec.gate.baseline_file})")

    def write(self, gpu_facts: dict[str, dict[str, Any]]) -> None:
        """Write each GPU model's baseline file from its passing timed cases (``gpu_facts``: model -> facts): all
        of them, or none when any cannot be recorded."""
        problem = unrecordable(self.to_record)
        if problem:
            self.update_errors.append(f"{problem}; nothing written")
            return
        by_gpu: dict[str, list[CaseRecord]] = {}
        for rec in self.to_record:
            by_gpu.setdefault(rec.gpu, []).append(rec)
        for gpu, records in sorted(by_gpu.items()):
            try:
                path = baseline_path(self.settings.folder, gpu)
                changes, notes = record(
                    path,
                    gpu,
                    records,
                    gpu_facts.get(gpu, {}),
                    __version__,
                    whole_files=self.whole_files,
                    root=self.rootpath,
                    shown=self.shown,
                )
            except BaselineAccessError as exc:
                self.update_errors.append(self._kept_elsewhere(exc, len(records)))
                continue
            except BaselineError as exc:
                self.update_errors.append(f"{exc}; nothing written")
                continue
            self.written.append((path, changes, notes))

    def _kept_elsewhere(self, exc: BaselineAccessError, count: int) -> str:
        """Save what a failed update would have written in a temporary file; the error line naming it."""
        shown = self.shown(exc.path)
        if exc.whole:
            what = f"the whole file as it would be): copy it to {shown}"
        else:
            what = f"this run's entries alone): add them to {shown}"
        try:
            fd, kept = tempfile.mkstemp(prefix=f"pytest-gemm-{exc.path.stem}-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(exc.text or "")
        except OSError as err:
            return f"{exc}; nothing written, and the {count} timed case(s) could not be kept either ({err})"
        kept_in = f"This run's {count} timed case(s) are kept in {kept}"
        return f"{exc}; nothing written there. {kept_in} ({what} once that is fixed"

    # -- what the run says at the end ------------------------------------------------------------
    def _unchecked_line(self) -> str:
        return f"{self.unchecked} {UNCHECKED_STREAMS} (their times make no speed claim)"

    def summary_lines(self) -> tuple[str, list[str]] | None:
        """The terminal section's title and lines (None: nothing to say)."""
        s = self.settings
        if s.update:
            lines = []
            if not self.written and not self.update_errors and not self.unchecked:
                lines.append(
                    "nothing recorded: no case was timed and passed (timing needs a GPU; it is off with "
                    "--benchmark-skip or --benchmark-disable, and under pytest-xdist)"
                )
            for path, changes, notes in self.written:
                lines.append(f"{self.shown(path)}: {changes.summary() if changes else 'unchanged'}")
                for kind, keys in (
                    ("added", changes.added),
                    ("changed", changes.changed),
                    ("removed", changes.removed),
                ):
                    lines += [f"  {kind}: {key}" for key in keys[:_LISTED]]
                    if len(keys) > _LISTED:
                        lines.append(f"  ... and {len(keys) - _LISTED} more {kind}")
                lines += [f"  note: {note}" for note in notes]
            lines += [f"error: {error}" for error in self.update_errors]
            if self.unchecked:
                lines.append(f"not recorded: {self._unchecked_line()}")
            return "pytest-gemm baselines", lines
        if not self.verdicts and not self.unchecked:
            return None
        counts = ", ".join(f"{self.verdicts[v]} {v}" for v in GateVerdict)
        lines = [f"{METRICS[s.metric][2]}, threshold {100 * s.threshold:g}% (or the kernel's own): {counts}"]
        if self.unchecked:
            lines.append(f"not gated: {self._unchecked_line()}")
        lines += [
            f"no baselines for {missing}: every timed case is new; record them with --gemm-update-baselines"
            for missing in sorted(self.missing)
        ]
        others = self.compared_with["others"]
        if others:
            lines.append(
                f"{others} case(s) compared with {COMPARED_WITH['others']}: a regression is slower than the "
                "slowest of them; --gemm-update-baselines adds this GPU's records"
            )
        return "pytest-gemm gate", lines
