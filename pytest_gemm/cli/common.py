"""What the ``pytest-gemm`` commands share: their error, the options they share with the plugin (added as
``--NAME``, with the plugin's defaults, help and checks, as ``plugin/configure.py`` adds them as ``--gemm-NAME``),
reading saved runs, gating a run's cases against a baseline file with the asv-style table, recording a saved run as
baselines, writing files."""

from __future__ import annotations

import argparse
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import __version__
from ..baselines.store import (
    BaselineAccessError,
    BaselineError,
    BaselineFile,
    DamagedBaseline,
    NewerBaseline,
    baseline_path,
    load,
    unrecordable,
)
from ..baselines.update import record
from ..fileio import os_reason
from ..judge.gate import GatePolicy, compared_record, gated_cases, judge
from ..judge.verdict import claims_speed, ungated
from ..options import BY_NAME, Option, OptionError
from ..records.case_record import METRICS, CaseRecord, GateResult
from ..records.verdicts import GateVerdict
from ..report.regression import aligned, interval_cell
from ..runs.data import RunData
from ..runs.saved import RunFileError, read_run

__all__ = [
    "FORCE_HELP",
    "GATE",
    "CliError",
    "add_cli_arguments",
    "by_gpu",
    "damaged_error",
    "gate_table",
    "read_saved",
    "record_saved_run",
    "recordable",
    "refuse_damaged",
    "same_file",
    "switch",
    "timed_run",
    "write_file",
]

#: the options of the gate that a command shares with the plugin (where it gates a run)
GATE = ("baselines", "threshold", "gate-metric")
#: what ``--force`` does where a command records baselines
FORCE_HELP = (
    "replace a baseline file that is not valid (truncated, not JSON, a bad entry), keeping it aside as "
    "<model>.unreadable-<date>.json (without it, such a file stops the command and nothing changes)"
)


class CliError(Exception):
    """A problem with the command's input; printed and exit status 2."""


def add_cli_arguments(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """Add the named options, which the command shares with the plugin (``Option.command``), to a subcommand."""
    for option in map(BY_NAME.__getitem__, names):
        assert option.command, option.name

        def convert(text: str, option: Option = option) -> Any:
            try:
                return option.convert(text)
            except OptionError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None

        said = "" if option.flag else f"default {option.default!r}; "
        how = {"action": "store_true"} if option.flag else {"default": option.convert(option.default), "type": convert}
        parser.add_argument(f"--{option.name}", help=f"{option.help} ({said}pytest: --gemm-{option.name})", **how)


def switch(name: str) -> str:
    """How the command names the option ``name`` it shares with the plugin: ``--NAME``."""
    return f"--{BY_NAME[name].name}"


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same file on disk (hard links, other spellings), or the same path
    once resolved when either does not exist yet."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def read_saved(path: Path) -> RunData:
    """A saved run (:func:`read_run`), its problems as the command's errors, each naming the file."""
    try:
        return read_run(path)
    except RunFileError as exc:
        raise CliError(str(exc)) from None
    except Exception as exc:  # a fault the reader did not foresee: the file named, never a traceback
        raise CliError(f"{path}: cannot be read as a saved run ({type(exc).__name__}: {exc})") from None


def timed_run(path: Path) -> tuple[RunData, str]:
    """A saved run with timed cases, and the GPU they were timed on."""
    data = read_saved(path)
    if not data.records:
        raise CliError(f"{path}: holds no pytest-gemm cases (was it written by a timed pytest --gemm-kernels run?)")
    if not data.gpu.get("name") and not any(r.gpu for r in data.records):
        raise CliError(f"{path}: does not say which GPU it was measured on")
    return data, data.gpu_name


def by_gpu(data: RunData) -> dict[str, list[CaseRecord]]:
    """The run's timed cases by the GPU model they were timed on."""
    groups: dict[str, list[CaseRecord]] = {}
    for rec in data.records:
        groups.setdefault(rec.gpu or data.gpu_name, []).append(rec)
    return dict(sorted(groups.items()))


def gate_table(
    run: str,
    gpu: str,
    records: list[CaseRecord],
    path: Path,
    baseline: BaselineFile | None,
    metric: str,
    threshold: float,
    policy: GatePolicy | None = None,
) -> tuple[dict[str, GateResult], Counter[GateVerdict]]:
    """Judge ``records`` against ``baseline`` (None: no file, every case new) and print the asv-style table;
    ``policy`` says which verdicts fail a test (a regression, by default)."""
    value, interval, label = METRICS[metric]
    missing = ", no such file: every case is new" if baseline is None else ""
    print(f"{run} against {path} ({gpu}{missing}); {label}, threshold {100 * threshold:g}% (or the kernel's own)")
    table = [["", "before", "after", "change", "case"]]
    counts: Counter[GateVerdict] = Counter()
    results = {}
    for row in sorted(records, key=lambda r: r.test):
        entry = baseline.get(row.test) if baseline is not None else None
        result = judge(
            row, entry, metric=metric, threshold=threshold, policy=policy, baseline_file=str(path),
            file_missing=baseline is None, cases=gated_cases(records),
        )  # fmt: skip
        results[row.test] = result
        counts[result.verdict] += 1
        before = result.baseline  # a regression's, as judged; else the entry with the numbers it was compared with
        if before is None:
            before = compared_record(entry, row, result) if entry and result.change is not None else entry
        table.append(
            [
                result.verdict.mark,
                interval_cell(metric, before[value], before[interval]) if before else "-",
                interval_cell(metric, getattr(row, value), getattr(row, interval)),
                f"{100 * result.change:+.1f}%" if result.change is not None else "",
                row.test + ("  (source changed)" if any("source" in n for n in result.notes) else ""),
            ]
        )
    print("\n".join(aligned(table, {1, 2, 3})))
    print("marks: " + ", ".join(f"{v.mark} {v}" for v in GateVerdict if v.mark.strip()) + ", blank: same")
    print(", ".join(f"{counts.get(v, 0)} {v}" for v in GateVerdict))
    return results, counts


def damaged_error(exc: DamagedBaseline, switches: str = "--force") -> CliError:
    """The error of a damaged baseline file, which a command replaces only when recording with ``--force``:
    ``switches`` are the options of the command run that would (``--update-baselines --force`` for merge)."""
    aside = f"{exc.path.stem}.unreadable-DATE{exc.path.suffix}"
    return CliError(
        f"{exc.path}: {exc.problem}; nothing changed: fix it, restore it from version control, or pass {switches} to "
        f"keep it aside as {aside} and record the run in a new file"
    )


def refuse_damaged(models: Iterable[str], folder: Path, force: bool) -> None:
    """Before anything is written: the baseline file of each GPU model in ``models`` must not be of a newer format
    (:class:`NewerBaseline`: never replaced, ``force`` or not), and unless ``force`` not damaged
    (:class:`DamagedBaseline`: it would be replaced). Other faults are left to the recording, which words them."""
    for name in models:
        try:
            load(baseline_path(folder, name))
        except NewerBaseline as exc:
            raise CliError(f"{exc}; nothing changed") from None
        except DamagedBaseline as exc:
            if not force:
                raise damaged_error(exc) from None
        except BaselineError:
            continue


def recordable(data: RunData) -> dict[str, list[CaseRecord]]:
    """Each GPU model's timed cases that an update records: those whose times make a speed claim, as the plugin's
    update records them (``judge.verdict.claims_speed``), its gate's verdicts set aside (a model's list may be
    empty)."""
    claims = {test for test, result in data.tests.items() if claims_speed(ungated(result))}
    return {name: [r for r in records if r.test in claims] for name, records in by_gpu(data).items()}


def record_saved_run(
    data: RunData, run: str, folder: Path, whole_files: Mapping[str, bool] | None, root: Path, *, force: bool = False
) -> None:
    """Record a saved run's timed cases as each GPU model's baselines (:func:`recordable`); with ``whole_files``, also
    remove the entries of gone cases of those kernel files (found under ``root``). Every GPU's cases, and their
    baseline files (:func:`refuse_damaged`), are checked first: all of the run is recorded, or none of it. A damaged
    baseline file is replaced only with ``force``, kept aside. A GPU model none of whose cases is recorded is said,
    its file neither read nor changed."""
    groups = recordable(data)
    problem = unrecordable(r for good in groups.values() for r in good)
    if problem:
        raise CliError(f"{run}: {problem}; nothing recorded")
    refuse_damaged([name for name, good in groups.items() if good], folder, force)
    for name, good in groups.items():
        path = baseline_path(folder, name)
        if not good:
            why = f"none of its {len(by_gpu(data)[name])} timed case(s) passed with times to believe"
            print(f"{path}: unchanged: nothing recorded for {name} ({why})")
            continue
        try:
            changes, notes = record(
                path, name, good, data.facts(name), __version__, whole_files=whole_files, root=root, force=force
            )
        except BaselineAccessError as exc:
            raise CliError(
                f"{exc}; nothing changed; the run stays in {run}: run this again once that is fixed"
            ) from None
        except DamagedBaseline as exc:  # damaged since it was checked
            raise damaged_error(exc) from None
        never = "; entries are never removed here" if whole_files is None else ""
        print(f"{path}: {changes.summary() if changes else 'unchanged'} (from {run}{never})")
        for note in notes:  # before the keys, which may be hundreds: a file kept aside is said at once
            print(f"  note: {note}")
        for kind, keys in (("added", changes.added), ("changed", changes.changed), ("removed", changes.removed)):
            for key in keys:
                print(f"  {kind}: {key}")


def write_file(path: Path, text: str) -> None:
    """Write a file; a failure is the command's error, naming the file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {os_reason(exc, path)}") from None
