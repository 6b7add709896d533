"""The judged case: how one test of a run ended, and for a GEMM case what the judgement found.

One record for everything after the worker: the plugin fails, skips or times a case from it, the
gate and the baselines read its timing, saved runs keep it (``runs/``), and the report, the summary
and ``pytest-gemm merge`` read it back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from .case_record import CaseRecord
from .diagnosis import Diagnosis
from .plain import from_plain, to_plain

__all__ = ["KINDS", "OUTCOMES", "CaseResult", "Kind", "Outcome"]

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
