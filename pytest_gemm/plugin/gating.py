"""The regression gate and the baseline update inside pytest.

The gate (:class:`Gate`) judges each timed case's record against its baseline entry as the case's final result is
made, in the process that runs it (so it works under pytest-xdist): a verdict that fails the test fails the case
(``judge.verdict``). The update (:func:`write_baselines`) writes each GPU model's baseline file once, at the end
of the session, from the run's summary; :func:`gate_lines` says what the gate found or the update wrote.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
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
from ..judge.gate import GatePolicy, judge
from ..judge.verdict import Judged
from ..records.case_record import COMPARED_WITH, METRICS, CaseRecord
from ..records.verdicts import GateVerdict
from ..report.tables import UNCHECKED_STREAMS
from ..settings import GateSettings
from ..specs.files import message_path

__all__ = ["Gate", "Recorded", "gate_lines", "write_baselines"]

_LISTED = 20  # most keys listed per kind of change


class Gate:
    """The gate in one process: the baseline files read once, and each timed case's record judged against its entry."""

    def __init__(self, settings: GateSettings, rootpath: Path) -> None:
        self.settings, self.rootpath = settings, rootpath
        self.policy = GatePolicy(settings.fail_new, settings.fail_unstable)
        self._files: dict[Path, BaselineFile] = {}  # the baseline files read at the start
        self._baselines: dict[str, BaselineFile | None] = {}
        self._unreadable: set[str] = set()  # GPU models whose baseline file recorded_on could not read
        self.cases = 1  # the run's GPU cases, once collected: a false regression's chance is split among them

    def check_files(self) -> None:
        """Read every baseline file now; an unreadable one stops a normal run with a usage error naming it."""
        if self.settings.update:
            return  # an update keeps a damaged file of its GPU aside and starts it again (docs/baselines.md)
        for path in baseline_paths(self.settings.folder):
            try:
                baseline = load(path, shown=partial(message_path, root=self.rootpath))
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

    def recorded_on(self, test: str, model: str) -> frozenset[str]:
        """The GPUs (their ``gpu_identity``) whose records the baseline entry of ``test`` holds on GPU model ``model``:
        none without an entry, or with a file that cannot be read (the case's verdict says why)."""
        if model in self._unreadable:
            return frozenset()
        try:
            baseline = self._baseline(model)
        except BaselineError:
            self._unreadable.add(model)  # read once: the verdicts say why
            return frozenset()
        entry = baseline.get(test) if baseline is not None else None
        return frozenset((entry or {}).get("gpus") or {})

    def judge(self, rec: CaseRecord) -> Judged:
        """The gate's verdict on a passing timed case, with the baseline file it was judged against; or, for a file
        that cannot be read (changed since the run read it, or recorded on another GPU model), why not."""
        s = self.settings
        try:
            path, baseline = baseline_path(s.folder, rec.gpu), self._baseline(rec.gpu)
        except BaselineError as exc:
            return f"pytest-gemm gate: {exc}"
        entry = baseline.get(rec.test) if baseline else None
        return judge(
            rec, entry, metric=s.metric, threshold=s.threshold, policy=self.policy,
            baseline_file=message_path(path, self.rootpath), file_missing=baseline is None, cases=self.cases,
        )  # fmt: skip


@dataclass
class Recorded:
    """What an update of the baselines wrote (each file with its changes and notes), and what it could not."""

    written: list[tuple[Path, Changes, list[str]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def write_baselines(
    settings: GateSettings,
    records: list[CaseRecord],
    gpu_facts: dict[str, dict[str, Any]],
    whole_files: dict[str, bool],
    rootpath: Path,
) -> Recorded:
    """Write each GPU model's baseline file from the run's passing timed cases (``gpu_facts``: model -> facts): all
    of them, or none when any cannot be recorded."""
    done, shown = Recorded(), partial(message_path, root=rootpath)
    problem = unrecordable(records)
    if problem:
        done.errors.append(f"{problem}; nothing written")
        return done
    by_gpu: dict[str, list[CaseRecord]] = {}
    for rec in records:
        by_gpu.setdefault(rec.gpu, []).append(rec)
    for gpu, mine in sorted(by_gpu.items()):
        try:
            path = baseline_path(settings.folder, gpu)
            changes, notes = record(
                path, gpu, mine, gpu_facts.get(gpu, {}), __version__, whole_files=whole_files, root=rootpath,
                shown=shown, force=True,  # the update that a damaged file's message advises: it keeps that file aside
            )  # fmt: skip
        except BaselineAccessError as exc:
            done.errors.append(_kept_elsewhere(exc, len(mine), shown))
            continue
        except BaselineError as exc:
            done.errors.append(f"{exc}; nothing written")
            continue
        done.written.append((path, changes, notes))
    return done


def _kept_elsewhere(exc: BaselineAccessError, count: int, shown: Callable[[Path], str]) -> str:
    """Save what a failed update would have written in a temporary file; the error line naming it."""
    where = shown(exc.path)
    if exc.whole:
        what = f"the whole file as it would be): copy it to {where}"
    else:
        what = f"this run's entries alone): add them to {where}"
    try:
        fd, kept = tempfile.mkstemp(prefix=f"pytest-gemm-{exc.path.stem}-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(exc.text or "")
    except OSError as err:
        return f"{exc}; nothing written, and the {count} timed case(s) could not be kept either ({err})"
    kept_in = f"This run's {count} timed case(s) are kept in {kept}"
    return f"{exc}; nothing written there. {kept_in} ({what} once that is fixed"


def _unchecked_line(count: int) -> str:
    return f"{count} {UNCHECKED_STREAMS} (their times make no speed claim)"


def _update_lines(recorded: Recorded, unchecked: int, rootpath: Path) -> list[str]:
    lines = []
    if not recorded.written and not recorded.errors and not unchecked:
        lines.append(
            "nothing recorded: no case was timed and passed (timing needs a GPU; it is off with "
            "--benchmark-skip or --benchmark-disable, and under pytest-xdist)"
        )
    for path, changes, notes in recorded.written:
        lines.append(f"{message_path(path, rootpath)}: {changes.summary() if changes else 'unchanged'}")
        for kind, keys in (("added", changes.added), ("changed", changes.changed), ("removed", changes.removed)):
            lines += [f"  {kind}: {key}" for key in keys[:_LISTED]]
            if len(keys) > _LISTED:
                lines.append(f"  ... and {len(keys) - _LISTED} more {kind}")
        lines += [f"  note: {note}" for note in notes]
    lines += [f"error: {error}" for error in recorded.errors]
    if unchecked:
        lines.append(f"not recorded: {_unchecked_line(unchecked)}")
    return lines


def gate_lines(
    settings: GateSettings, records: list[CaseRecord], unchecked: int, recorded: Recorded | None, rootpath: Path
) -> tuple[str, list[str]] | None:
    """The terminal section's title and lines (None: nothing to say): what the update wrote, or the gate's verdicts
    on the run's timed cases (``unchecked``: passing timed cases whose streams were not checked, neither gated nor
    recorded)."""
    if settings.update:
        return "pytest-gemm baselines", _update_lines(recorded or Recorded(), unchecked, rootpath)
    gated = [rec.gate for rec in records if rec.gate is not None]
    if not gated and not unchecked:
        return None
    verdicts = Counter(gate.verdict for gate in gated)
    counts = ", ".join(f"{verdicts[v]} {v}" for v in GateVerdict)
    lines = [f"{METRICS[settings.metric][2]}, threshold {100 * settings.threshold:g}% (or the kernel's own): {counts}"]
    if unchecked:
        lines.append(f"not gated: {_unchecked_line(unchecked)}")
    missing = {
        f"{rec.gpu} ({rec.gate.baseline_file})" for rec in records if rec.gate and rec.gate.baseline_file_missing
    }
    lines += [
        f"no baselines for {gpu}: every timed case is new; record them with --gemm-update-baselines"
        for gpu in sorted(missing)
    ]
    others = sum(gate.compared_with == "others" for gate in gated)
    if others:
        lines.append(
            f"{others} case(s) compared with {COMPARED_WITH['others']}: a regression is slower than the "
            "slowest of them; --gemm-update-baselines adds this GPU's records"
        )
    return "pytest-gemm gate", lines
