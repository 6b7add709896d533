"""A case's final result, made once: its judged result (:func:`~.case.judge_outcome`) with its timing record gated
(:mod:`.gate`), a gate verdict that fails the test failing the case. The plugin acts on it, the reporting process
and saved runs keep it; nothing rewrites it after the fact. Pure: the gate's judgement of one record is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..records.case_record import CaseRecord, GateResult
from ..records.result import CaseResult

__all__ = ["final"]


def final(result: CaseResult, gate: Callable[[CaseRecord], GateResult] | None) -> CaseResult:
    """``result`` gated: a passed, timed case's record judged by ``gate`` (None: no gate, as when baselines are being
    recorded), and failed when the verdict fails the test. A record whose streams were not checked makes no speed
    claim, and is not gated."""
    record = result.timing
    if gate is None or result.outcome != "passed" or record is None or record.unchecked_streams:
        return result
    verdict = gate(record)
    return replace(result, outcome="failed" if verdict.fails else "passed", timing=record.with_gate(verdict))
