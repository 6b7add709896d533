"""Baseline files: one JSON file per GPU model under ``baselines/``, read strictly, written atomically.

A file holds, for each case (keyed by its test id: kernel file, kernel, variant, dtype, shape and
alpha/beta case), the gated metrics with their intervals and how they were recorded. Keys are
sorted and the formatting is fixed so that diffs review well. What an entry must hold is checked by
one rule (:func:`entry_problem`), both when a file is read and before a timed case is recorded.
Nothing here touches a GPU.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fileio import atomic_write, os_reason
from ..records.case_record import CaseRecord, figure_problem, nvml_values
from .gpus import gpu_record, gpus_problem, numbers_problem, with_other_gpus

__all__ = [
    "SCHEMA",
    "BaselineAccessError",
    "BaselineError",
    "BaselineFile",
    "Changes",
    "OtherGpuError",
    "baseline_path",
    "baseline_paths",
    "entry_from_record",
    "entry_problem",
    "for_gpu",
    "gpu_slug",
    "load",
    "merge",
    "recorded_info",
    "render",
    "save",
    "set_aside",
    "unrecordable",
]

SCHEMA = 1
_ENTRY_KEYS = frozenset(
    {
        "file",
        "kernel",
        "dtype",
        "shape",
        "ab",
        "ratio",
        "ratio_ci",
        "median_s",
        "ci_s",
        "tflops",
        "samples",
        "source_sha256",
        "recorded",
    }
)


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file and the problem."""


#: how a message names a path (the plugin: relative to the rootdir; the command: as given)
Shown = Callable[[Path], str]


class BaselineAccessError(BaselineError):
    """A baseline file or its folder that cannot be read or written (permissions, a file in the folder's
    place); never set aside. ``text`` is what an update would have written (None: nothing), ``whole``
    whether that is the whole file or only the update's own entries (the old file could not be read)."""

    def __init__(
        self, path: Path, problem: str, text: str | None = None, *, whole: bool = True, shown: Shown = str
    ) -> None:
        super().__init__(f"{shown(path)}: {problem}")
        self.path, self.problem, self.text, self.whole = path, problem, text, whole


class OtherGpuError(BaselineError):
    """A readable baseline file recorded on another GPU model: never used, never overwritten."""


def gpu_slug(name: str) -> str:
    """The file name stem for a GPU model: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise BaselineError(f"cannot name a baseline file after the GPU {name!r}")
    return slug


def baseline_path(folder: Path, gpu: str) -> Path:
    """The baseline file of a GPU model in ``folder``."""
    return folder / f"{gpu_slug(gpu)}.json"


@dataclass
class BaselineFile:
    """The baselines of one GPU model."""

    path: Path
    gpu: str
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)


def load(path: Path, *, gpu: str | None = None, shown: Shown = str) -> BaselineFile | None:
    """Read and check a baseline file; None when it does not exist.

    ``gpu``, when given, must be the model the file was recorded on: a baseline from another
    GPU model is never used. Each fault gets its own advice, naming the file (an access error
    names paths with ``shown``).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        problem = f"cannot be read ({os_reason(exc, path, shown)})"
        raise BaselineAccessError(path, problem, shown=shown) from None
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{path}: not UTF-8 text (byte {exc.start}), so not a baseline file; {_REDO}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); fix it there, {_REDO}"
        ) from None
    except RecursionError:
        raise BaselineError(f"{path}: nested too deeply to be a baseline file; {_REDO}") from None
    problem = _file_problem(data)
    if problem:
        raise BaselineError(f"{path}: {problem}")
    model, entries = data["gpu"], data["entries"]
    for key, entry in entries.items():
        problem = entry_problem(entry)
        if problem:
            raise BaselineError(
                f"{path}: entry {key!r}: {problem}; fix or delete that entry, or restore the file from version control"
            )
    baseline = BaselineFile(path, model, dict(entries))
    return baseline if gpu is None else for_gpu(baseline, gpu)


def for_gpu(baseline: BaselineFile, gpu: str) -> BaselineFile:
    """``baseline``, when it was recorded on ``gpu``; :class:`OtherGpuError` otherwise."""
    if baseline.gpu != gpu:
        raise OtherGpuError(f"{baseline.path}: recorded on {baseline.gpu!r}, not on this GPU ({gpu!r}); it is not used")
    return baseline


#: the advice for a file that is not a baseline file at all
_REDO = (
    "restore it from version control, or record it again with --gemm-update-baselines "
    "(which keeps this file next to the new one)"
)


def _file_problem(data: Any) -> str | None:
    """What is wrong with a baseline file's top level, with advice that fits (None: nothing)."""
    if not isinstance(data, dict):
        return f"expected a JSON object with 'schema', 'gpu' and 'entries', found {_kind(data)}; {_REDO}"
    if "schema" not in data:
        found = f"its fields are {', '.join(map(repr, sorted(data)))}" if data else "it is an empty object"
        return f"no 'schema' field, so not a pytest-gemm baseline file ({found}); {_REDO}"
    schema = data["schema"]
    if not isinstance(schema, int) or isinstance(schema, bool):
        return (
            f"'schema' must be the integer {SCHEMA}, found {_kind(schema)} {json.dumps(schema)}; "
            f'write it as "schema": {SCHEMA} if the rest of the file is right'
        )
    if schema > SCHEMA:
        return (
            f"schema version {schema} is not one this pytest-gemm reads ({SCHEMA}): a newer pytest-gemm "
            "wrote it; upgrade pytest-gemm to use it"
        )
    if schema != SCHEMA:
        return f"schema version {schema} is not one this pytest-gemm reads ({SCHEMA}) and none writes it; {_REDO}"
    wrong = [
        f"'{key}': {json.dumps(data.get(key))}"
        for key, kind in (("gpu", str), ("entries", dict))
        if not isinstance(data.get(key), kind)
    ]
    if wrong:
        return (
            f"expected 'gpu' (a string) and 'entries' (an object), found {', '.join(wrong)}; "
            "fix it by hand, or restore it from version control"
        )
    return None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def entry_problem(entry: Any) -> str | None:
    """What is wrong with a baseline entry (None: nothing): the rule for reading a file and for recording a case."""
    if not isinstance(entry, dict):
        return "expected an object"
    missing = sorted(_ENTRY_KEYS - entry.keys())
    if missing:
        return f"missing {', '.join(missing)}"
    return figure_problem("tflops", entry["tflops"]) or numbers_problem(entry) or gpus_problem(entry)


#: most cases a message names
_NAMED = 10


def unrecordable(records: Iterable[CaseRecord]) -> str | None:
    """Why these timed cases cannot all be recorded (None: they can), by the rule a file's entries are read with;
    each case that cannot is named (the first ``_NAMED``), with its field."""
    bad = [f"{r.test}: {problem}" for r in records if (problem := entry_problem(entry_from_record(r, {})))]
    if not bad:
        return None
    more = f"; and {len(bad) - _NAMED} more" if len(bad) > _NAMED else ""
    return f"{len(bad)} timed case(s) cannot be recorded as baselines: {'; '.join(bad[:_NAMED])}{more}"


def baseline_paths(folder: Path) -> list[Path]:
    """The baseline files in a folder (files set aside as unreadable are not among them)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if ".unreadable-" not in p.name and not p.name.startswith("."))


def render(baseline: BaselineFile) -> str:
    """The file's text: sorted keys, two-space indent, one trailing newline."""
    data = {"schema": SCHEMA, "gpu": baseline.gpu, "entries": baseline.entries}
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def save(baseline: BaselineFile) -> None:
    """Write atomically (a temporary file in the same folder, then a rename over the old one), keeping the mode."""
    text = render(baseline)
    baseline.path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(baseline.path, text.encode("utf-8"))


def set_aside(path: Path) -> Path:
    """Move an unreadable baseline file out of the way (kept, never deleted) and return where it went."""
    target = path.with_name(f"{path.stem}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
    os.replace(path, target)
    return target


def entry_from_record(record: CaseRecord, recorded: Mapping[str, Any]) -> dict[str, Any]:
    """A baseline entry from a timed case's record (with the record of its GPU, when that GPU is known)."""
    entry = {
        "file": record.file,
        "kernel": record.kernel,
        "dtype": record.dtype,
        "shape": record.shape.id,
        "ab": record.ab,
        "ratio": record.ratio,
        "ratio_ci": list(record.ratio_ci),
        "median_s": record.median_s,
        "ci_s": list(record.ci_s),
        "tflops": record.tflops,
        "samples": record.samples,
        "source_sha256": record.source_sha256,
        "recorded": {**recorded, "timer": record.timer},  # the clock, per entry: a run may fall back case by case
    }
    if record.gpu_id:
        entry["gpus"] = {record.gpu_id: gpu_record(entry)}
    return entry


def recorded_info(gpu: Mapping[str, Any], records: Iterable[CaseRecord], plugin_version: str) -> dict[str, Any]:
    """How a run was recorded: software versions, and the clocks seen while timing."""
    clocks = nvml_values(records, "sm_clock_mhz")
    return {
        "pytest_gemm": plugin_version,
        "cupy": gpu.get("cupy_version"),
        "cublas": gpu.get("cublas_version"),
        "driver": gpu.get("driver_version"),
        "sm_clock_mhz": [min(clocks), max(clocks)] if clocks else None,
        "date": time.strftime("%Y-%m-%d"),
    }


@dataclass
class Changes:
    """What an update did to one baseline file."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def summary(self) -> str:
        return f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed"


def merge(baseline: BaselineFile, new: Mapping[str, dict[str, Any]], remove: Iterable[str] = ()) -> Changes:
    """Put ``new`` entries into ``baseline`` and drop the keys in ``remove``; report what changed.

    A new entry keeps the other GPUs' records of the old one when both were recorded alike (``same_recording``).
    """
    changes = Changes()
    for key, entry in sorted(new.items()):
        old = baseline.entries.get(key)
        if old is None:
            changes.added.append(key)
        else:
            entry = with_other_gpus(entry, old)
            if _measured(old) != _measured(entry):
                changes.changed.append(key)
        baseline.entries[key] = entry
    for key in sorted(set(remove) - set(new)):
        if baseline.entries.pop(key, None) is not None:
            changes.removed.append(key)
    return changes


def _measured(entry: Mapping[str, Any]) -> tuple:
    gpus = entry.get("gpus") or {}
    records = tuple(sorted((gpu, r["ratio"], r["median_s"]) for gpu, r in gpus.items()))
    return (entry["ratio"], tuple(entry["ratio_ci"]), entry["median_s"], entry["source_sha256"], records)
