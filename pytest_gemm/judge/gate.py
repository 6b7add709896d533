"""The regression gate: compare a timed case with its baseline entry and give a verdict.

A case regressed when its gated metric (the same-run ratio to cuBLAS by default, or the absolute device time) is
worse than the baseline by more than the threshold AND a same-code run would be that much worse with a chance under
the run's share of :data:`RUN_ALPHA` (docs/baselines.md#the-runs-false-alarms): the change is held against the spread
of same-code runs (:data:`SPREAD`) and both medians' 95% intervals, and ``RUN_ALPHA`` is split among the run's gated
cases (Bonferroni), so that a run of unchanged code fails a case with a chance of at most ``RUN_ALPHA``. A case the
rule flags is timed again in a fresh worker before it fails (:func:`confirm`). It improved when it is better by more
than the threshold, by the same test the other way. Anything else is the same. A case measured while the GPU
throttled is unstable, whatever its numbers; a case with no entry is new, and so is one whose entry was timed with
another timer (CUPTI's kernel-only times are shorter than the events' by the launch latency).

The ratio cancels changes of the whole GPU (clocks, power) but adds cuBLAS's own changes: at
small shapes cuBLAS's time can move by several percent from one process to the next while the
kernel's does not. So with the ratio gated, a verdict also needs the kernel's own device time
to have moved the same way by at least half the threshold; otherwise the case is the same, with
a note that the reference moved.

GPUs of one model differ by a few percent (measured: docs/baselines.md, "GPUs of one model"). So an
entry keeps one record per GPU that recorded it
(``gpus``, keyed by ``gpu_identity``). A case is compared with its own GPU's record when there is
one; otherwise with the range of the others: a regression must be worse than the slowest of them,
an improvement better than the fastest, and the spread it is held against is the one between GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..records.case_record import GPU_RECORD_KEYS, METRICS, CaseRecord, GateResult
from ..records.request import TIMERS
from ..records.verdicts import (
    NOT_CONFIRMED,
    OTHER_GPUS,
    REFERENCE_MOVED,
    SOURCE_CHANGED,
    TIMER_CHANGED,
    GateVerdict,
)

__all__ = [
    "DEFAULT_BASELINES",
    "DEFAULT_METRIC",
    "DEFAULT_THRESHOLD",
    "FAILS_WITH",
    "GatePolicy",
    "compared_record",
    "confirm",
    "gated_cases",
    "judge",
    "references",
]

DEFAULT_THRESHOLD = 0.03  # --gemm-threshold: slower than the baseline by more than this fraction (and significantly)
THRESHOLD_RANGE = (0.0, 10.0)  # the thresholds --gemm-threshold and a saved run's settings may hold
DEFAULT_METRIC = "ratio"  # --gemm-gate-metric: a key of METRICS
DEFAULT_BASELINES = "baselines"  # --gemm-baselines: the folder of baseline files, relative to the rootdir
#: the spread of a case's change between two runs of the same code, as a standard deviation: on one GPU (its own
#: record), and between GPUs of one model (the others' records). Measured (docs/baselines.md#the-runs-false-alarms):
#: two same-code main jobs on one H200 differ by p95 1.69% a case (1.69 / 1.96), and on two GPUs of one host by p95
#: 3.68% (3.68 / 1.96)
SPREAD = {"own": 0.0086, "single": 0.0086, "others": 0.0188}
#: the chance that a run of unchanged code fails any case as regressed, split among the run's gated cases
RUN_ALPHA = 0.05
#: the chance a flagged case's re-timing in a fresh worker is as slow again by noise alone, for it to fail
CONFIRM_ALPHA = 0.01
#: the option (--gemm-NAME) with which each verdict fails a test; a regression always does
FAILS_WITH = {GateVerdict.NEW: "fail-new", GateVerdict.UNSTABLE: "fail-unstable"}


@dataclass(frozen=True)
class GatePolicy:
    """Which gate verdicts fail a test: a regression always, a case with no baseline entry with ``fail_new``
    (--gemm-fail-new), a case timed while the GPU throttled with ``fail_unstable`` (--gemm-fail-unstable)."""

    fail_new: bool = False
    fail_unstable: bool = False

    def fails(self, verdict: GateVerdict) -> bool:
        return (
            verdict == GateVerdict.REGRESSED
            or (verdict == GateVerdict.NEW and self.fail_new)
            or (verdict == GateVerdict.UNSTABLE and self.fail_unstable)
        )

    @classmethod
    def of_saved(cls, settings: Mapping[str, Any]) -> GatePolicy:
        """The policy a saved run was gated with (its settings, named as the options are)."""
        return cls(bool(settings.get("fail-new")), bool(settings.get("fail-unstable")))


def references(entry: Mapping[str, Any], gpu_id: str, metric: str) -> tuple[Mapping[str, Any], Mapping[str, Any], str]:
    """The records a case on GPU ``gpu_id`` is compared with: (for a regression, for an improvement, how chosen).

    Each record holds GPU_RECORD_KEYS (an entry holds them too, but for its date).
    """
    gpus = entry.get("gpus") or {}
    if gpu_id and gpu_id in gpus:
        return gpus[gpu_id], gpus[gpu_id], "own"
    if not gpus or (len(gpus) == 1 and not gpu_id):
        return entry, entry, "single"
    value = METRICS[metric][0]
    slowest = max(gpus.values(), key=lambda r: r[value])
    fastest = min(gpus.values(), key=lambda r: r[value])
    return slowest, fastest, "others"


def judge(
    record: CaseRecord,
    entry: Mapping[str, Any] | None,
    *,
    metric: str = DEFAULT_METRIC,
    threshold: float = DEFAULT_THRESHOLD,
    policy: GatePolicy | None = None,
    baseline_file: str = "",
    file_missing: bool = False,
    cases: int = 1,
) -> GateResult:
    """The verdict for one timed case against its baseline ``entry`` (None: no entry), whether it fails the test by
    ``policy``, and what it was judged against: ``baseline_file`` as shown (``file_missing``: no such file), and a
    regression's baseline (:func:`compared_record`), which its failure shows.

    ``threshold`` is the run's; a kernel's own ``regression_threshold`` (in its record) overrides it. ``cases``: how
    many cases the run gates, among which :data:`RUN_ALPHA` is split.
    """
    result = _verdict(record, entry, metric, threshold, max(1, cases))
    return replace(
        result,
        fails=(policy or GatePolicy()).fails(result.verdict),
        baseline_file=baseline_file,
        baseline_file_missing=file_missing,
        baseline=compared_record(entry, record, result)
        if entry is not None and result.verdict == GateVerdict.REGRESSED
        else None,
    )


def gated_cases(records: Sequence[CaseRecord]) -> int:
    """How many cases a saved run's records are gated among again (``pytest-gemm compare``, ``merge``, ``plot``):
    as many as the run that saved them was, where their verdicts say (the most of them: shards merged), else how
    many they are."""
    saved = [r.gate.cases for r in records if r.gate is not None]
    return max(saved) if saved else max(1, len(records))


def confirm(first: GateResult, again: GateResult | None) -> GateResult:
    """A regression (``first``) after its re-timing in a fresh worker, judged by the gate (``again``; None: the
    re-timing gave no times): it stays a regression when the re-timing is slower by more than the threshold too,
    with a chance under :data:`CONFIRM_ALPHA`, neither throttled nor explained by cuBLAS moving; else it is the same,
    noted as not confirmed. With no re-timing it stands."""
    if first.verdict != GateVerdict.REGRESSED or again is None or again.change is None or again.p_value is None:
        return first
    moved = again.verdict == GateVerdict.UNSTABLE or any(n.startswith(REFERENCE_MOVED) for n in again.notes)
    confirmed = not moved and again.change > first.threshold and again.p_value < CONFIRM_ALPHA
    facts = replace(first, confirmed_change=again.change, confirmed_p=again.p_value)
    if confirmed:
        return facts
    return replace(facts, verdict=GateVerdict.SAME, fails=False, baseline=None, notes=(*first.notes, NOT_CONFIRMED))


def _relative_se(value: float, interval: tuple[float, float]) -> float:
    """The standard error of a median, relative to it, from its 95% interval."""
    low, high = interval
    return (high - low) / (2 * 1.96 * value) if value > 0 else 0.0


def _chance(change: float, sigma: float) -> float:
    """The chance that noise of standard deviation ``sigma`` alone changes a metric by ``change`` or more (one-sided,
    normal)."""
    return 0.5 * math.erfc(change / (sigma * math.sqrt(2))) if sigma > 0 else float(change <= 0)


def _verdict(
    record: CaseRecord, entry: Mapping[str, Any] | None, metric: str, threshold: float, cases: int
) -> GateResult:
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
    slow, fast, compared_with = references(entry, record.gpu_id, metric)
    now = getattr(record, value)
    notes = []
    if entry.get("source_sha256") and record.source_sha256 and entry["source_sha256"] != record.source_sha256:
        notes.append(SOURCE_CHANGED)
    if now > slow[value] or slow is fast:  # from the one record, or how far outside the range of the others'
        change = now / slow[value] - 1
    else:
        change = now / fast[value] - 1 if now < fast[value] else 0.0
    slower, faster = now / slow[value] - 1, fast[value] / now - 1
    se_now = _relative_se(now, getattr(record, interval))
    sigma_slow = math.hypot(SPREAD[compared_with], se_now, _relative_se(slow[value], slow[interval]))
    sigma_fast = math.hypot(SPREAD[compared_with], se_now, _relative_se(fast[value], fast[interval]))
    p_slower, p_faster = _chance(slower, sigma_slow), _chance(faster, sigma_fast)
    result = GateResult(
        GateVerdict.SAME, metric, threshold, change, compared_with=compared_with, p_value=p_slower, cases=cases
    )
    if record.throttle:
        notes.append("measured while throttled (" + ", ".join(record.throttle) + ")")
        return replace(result, verdict=GateVerdict.UNSTABLE, notes=tuple(notes))
    alpha = RUN_ALPHA / cases
    if slower > threshold and p_slower < alpha:
        verdict, base = GateVerdict.REGRESSED, slow
    elif faster > threshold and p_faster < alpha:
        verdict, base = GateVerdict.IMPROVED, fast
        result = replace(result, p_value=p_faster)
    else:
        verdict, base = GateVerdict.SAME, slow
    if verdict != GateVerdict.SAME and metric == "ratio":
        # the kernel's own time against the same record, or against the range of the others' times
        times = [r["median_s"] for r in entry["gpus"].values()] if compared_with == "others" else [base["median_s"]]
        if verdict == GateVerdict.REGRESSED:
            own = record.median_s / max(times) - 1
            confirmed = own > threshold / 2
        else:
            own = record.median_s / min(times) - 1
            confirmed = min(times) / record.median_s - 1 > threshold / 2
        if not confirmed:
            notes.append(
                f"{REFERENCE_MOVED}: the ratio changed {100 * change:+.1f}% but the kernel's own device time "
                f"{100 * own:+.1f}% (cuBLAS changed, not the kernel)"
            )
            verdict = GateVerdict.SAME
    if compared_with == "others" and verdict != GateVerdict.SAME:
        low, high = fast[value], slow[value]
        count = len(entry["gpus"])
        which = "slowest" if base is slow else "fastest"
        notes.append(
            f"{OTHER_GPUS}: this GPU has no record of its own; the {count} GPU(s) recorded span {low:.4g} to "
            f"{high:.4g}, and it was compared with the {which}"
        )
    return replace(result, verdict=verdict, notes=tuple(notes))


def compared_record(entry: Mapping[str, Any], record: CaseRecord, result: GateResult) -> dict[str, Any]:
    """The baseline a verdict was reached against, to show: the entry with the numbers of the record compared."""
    slow, fast, _ = references(entry, record.gpu_id, result.metric)
    chosen = fast if (result.change or 0.0) < 0 else slow  # the side of the range the change was measured from
    return {**entry, **{k: chosen[k] for k in GPU_RECORD_KEYS if k in chosen}}
