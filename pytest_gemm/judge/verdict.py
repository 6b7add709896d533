"""A case's final result, made once: its judged result (:func:`~.case.judge_outcome`) with its timing record gated
(:mod:`.gate`), a gate verdict that fails the test failing the case. The plugin acts on it, the reporting process
and saved runs keep it; ``pytest-gemm merge`` gates a saved run's cases again through it (:func:`ungated` first).
Pure: the gate's judgement of one record is given.

Which timed cases make a speed claim (:func:`claims_speed`) is decided here once: only those are gated, and only
those are recorded as baselines, by the plugin and by the command alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..records.case_record import CaseRecord, GateResult
from ..records.result import CaseResult
from ..records.verdicts import GateVerdict, Sanity
from .gate import confirm

__all__ = ["Judged", "claims_speed", "confirmed", "final", "needs_confirming", "unchecked", "ungated"]

#: the gate's judgement of one record: its verdict, or why none could be reached (a baseline file that cannot be
#: read), which fails the case with those words
Judged = GateResult | str


def claims_speed(result: CaseResult) -> bool:
    """Whether a case's times make a speed claim, which the gate judges and an update records: it passed, timed, its
    timing can be believed (Sanity.OK) and its streams were checked (:func:`unchecked`)."""
    record = result.timing
    return (
        result.outcome == "passed" and record is not None and record.verdict == Sanity.OK
        and not record.unchecked_streams
    )  # fmt: skip


def unchecked(result: CaseResult) -> bool:
    """Whether a case passed and was timed but its streams were not checked (a Python kernel's without CUPTI): its
    times make no speed claim, so it is neither gated nor recorded."""
    return result.outcome == "passed" and result.timing is not None and bool(result.timing.unchecked_streams)


def ungated(result: CaseResult) -> CaseResult:
    """``result`` as it was before the gate judged it: no gate verdict on its record, and passed where the verdict
    was what failed it."""
    record = result.timing
    if record is None or record.gate is None:
        return result
    if result.failed and record.gate.fails:
        result = replace(result, outcome="passed", message="")
    return result.with_timing(record.with_gate(None))


def final(result: CaseResult, gate: Callable[[CaseRecord], Judged] | None) -> CaseResult:
    """``result`` gated: the record of a case that makes a speed claim (:func:`claims_speed`) judged by ``gate``
    (None: no gate, as when baselines are being recorded), and failed when the verdict fails the test, or when no
    verdict could be reached (then its message says why, and its record has no verdict)."""
    if gate is None or not claims_speed(result):
        return result
    assert result.timing is not None
    verdict = gate(result.timing)
    if isinstance(verdict, str):
        return replace(result, outcome="failed", message=verdict)
    return replace(result, outcome="failed" if verdict.fails else "passed", timing=result.timing.with_gate(verdict))


def needs_confirming(result: CaseResult) -> bool:
    """Whether the gate flagged ``result`` as regressed and it has not been timed again yet (:func:`confirmed`)."""
    gate = result.timing.gate if result.timing is not None else None
    return gate is not None and gate.verdict == GateVerdict.REGRESSED and gate.confirmed_change is None


def confirmed(result: CaseResult, again: Judged | None) -> CaseResult:
    """A flagged case (:func:`needs_confirming`) after its re-timing in a fresh worker, ``again`` the gate's judgement
    of that timing (None, or why none: it gave no times): it fails when the re-timing confirms the regression
    (:func:`.gate.confirm`), and passes, noted as not confirmed, when it does not."""
    if not needs_confirming(result):
        return result
    assert result.timing is not None and result.timing.gate is not None
    gate = confirm(result.timing.gate, again if not isinstance(again, str) else None)
    return replace(result, outcome="failed" if gate.fails else "passed", timing=result.timing.with_gate(gate))
