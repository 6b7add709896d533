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
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fileio import MAX_BASELINE_BYTES, RefusedFile, atomic_write, os_reason, read_regular
from ..records.case_record import (
    LONGEST_GPU_NAME,
    CaseRecord,
    dtype_problem,
    figures_problem,
    nvml_values,
    path_problem,
    printable,
    quoted,
    text_problem,
)
from .gpus import ENTRY_FIGURES, gpu_record, gpus_problem, with_other_gpus

__all__ = [
    "SCHEMA",
    "BaselineAccessError",
    "BaselineError",
    "BaselineFile",
    "Changes",
    "DamagedBaseline",
    "NewerBaseline",
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


class DamagedBaseline(BaselineError):
    """A baseline file whose text is not a baseline file's (not JSON, a wrong schema, a bad entry): never changed,
    except by recording it afresh (``force``), which keeps it aside first. ``problem``: what is wrong, without the
    file's name and the advice the message gives."""

    def __init__(self, path: Path, problem: str, advice: str, shown: Shown = str) -> None:
        super().__init__(f"{shown(path)}: {problem}; {advice}")
        self.path, self.problem = path, problem


class NewerBaseline(BaselineError):
    """A baseline file written by a newer pytest-gemm (a schema version above :data:`SCHEMA`): never used, and never
    set aside or replaced, not even by recording afresh (``force``), since this version would lose what it holds."""

    def __init__(self, path: Path, schema: int, shown: Shown = str) -> None:
        super().__init__(
            f"{shown(path)}: schema version {schema} is not one this pytest-gemm reads ({SCHEMA}): a newer pytest-gemm "
            "wrote it; upgrade pytest-gemm to use or update it (this version never replaces it, not even with --force "
            "or --gemm-update-baselines)"
        )
        self.path = path


class OtherGpuError(BaselineError):
    """A readable baseline file recorded on another GPU model: never used, never overwritten."""


def gpu_slug(name: str) -> str:
    """The file name stem for a GPU model: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'; at most
    ``LONGEST_GPU_NAME`` characters, so that the file's name and its lock file's can be made."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug or len(slug) > LONGEST_GPU_NAME:
        said = "nothing to name it by" if not slug else f"over {LONGEST_GPU_NAME} characters"
        raise BaselineError(f"cannot name a baseline file after the GPU {quoted(name, 60)} ({said})")
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
    GPU model is never used. A file that cannot be read (no permission, not a regular file, over
    ``MAX_BASELINE_BYTES``) raises :class:`BaselineAccessError`, naming paths with ``shown``; one a newer
    pytest-gemm wrote :class:`NewerBaseline`; one whose text is not a baseline file's :class:`DamagedBaseline`, with
    advice that fits the fault.
    """
    try:
        data = json.loads(read_regular(path, MAX_BASELINE_BYTES, "a baseline file").decode("utf-8"))
    except FileNotFoundError:
        return None
    except RefusedFile as exc:
        raise BaselineAccessError(path, str(exc), shown=shown) from None
    except OSError as exc:
        problem = f"cannot be read ({os_reason(exc, path, shown)})"
        raise BaselineAccessError(path, problem, shown=shown) from None
    except UnicodeDecodeError as exc:
        raise DamagedBaseline(
            path, f"not UTF-8 text (byte {exc.start}), so not a baseline file", _REDO, shown=shown
        ) from None
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        raise DamagedBaseline(path, problem, f"fix it there, {_REDO}", shown=shown) from None
    except RecursionError:
        raise DamagedBaseline(path, "nested too deeply to be a baseline file", _REDO, shown=shown) from None
    if _newer(data):
        raise NewerBaseline(path, data["schema"], shown=shown)
    wrong = _file_problem(data)
    if wrong:
        raise DamagedBaseline(path, *wrong, shown=shown)
    model, entries = data["gpu"], data["entries"]
    for key, entry in entries.items():
        problem = entry_problem(key, entry)
        if problem:
            advice = "fix or delete that entry, or restore the file from version control"
            raise DamagedBaseline(path, f"entry {key!r}: {problem}", advice, shown=shown)
    baseline = BaselineFile(path, model, dict(entries))
    return baseline if gpu is None else for_gpu(baseline, gpu)


def for_gpu(baseline: BaselineFile, gpu: str) -> BaselineFile:
    """``baseline``, when it was recorded on ``gpu``; :class:`OtherGpuError` otherwise."""
    if baseline.gpu != gpu:
        raise OtherGpuError(f"{baseline.path}: recorded on {baseline.gpu!r}, not on this GPU ({gpu!r}); it is not used")
    return baseline


#: the advice for a file that is not a baseline file at all
_REDO = (
    "restore it from version control, or record it again with --gemm-update-baselines or pytest-gemm update "
    "--force (either keeps this file next to the new one)"
)


def _newer(data: Any) -> bool:
    """Whether a baseline file's top level says a newer pytest-gemm wrote it: a schema version above ``SCHEMA``."""
    schema = data.get("schema") if isinstance(data, dict) else None
    return isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA


def _file_problem(data: Any) -> tuple[str, str] | None:
    """What is wrong with a baseline file's top level (not of a newer schema), and the advice that fits (None:
    nothing)."""
    if not isinstance(data, dict):
        return f"expected a JSON object with 'schema', 'gpu' and 'entries', found {_kind(data)}", _REDO
    if "schema" not in data:
        found = f"its fields are {', '.join(map(repr, sorted(data)))}" if data else "it is an empty object"
        return f"no 'schema' field, so not a pytest-gemm baseline file ({found})", _REDO
    schema = data["schema"]
    if not isinstance(schema, int) or isinstance(schema, bool):
        return (
            f"'schema' must be the integer {SCHEMA}, found {_kind(schema)} {json.dumps(schema)}",
            f'write it as "schema": {SCHEMA} if the rest of the file is right',
        )
    if schema != SCHEMA:
        return f"schema version {schema} is not one this pytest-gemm reads ({SCHEMA}) and none writes it", _REDO
    wrong = [
        f"'{key}': {json.dumps(data.get(key))}"
        for key, kind in (("gpu", str), ("entries", dict))
        if not isinstance(data.get(key), kind)
    ]
    if wrong:
        problem = f"expected 'gpu' (a string) and 'entries' (an object), found {', '.join(wrong)}"
        return problem, "fix it by hand, or restore it from version control"
    problem = text_problem("'gpu'", data["gpu"], LONGEST_GPU_NAME)
    return (problem, "fix it by hand, or restore it from version control") if problem else None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def entry_problem(key: str, entry: Any) -> str | None:
    """What is wrong with the baseline entry ``key`` (None: nothing): the rule for reading a file and for recording
    a case. Its key and file name a file inside the project, its kernel is text (both by
    :func:`~pytest_gemm.records.case_record.text_problem`), its dtype is known, its figures hold by
    :func:`~pytest_gemm.records.case_record.figures_problem` (each interval ordered and containing its estimate),
    and so do its GPU records."""
    if not isinstance(entry, dict):
        return "expected an object"
    missing = sorted(_ENTRY_KEYS - entry.keys())
    if missing:
        return f"missing {', '.join(missing)}"
    return (
        path_problem("its key", key)
        or path_problem("file", entry["file"])
        or text_problem("kernel", entry["kernel"])
        or dtype_problem(entry["dtype"])
        or figures_problem(entry, ENTRY_FIGURES)
        or gpus_problem(entry)
    )


#: most cases a message names
_NAMED = 10


def unrecordable(records: Iterable[CaseRecord]) -> str | None:
    """Why these timed cases cannot all be recorded (None: they can), by the rule a file's entries are read with;
    each case that cannot is named (the first ``_NAMED``), with its field."""
    bad = [
        f"{printable(r.test)}: {problem}"
        for r in records
        if (problem := entry_problem(r.test, entry_from_record(r, {})))
    ]
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
    """Keep a copy of an unreadable baseline file beside it (``<model>.unreadable-<time>.json``, never read as a
    baseline file) and return where; the file itself stays, for the update to replace with its mode kept."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 100):
        target = path.with_name(f"{path.stem}.unreadable-{stamp}{f'-{n}' * (n > 1)}{path.suffix}")
        try:
            os.link(path, target)
            return target
        except FileExistsError:
            continue
        except OSError:  # a file system without hard links
            if not os.path.lexists(target):
                shutil.copy2(path, target)
                return target
    raise FileExistsError(f"no free name to keep {path} aside")


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
