"""What the pictures and the HTML report are drawn from, and how a run carries it in JSON.

A run's report data is its timed records, the GPU's facts, its failed verifications with their
error maps, its date and its command line. A timed run's pytest-benchmark JSON (``--benchmark-json``)
holds the records under each benchmark's ``extra_info["gemm"]`` and the GPU under
``machine_info["gpu"]``; pytest-gemm adds a top-level ``"gemm"`` section (:func:`section`) with the
rest, and what ``pytest-gemm merge`` needs to combine runs: the pytest-gemm version and the settings
that change results, each kernel file's SHA-256 and whether the run selected all of it, the shard the
run is, every test's outcome and seconds (and each collection error), and how pytest ended. ``--gemm-report
DIR`` writes the same layout to ``DIR/run.json`` at the end of every run, so a report can always be drawn
again with ``pytest-gemm plot``, even from a run with no timed case. Files saved before these keys existed
are still read (the keys are then empty). Reading checks every value's type and the allowed values
(:mod:`.run_check`), naming the key path of the first that is wrong.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..records.case_record import CaseRecord, gpu_identity
from ..records.outcome import ErrorMap
from ..records.plain import PlainError, from_plain, to_plain
from .run_check import WrongValue, check, check_settings, key, shown

__all__ = [
    "FailedCase",
    "ItemResult",
    "KernelFileRun",
    "RunData",
    "RunFileError",
    "SessionEnd",
    "Shards",
    "read_run",
    "run_json",
    "section",
]

T = TypeVar("T")
FORMAT = 1  # version of the "gemm" section (keys added since are optional: older files read as before)


class RunFileError(ValueError):
    """A file that is not a saved run pytest-gemm can draw."""


@dataclass(frozen=True)
class FailedCase:
    """A case whose output was wrong, with the map of where."""

    test: str  # the pytest node id
    dtype: str
    shape: str  # MxNxK
    alpha: float
    beta: float
    diagnosis: tuple[str, ...]  # one sentence per thing that is wrong, as the failure text says it
    error_map: ErrorMap

    @property
    def name(self) -> str:
        return self.test.split("::")[-1]

    def to_dict(self) -> dict[str, Any]:
        plain = to_plain(self)
        plain["error_map"]["ratio"] = _round(plain["error_map"]["ratio"])
        return plain

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FailedCase:
        return from_plain(cls, data)


@dataclass(frozen=True)
class ItemResult:
    """How one test of the run ended: pytest's outcome, the first line of its failure (or the skip reason),
    the seconds pytest measured for it (setup, call and teardown), the seconds a GPU worker spent on it,
    and what kind of test it is. A collection error is kept as a failed "test" of kind ``collect`` under
    the id of what failed to collect (a kernel file, a test module)."""

    outcome: Literal["passed", "failed", "skipped"]
    message: str = ""
    duration_s: float = 0.0
    # case (a GPU case), compile, sanitize, test (not pytest-gemm's), or collect (a collection error)
    kind: Literal["case", "compile", "sanitize", "test", "collect"] = "test"
    worker_s: float = 0.0  # a GPU case: the worker's own seconds in its phases (load, verify, time)


@dataclass(frozen=True)
class KernelFileRun:
    """A kernel file as a run saw it: the SHA-256 of its text, and whether the run selected all of its cases
    (no -k, -m or test id narrowed it; a shard of the run does not count as narrowing)."""

    sha256: str = ""
    whole: bool = False


@dataclass(frozen=True)
class Shards:
    """Which of ``count`` shards of a suite a run holds (counted from 1)."""

    index: tuple[int, ...]
    count: int

    @property
    def complete(self) -> bool:
        return set(self.index) == set(range(1, self.count + 1))

    @property
    def missing(self) -> list[int]:
        """The shards of the suite this run does not hold."""
        return sorted(set(range(1, self.count + 1)) - set(self.index))

    def __str__(self) -> str:
        if not self.index:
            return f"shards of different splits (up to {self.count})"
        noun = "shard" if len(self.index) == 1 else "shards"
        return f"{noun} {', '.join(map(str, self.index))} of {self.count}"


@dataclass(frozen=True)
class SessionEnd:
    """How pytest's session ended: its exit status (2: interrupted), how many tests it collected, how many
    it selected (after -k, -m, --lf and the shard; None under pytest-xdist, whose workers select), how many
    ran, and ``-x``/``--maxfail`` (0: no limit)."""

    exit_status: int
    collected: int | None = None
    selected: int | None = None
    ran: int = 0
    maxfail: int = 0


@dataclass
class RunData:
    """Everything a report shows, and what ``pytest-gemm merge`` checks and combines."""

    gpu: dict[str, Any]
    records: list[CaseRecord]
    failures: list[FailedCase] = field(default_factory=list)
    date: str = ""  # ISO 8601, as pytest-benchmark writes it
    command: str = ""  # the command line that made the run
    notes: list[str] = field(default_factory=list)  # what the report should say about its data
    version: str = ""  # the pytest-gemm that made the run ('' when the file does not say)
    settings: dict[str, Any] = field(default_factory=dict)  # the settings that change results
    shard: Shards | None = None  # None: not a shard of a larger suite
    files: dict[str, KernelFileRun] = field(default_factory=dict)  # kernel file (as ids show it) -> what the run saw
    tests: dict[str, ItemResult] = field(default_factory=dict)  # test id -> how it ended
    wall_s: float | None = None  # seconds from the start of pytest until the run was saved
    gpus: dict[str, dict[str, Any]] = field(default_factory=dict)  # GPU model -> facts, when a run has several
    session: SessionEnd | None = None  # how pytest ended (None: not said, or a merged run)

    @property
    def gpu_name(self) -> str:
        return str(self.gpu.get("name") or next((r.gpu for r in self.records if r.gpu), "") or "unknown GPU")

    def facts(self, model: str) -> dict[str, Any]:
        """The device facts of GPU ``model`` in this run ({} when the run does not have them)."""
        if model in self.gpus:
            return self.gpus[model]
        return self.gpu if self.gpu.get("name", model) == model else {}

    @property
    def day(self) -> str:
        """The run's date, YYYY-MM-DD ('' when unknown)."""
        return self.date[:10]


def _round(value: Any) -> Any:
    """Ratios to 4 significant digits: an error map stays small in JSON and says the same."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def section(data: RunData) -> dict[str, Any]:
    """The ``"gemm"`` section of a saved run: format, date, command line, failed cases and notes, and what
    ``pytest-gemm merge`` reads (version, settings, shard, kernel files, tests, wall time, how pytest ended)."""
    failures = [case.to_dict() for case in data.failures]
    return {
        "format": FORMAT,
        "date": data.date,
        "command": data.command,
        "failures": failures,
        "notes": data.notes,
        "pytest_gemm": data.version,
        "settings": data.settings,
        "shard": to_plain(data.shard),
        "files": to_plain(data.files),
        "tests": to_plain(data.tests),
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


def _record(cls: type[T], value: Any, where: str) -> T:
    """A record of type ``cls`` read from ``value``, every field of the type it declares."""
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


def _merge_keys(extra: dict[str, Any]) -> dict[str, Any]:
    """The keys ``pytest-gemm merge`` reads, checked (absent in files saved before they existed)."""
    files = {k: _record(KernelFileRun, v, key("gemm.files", k)) for k, v in _object(extra, "files", "gemm").items()}
    tests = {k: _record(ItemResult, v, key("gemm.tests", k)) for k, v in _object(extra, "tests", "gemm").items()}
    for test, result in tests.items():
        _at_least(result.duration_s, 0, key(key("gemm.tests", test), "duration_s"))
        _at_least(result.worker_s, 0, key(key("gemm.tests", test), "worker_s"))
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
        "tests": tests,
        "wall_s": extra.get("wall_s"),
        "session": session,
    }


def _records(raw: dict[str, Any]) -> list[CaseRecord]:
    """The timed cases: each benchmark's ``extra_info["gemm"]`` (benchmarks of other tests have none)."""
    records = []
    for i, bench in enumerate(raw["benchmarks"]):
        where = f"benchmarks[{i}]"
        check(bench, dict, where)
        info = _object(bench, "extra_info", where) if bench.get("extra_info") is not None else {}
        if "gemm" in info:
            records.append(
                _record(CaseRecord, _object(info, "gemm", f"{where}.extra_info"), f"{where}.extra_info.gemm")
            )
    return records


def read_run(path: Path) -> RunData:
    """A saved run: pytest-benchmark's JSON of a timed run, or a report's ``run.json``.

    :class:`RunFileError` names the file and, for a value that is wrong, its key path.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFileError(f"{path}: not a pytest-benchmark JSON file ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("benchmarks"), list):
        raise RunFileError(f"{path}: not a pytest-benchmark JSON file (no list of benchmarks)")
    try:
        records = _records(raw)
        extra = _object(raw, "gemm", "")
        failures = [
            _record(FailedCase, f, f"gemm.failures[{i}]") for i, f in enumerate(_list(extra, "failures", "gemm"))
        ]
        notes = _list(extra, "notes", "gemm")
        check(notes, list[str], "gemm.notes")
        for name in ("date", "command"):
            check(extra.get(name, ""), str | None, key("gemm", name))
        merged = _merge_keys(extra)
        machine = _object(raw, "machine_info", "")
        gpu = _object(machine, "gpu", "machine_info") if machine.get("gpu") is not None else {}
        gpus = _list(machine, "gpus", "machine_info") if machine.get("gpus") is not None else []
        check(gpus, list[dict], "machine_info.gpus")
    except WrongValue as exc:
        raise RunFileError(f"{path}: {exc}") from None
    if not records and not failures and not merged["tests"] and merged["shard"] is None:
        raise RunFileError(f"{path}: holds no pytest-gemm cases (was it written by a pytest --gemm-kernels run?)")
    # Records saved before they carried their GPU's identity get it from the facts, when only one GPU can have run them.
    alone = not gpus and len(gpu.get("visible_devices") or [gpu]) == 1
    identity = gpu_identity(gpu) if alone else ""
    if identity:
        records = [r if r.gpu_id or r.gpu != gpu.get("name") else replace(r, gpu_id=identity) for r in records]
    return RunData(
        gpu=dict(gpu),
        records=records,
        failures=failures,
        date=str(extra.get("date") or raw.get("datetime") or ""),
        command=str(extra.get("command") or ""),
        notes=list(notes),
        gpus={str(g["name"]): dict(g) for g in gpus if g.get("name")},
        **merged,
    )
