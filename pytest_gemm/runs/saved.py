"""A run saved as JSON: writing it, and reading it back checked.

A timed run's pytest-benchmark JSON (``--benchmark-json``) holds each timed case's record under its
benchmark's ``extra_info["gemm"]`` and the GPU under ``machine_info["gpu"]``; pytest-gemm adds a
top-level ``"gemm"`` section (:func:`section`) with the rest: the date and command line, every test's
judged result (a failed case's diagnosis and error map, pooled to ``STORED_CELLS`` a side), and what
``pytest-gemm merge`` needs (the pytest-gemm version, the settings that change results, each kernel
file's SHA-256 and whether the run selected all of it, the shard, how pytest ended). ``--gemm-report
DIR`` writes the same layout to ``DIR/run.json``. Reading checks every value's type and the allowed values
(:mod:`.check`), naming the key path of the first that is wrong; files saved by older versions are read
too (:mod:`.legacy`: their error maps pooled on reading).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar

from ..fileio import MAX_RUN_BYTES, RefusedFile, os_reason, read_regular
from ..records.case_record import (
    LONGEST_GPU_NAME,
    CaseRecord,
    gpu_identity,
    path_problem,
    printable,
    record_problem,
    text_problem,
)
from ..records.plain import PlainError, from_plain, to_plain
from ..records.result import CaseResult
from .check import WrongValue, check, check_present, check_settings, key, shown
from .data import KernelFileRun, RunData, SessionEnd, Shards, stored
from .legacy import legacy_declarations, legacy_record, legacy_tests

__all__ = ["FORMAT", "RunFileError", "read_run", "run_json", "section"]

T = TypeVar("T")
#: version of the "gemm" section: 2 keeps failed cases' diagnoses in ``tests`` (1 had a ``failures`` list), 3 their
#: declarations as a typed record (2 had them flat, some in words)
FORMAT = 3


class RunFileError(ValueError):
    """A file that is not a saved run pytest-gemm can draw."""


def section(data: RunData) -> dict[str, Any]:
    """The ``"gemm"`` section of a saved run (the timing records go in pytest-benchmark's benchmarks)."""
    return {
        "format": FORMAT,
        "date": data.date,
        "command": data.command,
        "notes": data.notes,
        "pytest_gemm": data.version,
        "settings": data.settings,
        "shard": to_plain(data.shard),
        "files": to_plain(data.files),
        "tests": {test: stored(result).to_dict() for test, result in data.tests.items()},
        "wall_s": data.wall_s,
        "session": to_plain(data.session),
    }


def run_json(data: RunData) -> dict[str, Any]:
    """``data`` in the layout of pytest-benchmark's JSON (only the keys pytest-gemm reads)."""
    benchmarks = [
        {"name": r.name, "fullname": r.test, "group": f"{r.dtype} {r.shape}", "extra_info": {"gemm": r.to_dict()}}
        for r in data.records
    ]
    machine: dict[str, Any] = {"gpu": data.gpu}
    if len(data.gpus) > 1:
        machine["gpus"] = list(data.gpus.values())
    return {"machine_info": machine, "benchmarks": benchmarks, "datetime": data.date, "gemm": section(data)}


def _record(cls: type[T], value: Any, where: str, whose: str = "") -> T:
    """A record of type ``cls`` read from ``value``, every field there and of the type it declares (``whose``: whose
    record it is, for a message on a missing field)."""
    check_present(value, cls, where, whose)
    try:
        record = from_plain(cls, value)
    except PlainError as exc:
        raise WrongValue(f"{where}: {exc}") from None
    check(record, cls, where)
    return record


def _at_least(value: float | None, low: float, where: str) -> None:
    if value is not None and not (math.isfinite(value) and value >= low):
        raise WrongValue(f"{where}: expected a finite number of at least {low:g}, got {value!r}")


def _object(raw: Any, name: str, where: str) -> dict[str, Any]:
    """``raw[name]``, an object ({} when absent; null is wrong like any other non-object)."""
    if name not in raw:
        return {}
    value = raw[name]
    if not isinstance(value, dict):
        raise WrongValue(f"{key(where, name)}: expected an object, got {shown(value)}")
    return value


def _list(raw: dict[str, Any], name: str, where: str) -> list[Any]:
    value = raw.get(name, [])
    check(value, list, key(where, name))
    return value


def _shards(value: Any) -> Shards | None:
    if value is None:
        return None
    shard = _record(Shards, value, "gemm.shard")
    _at_least(shard.count, 1, "gemm.shard.count")
    if any(not 1 <= i <= shard.count for i in shard.index) or len(set(shard.index)) < len(shard.index):
        raise WrongValue(f"gemm.shard.index: expected distinct shards from 1 to {shard.count}, got {list(shard.index)}")
    return shard


def _tests(extra: dict[str, Any]) -> dict[str, CaseResult]:
    raw = legacy_tests(_object(extra, "tests", "gemm"), _list(extra, "failures", "gemm"))
    tests = {}
    for test, value in raw.items():
        where = key("gemm.tests", test)
        _path(test, where)
        if isinstance(value, dict) and "diagnosis" in value:
            value = {**value, "diagnosis": legacy_declarations(value["diagnosis"], key(where, "diagnosis"))}
        result = stored(_record(CaseResult, value, where))
        _at_least(result.duration_s, 0, key(where, "duration_s"))
        _at_least(result.worker_s, 0, key(where, "worker_s"))
        tests[test] = result
    return tests


def _merge_keys(extra: dict[str, Any]) -> dict[str, Any]:
    """The keys ``pytest-gemm merge`` reads, checked (absent in files saved before they existed)."""
    files = {k: _record(KernelFileRun, v, key("gemm.files", k)) for k, v in _object(extra, "files", "gemm").items()}
    for file in files:
        _path(file, key("gemm.files", file))
    settings = _object(extra, "settings", "gemm")
    check_settings(settings, "gemm.settings")
    check(extra.get("wall_s"), float | None, "gemm.wall_s")
    _at_least(extra.get("wall_s"), 0, "gemm.wall_s")
    session = _record(SessionEnd, extra["session"], "gemm.session") if extra.get("session") is not None else None
    for name in ("collected", "selected", "ran", "maxfail"):
        _at_least(getattr(session, name, None), 0, f"gemm.session.{name}")
    check(extra.get("pytest_gemm", ""), str | None, "gemm.pytest_gemm")
    return {
        "version": str(extra.get("pytest_gemm") or ""),
        "settings": settings,
        "shard": _shards(extra.get("shard")),
        "files": files,
        "wall_s": extra.get("wall_s"),
        "session": session,
    }


def _records(raw: dict[str, Any], settings: dict[str, Any]) -> list[CaseRecord]:
    """The timed cases: each benchmark's ``extra_info["gemm"]`` (benchmarks of other tests have none)."""
    records = []
    for i, bench in enumerate(raw["benchmarks"]):
        where = f"benchmarks[{i}]"
        check(bench, dict, where)
        info = _object(bench, "extra_info", where) if bench.get("extra_info") is not None else {}
        if "gemm" in info:
            value = legacy_record(_object(info, "gemm", f"{where}.extra_info"), settings)
            test = value.get("test") or bench.get("fullname")
            whose = f"the timing record of {printable(test)}" if isinstance(test, str) and test else "the timing record"
            records.append(_record(CaseRecord, value, f"{where}.extra_info.gemm", whose))
            problem = record_problem(records[-1])
            if problem:
                raise WrongValue(f"{where}.extra_info.gemm.{problem} (case {printable(records[-1].test)})")
    return records


def _path(name: str, where: str) -> None:
    """A test id or kernel file's path, a key of the run, is a file inside the project (:func:`path_problem`)."""
    problem = path_problem("the key", name)
    if problem:
        raise WrongValue(f"{where}: {problem}")


def _gpu_name(facts: dict[str, Any], where: str) -> None:
    """A GPU's facts name its model (when they do) by the rule of a record's ``gpu``: it names baseline files."""
    if facts.get("name") is not None:
        problem = text_problem(f"{where}.name", facts["name"], LONGEST_GPU_NAME)
        if problem:
            raise WrongValue(problem)


def read_run(path: Path) -> RunData:
    """A saved run: pytest-benchmark's JSON of a timed run, or a report's ``run.json``.

    :class:`RunFileError` names the file and, for a value that is wrong, its key path.
    """
    not_run = f"{path}: not a pytest-benchmark JSON file"
    try:
        raw = json.loads(read_regular(path, MAX_RUN_BYTES, "a saved run"))
    except RefusedFile as exc:
        raise RunFileError(f"{path}: {exc}") from None
    except OSError as exc:
        raise RunFileError(f"{not_run} (cannot be read: {os_reason(exc, path)})") from None
    except ValueError as exc:
        raise RunFileError(f"{not_run} ({exc})") from None
    except RecursionError:
        raise RunFileError(f"{not_run} (nested too deeply to be read)") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("benchmarks"), list):
        raise RunFileError(f"{path}: not a pytest-benchmark JSON file (no list of benchmarks)")
    try:
        extra = _object(raw, "gemm", "")
        notes = _list(extra, "notes", "gemm")
        check(notes, list[str], "gemm.notes")
        for name in ("date", "command"):
            check(extra.get(name, ""), str | None, key("gemm", name))
        merged = _merge_keys(extra)
        records = _records(raw, merged["settings"])
        tests = _tests(extra)
        machine = _object(raw, "machine_info", "")
        gpu = _object(machine, "gpu", "machine_info") if machine.get("gpu") is not None else {}
        gpus = _list(machine, "gpus", "machine_info") if machine.get("gpus") is not None else []
        check(gpus, list[dict], "machine_info.gpus")
        for where, facts in [("machine_info.gpu", gpu), *((f"machine_info.gpus[{i}]", g) for i, g in enumerate(gpus))]:
            _gpu_name(facts, where)
    except WrongValue as exc:
        raise RunFileError(f"{path}: {exc}") from None
    if not records and not tests and merged["shard"] is None:
        raise RunFileError(f"{path}: holds no pytest-gemm cases (was it written by a pytest --gemm-kernels run?)")
    # Records saved before they carried their GPU's identity get it from the facts, when only one GPU can have run them.
    alone = not gpus and len(gpu.get("visible_devices") or [gpu]) == 1
    identity = gpu_identity(gpu) if alone else ""
    if identity:
        records = [r if r.gpu_id or r.gpu != gpu.get("name") else r.with_identity(identity) for r in records]
    data = RunData(
        gpu=dict(gpu),
        tests=tests,
        date=str(extra.get("date") or raw.get("datetime") or ""),
        command=str(extra.get("command") or ""),
        notes=list(notes),
        gpus={str(g["name"]): dict(g) for g in gpus if g.get("name")},
        **merged,
    )
    data.with_timing(records)
    return data
