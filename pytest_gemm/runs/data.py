"""A saved run in memory: every test of the run judged, the GPU's facts, and what ``pytest-gemm merge`` needs.

A run's tests are :class:`~pytest_gemm.records.result.CaseResult` records keyed by test id, in run order:
pytest's outcome and seconds, a failed GEMM case's diagnosis, a timed case's timing record. Reports,
summaries, the gate and merging all read this one form.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..records.case_record import CaseRecord
from ..records.result import CaseResult

__all__ = ["STORED_CELLS", "KernelFileRun", "RunData", "SessionEnd", "Shards", "stored"]

#: a saved run's error maps have at most this many cells a side (the worst of each block kept): about 16 KB a
#: failed case however large C is; full-resolution maps exist only as the report folder's images
STORED_CELLS = 64


def stored(result: CaseResult) -> CaseResult:
    """The result as saved runs and test reports carry it: its error map pooled to :data:`STORED_CELLS`."""
    diagnosis = result.diagnosis
    if diagnosis is None or diagnosis.error_map is None:
        return result
    pooled = diagnosis.error_map.pooled(STORED_CELLS)
    return dataclasses.replace(result, diagnosis=dataclasses.replace(diagnosis, error_map=pooled))


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
    tests: dict[str, CaseResult] = field(default_factory=dict)  # test id -> how it ended, in run order
    date: str = ""  # ISO 8601, as pytest-benchmark writes it
    command: str = ""  # the command line that made the run
    notes: list[str] = field(default_factory=list)  # what the report should say about its data
    version: str = ""  # the pytest-gemm that made the run ('' when the file does not say)
    settings: dict[str, Any] = field(default_factory=dict)  # the settings that change results
    shard: Shards | None = None  # None: not a shard of a larger suite
    files: dict[str, KernelFileRun] = field(default_factory=dict)  # kernel file (as ids show it) -> what the run saw
    wall_s: float | None = None  # seconds from the start of pytest until the run was saved
    gpus: dict[str, dict[str, Any]] = field(default_factory=dict)  # GPU model -> facts, when a run has several
    session: SessionEnd | None = None  # how pytest ended (None: not said, or a merged run)

    @classmethod
    def of_timed(cls, gpu: dict[str, Any], records: list[CaseRecord], **fields: Any) -> RunData:
        """A run of these timed cases (each passed, unless its gate result failed it) and ``fields``."""
        data = cls(gpu, **fields)
        data.with_timing(records)
        return data

    @property
    def records(self) -> list[CaseRecord]:
        """The timed cases, in run order."""
        return [result.timing for result in self.tests.values() if result.timing is not None]

    @property
    def failures(self) -> dict[str, CaseResult]:
        """The failed GEMM cases that carry a diagnosis, by test id, in run order."""
        return {test: r for test, r in self.tests.items() if r.failed and r.diagnosis is not None}

    def with_timing(self, records: list[CaseRecord]) -> None:
        """Give the tests these timing records (a record of a test the run does not hold adds it: passed, unless its
        gate result failed it)."""
        for record in records:
            failed = record.gate is not None and record.gate.fails
            had = self.tests.get(record.test) or CaseResult("failed" if failed else "passed", kind="case")
            self.tests[record.test] = had.with_timing(record)

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
