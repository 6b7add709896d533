"""The regression gate: compare a timed case with its baseline entry and give a verdict.

A case regressed when its gated metric (the same-run ratio to cuBLAS by default, or the
absolute device time) is worse than the baseline by more than the threshold AND the two 95%
intervals do not overlap. It improved when it is better by more than the threshold, with the
intervals apart. Anything else is the same. A case measured while the GPU throttled is
unstable, whatever its numbers; a case with no entry is new, and so is one whose entry was timed
with the other timer (CUPTI's kernel-only times are shorter than the events' by the launch latency).

The ratio cancels changes of the whole GPU (clocks, power) but adds cuBLAS's own changes: at
small shapes cuBLAS's time can move by several percent from one process to the next while the
kernel's does not. So with the ratio gated, a verdict also needs the kernel's own device time
to have moved the same way by at least half the threshold; otherwise the case is the same, with
a note that the reference moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.case_record import METRICS, CaseRecord, GateResult
from ..records.request import TIMERS
from ..records.verdicts import REFERENCE_MOVED, SOURCE_CHANGED, TIMER_CHANGED, GateVerdict

__all__ = ["judge"]


def judge(
    record: CaseRecord, entry: Mapping[str, Any] | None, *, metric: str = "ratio", threshold: float = 0.05
) -> GateResult:
    """The verdict for one timed case against its baseline ``entry`` (None: no entry).

    ``threshold`` is the run's; a kernel's own ``regression_threshold`` (in its record) overrides it.
    """
    threshold = record.regression_threshold or threshold
    if metric not in METRICS:
        raise ValueError(f"unknown gated metric {metric!r}; expected one of {', '.join(METRICS)}")
    if entry is None:
        return GateResult(GateVerdict.NEW, metric, threshold)
    timer = (entry.get("recorded") or {}).get("timer") or "events"  # entries recorded before CUPTI: the events
    if timer != record.timer:
        note = (
            f"{TIMER_CHANGED}: the baseline was timed with {TIMERS.get(timer, timer)}, this run with "
            f"{TIMERS.get(record.timer, record.timer)}; not compared (record it again with --gemm-update-baselines)"
        )
        return GateResult(GateVerdict.NEW, metric, threshold, notes=(note,))
    value, interval, _ = METRICS[metric]
    now, (now_low, now_high) = getattr(record, value), getattr(record, interval)
    base, (base_low, base_high) = entry[value], entry[interval]
    change = now / base - 1
    notes = []
    if entry.get("source_sha256") and record.source_sha256 and entry["source_sha256"] != record.source_sha256:
        notes.append(SOURCE_CHANGED)
    if record.throttle:
        notes.append("measured while throttled (" + ", ".join(record.throttle) + ")")
        return GateResult(GateVerdict.UNSTABLE, metric, threshold, change, tuple(notes))
    if change > threshold and now_low > base_high:
        verdict = GateVerdict.REGRESSED
    elif base / now - 1 > threshold and now_high < base_low:
        verdict = GateVerdict.IMPROVED
    else:
        verdict = GateVerdict.SAME
    if verdict != GateVerdict.SAME and metric == "ratio":
        own = record.median_s / entry["median_s"] - 1
        if verdict == GateVerdict.REGRESSED:
            confirmed = own > threshold / 2
        else:
            confirmed = entry["median_s"] / record.median_s - 1 > threshold / 2
        if not confirmed:
            notes.append(
                f"{REFERENCE_MOVED}: the ratio changed {100 * change:+.1f}% but the kernel's own device time "
                f"{100 * own:+.1f}% (cuBLAS changed, not the kernel)"
            )
            verdict = GateVerdict.SAME
    return GateResult(verdict, metric, threshold, change, tuple(notes))
