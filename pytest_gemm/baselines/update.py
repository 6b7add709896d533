"""Recording baselines: one GPU's file updated from timed cases, and entries whose case is gone.

The plugin (``--gemm-update-baselines``) and the command (``pytest-gemm update``, ``merge
--update-baselines``, ``prune``) all change a file through here, so it is always merged, set aside when
unreadable, and written the same way: under the file's lock (:func:`locked`), read again and merged by key,
so that processes updating one file at once (shards on one host) lose nothing.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..fileio import os_reason
from ..records.case_record import CaseRecord
from ..records.shapes import Shape, ShapeError
from ..specs.cases import expand
from ..specs.files import load_specs
from ..specs.spec import KernelFileError, KernelSpec
from .store import (
    BaselineAccessError,
    BaselineError,
    BaselineFile,
    Changes,
    DamagedBaseline,
    Shown,
    entry_from_record,
    load,
    merge,
    recorded_info,
    render,
    save,
    set_aside,
    unrecordable,
)

__all__ = [
    "LOCK_TIMEOUT_S",
    "KernelCases",
    "lock_path",
    "locked",
    "record",
    "remove",
    "root_problem",
    "stale_keys",
    "write",
]

#: how long a change of a baseline file waits for another process's change of it (each takes well under a second)
LOCK_TIMEOUT_S = 60.0


def lock_path(path: Path) -> Path:
    """The lock file of baseline file ``path``: beside it and hidden, so never listed or read as a baseline file."""
    return path.with_name(f".{path.name}.lock")


@contextmanager
def locked(path: Path, shown: Shown = str) -> Iterator[str | None]:
    """Hold the lock of baseline file ``path``, across processes, for a whole read-change-write.

    Yields None while it is held, or why it could not be taken (its folder cannot be written, its name cannot be
    made, or another process held it for ``LOCK_TIMEOUT_S``): the block may still read and merge, but :func:`write`
    then refuses, carrying the text it would have written; no ``OSError`` escapes. The lock is the operating
    system's (``flock``), dropped when its process ends however it ends, so a killed process never leaves it held.
    """
    lock, problem = FileLock(lock_path(path), timeout=LOCK_TIMEOUT_S), None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # (older filelock versions do not make it)
        os.close(os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o666))  # filelock retries what cannot be made
        lock.acquire()
    except Timeout:  # (an OSError too)
        problem = (
            f"is being changed by another process, which has held its lock file {shown(lock_path(path))} for over "
            f"{LOCK_TIMEOUT_S:g} s"
        )
    except OSError as exc:
        why = os_reason(exc, lock_path(path), shown)
        if os.path.lexists(lock_path(path)):  # the folder was written: the lock file itself is what is wrong
            problem = f"cannot be locked: its lock file {shown(lock_path(path))} cannot be opened ({why})"
        else:
            problem = f"cannot be written in {shown(path.parent)}/ ({why})"
    try:
        yield problem
    finally:
        if problem is None:
            lock.release()


def record(
    path: Path,
    gpu: str,
    records: list[CaseRecord],
    facts: Mapping[str, Any],
    version: str,
    *,
    whole_files: Mapping[str, bool] | None = None,
    root: Path | None = None,
    shown: Shown = str,
    force: bool = False,
) -> tuple[Changes, list[str]]:
    """Put ``records`` into the baseline file of ``gpu``; with ``whole_files``, drop entries whose case is gone.

    A file whose text is not a baseline file's raises :class:`DamagedBaseline` (nothing changed), unless ``force``:
    then a copy is kept beside it (:func:`~.store.set_aside`) and it is replaced by a new one, its mode kept. A file
    a newer pytest-gemm wrote raises :class:`~.store.NewerBaseline` (nothing changed, ``force`` or not), one of
    another GPU :class:`OtherGpuError`, one that cannot be read or written :class:`BaselineAccessError`
    (nothing changed), carrying the text that would have been written: the whole file, or this run's entries alone
    when the old file could not be read. Records that could not be entries (:func:`~.store.unrecordable`) raise
    :class:`BaselineError`, nothing changed. The file is read, merged and written under its lock. Messages name
    paths with ``shown``. Returns what changed and notes worth printing.
    """
    problem = unrecordable(records)
    if problem:
        raise BaselineError(f"{shown(path)}: {problem}; nothing recorded")
    notes: list[str] = []
    recorded = recorded_info(facts, records, version)
    new = {r.test: entry_from_record(r, recorded) for r in records}
    with locked(path, shown) as unlocked:
        damaged = None
        try:
            baseline = load(path, gpu=gpu, shown=shown) or BaselineFile(path, gpu)
        except BaselineAccessError as exc:
            alone = render(BaselineFile(path, gpu, new))
            raise BaselineAccessError(path, exc.problem, alone, whole=False, shown=shown) from None
        except DamagedBaseline as exc:
            if not force:
                raise
            damaged, baseline = exc.problem, BaselineFile(path, gpu)
        notes += [f"{r.test} was timed while throttled ({', '.join(r.throttle)})" for r in records if r.throttle]
        gone = stale_keys(baseline, new, whole_files, root) if whole_files is not None and root is not None else []
        changes = merge(baseline, new, gone)
        if damaged is None:
            if changes:
                write(baseline, shown, unlocked)
            return changes, notes
        if unlocked:
            raise BaselineAccessError(
                path, f"it is unreadable ({damaged}) and {unlocked}", render(baseline), shown=shown
            )
        try:
            kept = set_aside(path)
        except OSError as exc:
            why = f"it is unreadable ({damaged}) and cannot be kept aside ({os_reason(exc, path, shown)})"
            raise BaselineAccessError(path, why, render(baseline), shown=shown) from None
        try:
            write(baseline, shown)
        except BaselineAccessError:
            kept.unlink(missing_ok=True)  # the unreadable file is still in its place
            raise
        notes.insert(0, f"the unreadable file was kept as {kept.name} ({shown(path)}: {damaged})")
    return changes, notes


def remove(path: Path, keys: Iterable[str], shown: Shown = str) -> Changes:
    """Drop the entries ``keys`` from baseline file ``path``, read again under its lock (what another process
    recorded meanwhile is kept); :class:`BaselineAccessError` when it cannot be written (nothing removed)."""
    with locked(path, shown) as unlocked:
        baseline = load(path, shown=shown)
        if baseline is None:
            return Changes()
        changes = merge(baseline, {}, keys)
        if changes:
            write(baseline, shown, unlocked)
    return changes


def write(baseline: BaselineFile, shown: Shown = str, unlocked: str | None = None) -> None:
    """Save a baseline file, inside :func:`locked` (``unlocked``: why its lock could not be taken, so nothing is
    written); a failure raises :class:`BaselineAccessError` carrying the text it would have held."""
    if unlocked:
        raise BaselineAccessError(baseline.path, unlocked, render(baseline), shown=shown)
    try:
        save(baseline)
    except OSError as exc:
        where, why = shown(baseline.path.parent), os_reason(exc, baseline.path, shown)
        raise BaselineAccessError(
            baseline.path, f"cannot be written in {where}/ ({why})", render(baseline), shown=shown
        ) from None


class KernelCases:
    """The cases kernel files under ``root`` have today, each file read once: which entries' cases are gone."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[str, list[KernelSpec] | KernelFileError | None] = {}  # None: the file is gone

    def _read(self, file: str) -> list[KernelSpec] | None:
        if file not in self._specs:
            source = self.root / file
            try:
                self._specs[file] = load_specs(source, file) if source.exists() else None
            except KernelFileError as exc:
                self._specs[file] = exc
        specs = self._specs[file]
        if isinstance(specs, KernelFileError):
            raise specs
        return specs

    def gone_reason(self, key: str, entry: Mapping[str, Any]) -> str | None:
        """Why the case of entry ``key`` no longer exists (None: it does); KernelFileError when its file is
        unreadable."""
        file = entry["file"]
        specs = self._read(file)
        if specs is None:
            return "its kernel file is gone"
        try:
            shape = Shape.of(entry["shape"])
        except ShapeError:
            raise KernelFileError(file, f"baseline shape {entry['shape']!r} is not MxNxK (or MxNxKbB)") from None
        ids = {
            f"{file}::{spec.name}[{case.id}]"
            for spec in _variant_specs(specs, str(entry["kernel"]))
            for case in expand(spec, [shape], [str(entry["dtype"])])  # none for a dtype no longer declared
            if case.skip_reason is None  # a case a rule skips at this shape is gone too
        }
        return None if key in ids else "the file no longer has this case"


def _variant_specs(specs: list[KernelSpec], kernel: str) -> Iterator[KernelSpec]:
    """The kernels named by an entry's ``kernel`` (``name[variant]``, or ``name``) that still declare its variant,
    each narrowed to that variant alone, so that expanding it gives the entry's few cases, not every variant's (a
    kernel may declare very many; a request's case is found alike: :func:`~pytest_gemm.specs.files.case_from_request`).
    """
    name, bracket, rest = kernel.partition("[")
    if bracket and not rest.endswith("]"):
        return
    variant = rest[:-1] if bracket else ""
    for spec in specs:
        if spec.name != name:
            continue
        names = [param for param, _ in spec.params]
        match = re.fullmatch("-".join(f"{re.escape(param)}(-?[0-9]+)" for param in names), variant)
        if match is None:
            continue
        values = [int(value) for value in match.groups()]
        if all(value in declared for value, (_, declared) in zip(values, spec.params)):
            yield dataclasses.replace(spec, params=tuple((param, (value,)) for param, value in zip(names, values)))


def stale_keys(baseline: BaselineFile, new: Iterable[str], whole_files: Mapping[str, bool], root: Path) -> list[str]:
    """Entries whose case no longer exists, among kernel files this run selected whole."""
    fresh, cases = set(new), KernelCases(root)
    gone = []
    for key, entry in baseline.entries.items():
        if key in fresh or not whole_files.get(entry["file"]):
            continue
        try:
            if cases.gone_reason(key, entry):
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
