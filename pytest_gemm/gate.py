"""The regression gate: compare a timed case with its baseline entry and give a verdict.

A case regressed when its gated metric (the same-run ratio to cuBLAS by default, or the
absolute device time) is worse than the baseline by more than the threshold AND the two 95%
intervals do not overlap. It improved when it is better by more than the threshold, with the
intervals apart. Anything else is the same. A case measured while the GPU throttled is
unstable, whatever its numbers; a case with no entry is new.

The ratio cancels changes of the whole GPU (clocks, power) but adds cuBLAS's own changes: at
small shapes cuBLAS's time can move by several percent from one process to the next while the
kernel's does not. So with the ratio gated, a verdict also needs the kernel's own device time
to have moved the same way by at least half the threshold; otherwise the case is the same, with
a note that the reference moved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .summary import format_time

__all__ = ["METRICS", "GateResult", "judge", "regression_text"]

#: gated metric -> (row/entry key of the value, key of its interval, label)
METRICS = {
    "ratio": ("ratio", "ratio_ci", "kernel/cuBLAS time ratio"),
    "time": ("median_s", "ci_s", "median device time"),
}


@dataclass(frozen=True)
class GateResult:
    verdict: str  # "regressed", "improved", "same", "new" or "unstable"
    metric: str
    threshold: float
    change: float | None = None  # now / baseline - 1 for the gated metric
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "metric": self.metric,
            "threshold": self.threshold,
            "change": self.change,
            "notes": list(self.notes),
        }


def judge(
    row: Mapping[str, Any], entry: Mapping[str, Any] | None, *, metric: str = "ratio", threshold: float = 0.05
) -> GateResult:
    """The verdict for one timed case (``row``) against its baseline ``entry`` (None: no entry)."""
    if metric not in METRICS:
        raise ValueError(f"unknown gated metric {metric!r}; expected one of {', '.join(METRICS)}")
    if entry is None:
        return GateResult("new", metric, threshold)
    value, interval, _ = METRICS[metric]
    now, (now_low, now_high) = row[value], row[interval]
    base, (base_low, base_high) = entry[value], entry[interval]
    change = now / base - 1
    notes = []
    if entry.get("source_sha256") and row.get("source_sha256") and entry["source_sha256"] != row["source_sha256"]:
        notes.append("kernel source changed since the baseline")
    if row.get("throttle"):
        notes.append("measured while throttled (" + ", ".join(row["throttle"]) + ")")
        return GateResult("unstable", metric, threshold, change, tuple(notes))
    if change > threshold and now_low > base_high:
        verdict = "regressed"
    elif base / now - 1 > threshold and now_high < base_low:
        verdict = "improved"
    else:
        verdict = "same"
    if verdict != "same" and metric == "ratio":
        own = row["median_s"] / entry["median_s"] - 1
        confirmed = (
            own > threshold / 2 if verdict == "regressed" else entry["median_s"] / row["median_s"] - 1 > threshold / 2
        )
        if not confirmed:
            notes.append(
                f"reference moved: the ratio changed {100 * change:+.1f}% but the kernel's own device time "
                f"{100 * own:+.1f}% (cuBLAS changed, not the kernel)"
            )
            verdict = "same"
    return GateResult(verdict, metric, threshold, change, tuple(notes))


def _cell(kind: str, value: float, interval: list[float]) -> str:
    if kind == "time":
        return f"{format_time(value)} [{format_time(interval[0])}, {format_time(interval[1])}]"
    return f"{value:.4g} [{interval[0]:.4g}, {interval[1]:.4g}]"


def regression_text(
    name: str, row: Mapping[str, Any], entry: Mapping[str, Any], result: GateResult, accept: str
) -> str:
    """The failure text of a regressed case: a small table, how the baseline was made, how to accept."""
    gated_label = METRICS[result.metric][2]
    lines = [
        f"performance regression: {name}: {gated_label} is {100 * (result.change or 0):+.1f}% against its "
        f"baseline (threshold {100 * result.threshold:g}%, 95% intervals apart)",
    ]
    table = [("", "baseline", "now", "change")]
    for kind, (value, interval, label) in METRICS.items():
        mark = " (gated)" if kind == result.metric else ""
        table.append(
            (
                label + mark,
                _cell(kind, entry[value], entry[interval]),
                _cell(kind, row[value], row[interval]),
                f"{100 * (row[value] / entry[value] - 1):+.1f}%",
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    for r in table:
        lines.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    rec = entry.get("recorded") or {}
    clocks = rec.get("sm_clock_mhz")
    lines.append(
        f"  baseline recorded {rec.get('date', '?')} with pytest-gemm {rec.get('pytest_gemm', '?')}, "
        f"CuPy {rec.get('cupy', '?')}, cuBLAS {rec.get('cublas', '?')}, driver {rec.get('driver', '?')}"
        + (f", SM clock {clocks[0]}-{clocks[1]} MHz" if clocks else "")
    )
    lines += [f"  note: {note}" for note in result.notes]
    lines.append(f"  to accept the new number: {accept}")
    return "\n".join(lines)
