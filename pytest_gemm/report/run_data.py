"""What the pictures and the HTML report are drawn from, and how a run carries it in JSON.

A run's report data is its timed records, the GPU's facts, its failed verifications with their
error maps, its date and its command line. A timed run's pytest-benchmark JSON (``--benchmark-json``)
holds the records under each benchmark's ``extra_info["gemm"]`` and the GPU under
``machine_info["gpu"]``; pytest-gemm adds a top-level ``"gemm"`` section (:func:`section`) with the
rest. ``--gemm-report DIR`` writes the same layout to ``DIR/run.json``, so a report can always be
drawn again with ``pytest-gemm plot``, even from a run with no timed case.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records.case_record import CaseRecord
from ..records.outcome import ErrorMap
from ..records.plain import PlainError, from_plain, to_plain

__all__ = ["FailedCase", "RunData", "RunFileError", "read_run", "run_json", "section"]

FORMAT = 1  # version of the "gemm" section


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


@dataclass
class RunData:
    """Everything a report shows."""

    gpu: dict[str, Any]
    records: list[CaseRecord]
    failures: list[FailedCase] = field(default_factory=list)
    date: str = ""  # ISO 8601, as pytest-benchmark writes it
    command: str = ""  # the command line that made the run
    notes: list[str] = field(default_factory=list)  # what the report should say about its data

    @property
    def gpu_name(self) -> str:
        return str(self.gpu.get("name") or next((r.gpu for r in self.records if r.gpu), "") or "unknown GPU")

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
    """The ``"gemm"`` section of a saved run: format, date, command line, failed cases and notes."""
    failures = [case.to_dict() for case in data.failures]
    return {"format": FORMAT, "date": data.date, "command": data.command, "failures": failures, "notes": data.notes}


def run_json(data: RunData) -> dict[str, Any]:
    """``data`` in the layout of pytest-benchmark's JSON (only the keys pytest-gemm reads)."""
    benchmarks = [
        {"name": r.name, "fullname": r.test, "group": f"{r.dtype} {r.shape}", "extra_info": {"gemm": r.to_dict()}}
        for r in data.records
    ]
    return {"machine_info": {"gpu": data.gpu}, "benchmarks": benchmarks, "datetime": data.date, "gemm": section(data)}


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
    if not records and not failures:
        raise RunFileError(f"{path}: holds no pytest-gemm cases (was it written by a pytest --gemm-kernels run?)")
    machine = raw.get("machine_info") if isinstance(raw.get("machine_info"), dict) else {}
    return RunData(
        gpu=dict(machine.get("gpu") or {}),
        records=records,
        failures=failures,
        date=str(extra.get("date") or raw.get("datetime") or ""),
        command=str(extra.get("command") or ""),
        notes=[str(n) for n in extra.get("notes", [])],
    )
