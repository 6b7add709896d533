"""Recording baselines: one GPU's file updated from timed cases, and entries whose case is gone.

The plugin (``--gemm-update-baselines``) and the command (``pytest-gemm update``, ``prune``) both
record through here, so a file is always merged, set aside when unreadable, and written the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..records.case_record import CaseRecord
from ..records.shapes import Shape
from ..specs.files import case_ids
from ..specs.spec import KernelFileError
from .store import (
    BaselineAccessError,
    BaselineError,
    BaselineFile,
    Changes,
    OtherGpuError,
    entry_from_record,
    load,
    merge,
    os_problem,
    recorded_info,
    render,
    save,
    set_aside,
)

__all__ = ["gone_reason", "record", "root_problem", "stale_keys", "write"]


def record(
    path: Path,
    gpu: str,
    records: list[CaseRecord],
    facts: Mapping[str, Any],
    version: str,
    *,
    whole_files: Mapping[str, bool] | None = None,
    root: Path | None = None,
) -> tuple[Changes, list[str]]:
    """Put ``records`` into the baseline file of ``gpu``; with ``whole_files``, drop entries whose case is gone.

    An unreadable file is set aside (kept under another name) and a new one started; a file of
    another GPU raises :class:`OtherGpuError`, one that cannot be read or written
    :class:`BaselineAccessError` (nothing changed). Returns what changed and notes worth printing.
    """
    notes, unreadable = [], None
    try:
        baseline = load(path, gpu=gpu) or BaselineFile(path, gpu)
    except (OtherGpuError, BaselineAccessError):
        raise
    except BaselineError as exc:
        unreadable, baseline = str(exc).removeprefix(f"{path}: "), BaselineFile(path, gpu)
    recorded = recorded_info(facts, records, version)
    new = {r.test: entry_from_record(r, recorded) for r in records}
    notes += [f"{r.test} was timed while throttled ({', '.join(r.throttle)})" for r in records if r.throttle]
    gone = stale_keys(baseline, new, whole_files, root) if whole_files is not None and root is not None else []
    changes = merge(baseline, new, gone)
    if unreadable is not None:
        try:
            moved = set_aside(path)
        except OSError as exc:
            why = f"it is unreadable ({unreadable}) and cannot be set aside ({os_problem(exc, path)})"
            raise BaselineAccessError(path, why, render(baseline)) from None
        notes.insert(0, f"the unreadable file was kept as {moved.name} ({path}: {unreadable})")
    if changes:
        write(baseline)
    return changes, notes


def write(baseline: BaselineFile) -> None:
    """Save a baseline file; a failure raises :class:`BaselineAccessError` carrying the text it would have held."""
    try:
        save(baseline)
    except OSError as exc:
        raise BaselineAccessError(
            baseline.path,
            f"cannot be written in {baseline.path.parent}/ ({os_problem(exc, baseline.path)})",
            render(baseline),
        ) from None


def gone_reason(key: str, entry: Mapping[str, Any], root: Path) -> str | None:
    """Why the case of entry ``key`` no longer exists (None: it does); KernelFileError when its file is unreadable."""
    source = root / entry["file"]
    if not source.exists():
        return "its kernel file is gone"
    try:
        shape = Shape(*(int(v) for v in entry["shape"].split("x")))
    except (ValueError, TypeError):
        raise KernelFileError(entry["file"], f"baseline shape {entry['shape']!r} is not MxNxK") from None
    return None if key in case_ids(source, entry["file"], shape) else "the file no longer has this case"


def stale_keys(baseline: BaselineFile, new: Iterable[str], whole_files: Mapping[str, bool], root: Path) -> list[str]:
    """Entries whose case no longer exists, among kernel files this run selected whole."""
    fresh = set(new)
    gone = []
    for key, entry in baseline.entries.items():
        if key in fresh or not whole_files.get(entry["file"]):
            continue
        try:
            if gone_reason(key, entry, root):
                gone.append(key)
        except KernelFileError:
            continue  # unreadable today: keep the entry; `pytest-gemm prune` can decide
    return gone


def root_problem(baseline: BaselineFile, root: Path) -> str | None:
    """Why pruning ``baseline`` from ``root`` would be wrong: none of the kernel files it names is there."""
    files = sorted({entry["file"] for entry in baseline.entries.values()})
    if not files or any((root / file).exists() for file in files):
        return None
    where = root.resolve()
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return (
        f"none of the {len(files)} kernel file(s) its entries name is under {where} (looked for {shown}); "
        "nothing removed: run prune from the project's root folder, or name that folder with --root DIR"
    )
