"""What the pictures and the HTML report are drawn from, and how a run carries it in JSON.

A run's report data is its timed records, the GPU's facts, its failed verifications with their
error maps, its date and its command line. A timed run's pytest-benchmark JSON (``--benchmark-json``)
holds the records under each benchmark's ``extra_info["gemm"]`` and the GPU under
``machine_info["gpu"]``; pytest-gemm adds a top-level ``"gemm"`` section (:func:`section`) with the
rest, and what ``pytest-gemm merge`` needs to combine runs: the pytest-gemm version and the settings
that change results, each kernel file's SHA-256 and whether the run selected all of it, the shard the
run is, and every test's outcome and seconds. ``--gemm-report DIR`` writes the same layout to
``DIR/run.json``, so a report can always be drawn again with ``pytest-gemm plot``, even from a run with
no timed case. Files saved before these keys existed are still read (the keys are then empty).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records.case_record import CaseRecord
from ..records.outcome import ErrorMap
from ..records.plain import PlainError, from_plain, to_plain

__all__ = [
    "FailedCase",
    "ItemResult",
    "KernelFileRun",
    "RunData",
    "RunFileError",
    "Shards",
    "read_run",
    "run_json",
    "section",
]

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
    and what kind of test it is."""

    outcome: str  # passed, failed or skipped
    message: str = ""
    duration_s: float = 0.0
    kind: str = "test"  # case (a GPU case), compile, sanitize, or test (not pytest-gemm's)
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

    def __str__(self) -> str:
        if not self.index:
            return f"shards of different splits (up to {self.count})"
        noun = "shard" if len(self.index) == 1 else "shards"
        return f"{noun} {', '.join(map(str, self.index))} of {self.count}"


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
    ``pytest-gemm merge`` reads (version, settings, shard, kernel files, tests, wall time)."""
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


def _merge_keys(path: Path, extra: dict[str, Any]) -> dict[str, Any]:
    """The keys ``pytest-gemm merge`` reads, checked (absent in files saved before they existed)."""
    try:
        shard = from_plain(Shards, extra["shard"]) if extra.get("shard") is not None else None
        files = {str(k): from_plain(KernelFileRun, v) for k, v in (extra.get("files") or {}).items()}
        tests = {str(k): from_plain(ItemResult, v) for k, v in (extra.get("tests") or {}).items()}
        settings = extra.get("settings") or {}
        wall = extra.get("wall_s")
        if not isinstance(settings, dict) or not (wall is None or isinstance(wall, (int, float))):
            raise PlainError("'settings' must be an object and 'wall_s' a number")
    except (PlainError, AttributeError) as exc:
        raise RunFileError(f"{path}: its pytest-gemm section cannot be read ({exc})") from None
    version = str(extra.get("pytest_gemm") or "")
    return {"version": version, "settings": settings, "shard": shard, "files": files, "tests": tests, "wall_s": wall}


def read_run(path: Path) -> RunData:
    """A saved run: pytest-benchmark's JSON of a timed run, or a report's ``run.json``."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFileError(f"{path}: not a pytest-benchmark JSON file ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("benchmarks"), list):
        raise RunFileError(f"{path}: not a pytest-benchmark JSON file (no list of benchmarks)")
    records = []
    for bench in raw["benchmarks"]:
        gemm = (bench.get("extra_info") or {}).get("gemm") if isinstance(bench, dict) else None
        if isinstance(gemm, dict):
            try:
                records.append(CaseRecord.from_dict(gemm))
            except PlainError as exc:
                raise RunFileError(
                    f"{path}: benchmark {bench.get('name')!r} is not a pytest-gemm case ({exc})"
                ) from None
    extra = raw.get("gemm") if isinstance(raw.get("gemm"), dict) else {}
    try:
        failures = [FailedCase.from_dict(f) for f in extra.get("failures", [])]
    except PlainError as exc:
        raise RunFileError(f"{path}: a failed case's error map cannot be read ({exc})") from None
    merged = _merge_keys(path, extra)
    if not records and not failures and not merged["tests"]:
        raise RunFileError(f"{path}: holds no pytest-gemm cases (was it written by a pytest --gemm-kernels run?)")
    machine = raw.get("machine_info") if isinstance(raw.get("machine_info"), dict) else {}
    gpus = [g for g in machine.get("gpus") or [] if isinstance(g, dict) and g.get("name")]
    return RunData(
        gpu=dict(machine.get("gpu") or {}),
        records=records,
        failures=failures,
        date=str(extra.get("date") or raw.get("datetime") or ""),
        command=str(extra.get("command") or ""),
        notes=[str(n) for n in extra.get("notes", [])],
        gpus={str(g["name"]): dict(g) for g in gpus},
        **merged,
    )
