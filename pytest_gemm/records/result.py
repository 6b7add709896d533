"""The judged case: how one test of a run ended, and for a GEMM case what the judgement found.

One record for everything after the worker: the plugin fails, skips or times a case from it, the
gate and the baselines read its timing, saved runs keep it (``runs/``), and the report, the summary
and ``pytest-gemm merge`` read it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .case_record import CaseRecord, CompileRecord
from .diagnosis import Diagnosis
from .plain import from_plain, to_plain

__all__ = ["KINDS", "OUTCOMES", "CaseFacts", "CaseResult", "ItemResult", "Kind", "Outcome", "WorkerNote"]

Outcome = Literal["passed", "failed", "skipped"]  # pytest's outcome
#: a GPU case, a compile item, a compute-sanitizer run, a test that is not pytest-gemm's, or a collection error
Kind = Literal["case", "compile", "sanitize", "test", "collect"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failed", "skipped")
KINDS: tuple[Kind, ...] = ("case", "compile", "sanitize", "test", "collect")


@dataclass(frozen=True)
class CaseResult:
    """One test, judged.

    ``message`` is the first line of its failure, the skip reason, or why a passed case was not timed;
    ``duration_s`` the seconds pytest measured (setup, call and teardown) and ``worker_s`` those a GPU worker
    spent on it. A collection error is a failed test of kind ``collect`` under the id of what failed to collect.
    A GEMM case that failed carries its ``diagnosis``; one that was verified its ``margin`` (how far inside the
    bounds); one that was timed its ``timing`` (saved runs keep that in pytest-benchmark's benchmarks, not beside
    the result).
    """

    outcome: Outcome
    message: str = ""
    duration_s: float = 0.0
    kind: Kind = "test"
    worker_s: float = 0.0
    diagnosis: Diagnosis | None = None
    margin: float | None = None
    timing: CaseRecord | None = None

    @property
    def failed(self) -> bool:
        return self.outcome == "failed"

    def with_timing(self, timing: CaseRecord | None) -> CaseResult:
        return replace(self, timing=timing)

    def to_dict(self) -> dict[str, Any]:
        """The result as a saved run keeps it: without its timing record, and without empty fields."""
        data = to_plain(replace(self, timing=None))
        unsaid = {k for k, v in data.items() if v is None or v == "" or (k.endswith("_s") and v == 0)}
        return {k: v for k, v in data.items() if k not in unsaid}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        return from_plain(cls, data)


@dataclass(frozen=True)
class WorkerNote:
    """Where and how a GPU worker ran a case: its process, why it was replaced after the case, what it compiled and
    found compiled, a Python kernel's autotuned choices, the seconds of each phase in the worker, the wall time the
    pytest process waited for it (the difference is the cost of isolation), and the GPU's label on a run of several."""

    pid: int = 0
    replaced: str = ""  # a records.verdicts.FailureKind word ('' when the worker was kept)
    compiled: int = 0
    cached: int = 0
    autotuned: tuple[str, ...] = ()
    phase_s: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    gpu: str = ""


@dataclass(frozen=True)
class ItemResult:
    """One test as the process that ran it knows it, for the process that reports: its judged result, and where and
    how it ran. It crosses from an xdist worker with the test's report, as one user property, in one codec
    (:meth:`to_dict`, :meth:`from_dict`); what the report alone says (pytest's outcome, its seconds) is pytest's."""

    result: CaseResult
    worker: WorkerNote | None = None  # a case run in a GPU worker
    gpu: dict[str, Any] | None = None  # the device facts of the GPU that timed it
    heatmap: str = ""  # a failed case's picture, drawn as it ended, in the report folder
    no_device: str = ""  # a case skipped for want of a CUDA device: why there is none
    compiled: CompileRecord | None = None  # a compile item's record

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemResult:
        return from_plain(cls, data)

    def slim(self) -> ItemResult:
        """What stays on the item once it reached the reporting process (JUnit XML writes it): no diagnosis, no GPU
        facts."""
        return replace(self, result=replace(self.result, diagnosis=None), gpu=None)


@dataclass(frozen=True)
class CaseFacts:
    """A collected case as the run selected it: its kernel file (and that file's SHA-256 as read) and kernel, whether
    the run selected every case of the file, and the header's declarations that change its checks, in words."""

    file: str
    kernel: str
    sha256: str = ""
    whole: bool = False
    declared: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseFacts:
        return from_plain(cls, data)
