"""The failure text of a regressed case: a small table of baseline against now, and how to accept it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.case_record import METRICS, CaseRecord, GateResult
from .tables import format_time

__all__ = ["accept_command", "regression_text"]


def accept_command(record: CaseRecord, baselines: str) -> str:
    """The command that records this case's new number as its baseline (``baselines``: the folder as shown)."""
    extra = "" if baselines == "baselines" else f" --gemm-baselines {baselines}"
    return f"pytest '{record.test}' --gemm-kernels --gemm-shapes {record.shape} --gemm-update-baselines{extra}"


def _cell(kind: str, value: float, interval: Any) -> str:
    if kind == "time":
        return f"{format_time(value)} [{format_time(interval[0])}, {format_time(interval[1])}]"
    return f"{value:.4g} [{interval[0]:.4g}, {interval[1]:.4g}]"


def regression_text(record: CaseRecord, entry: Mapping[str, Any], result: GateResult, accept: str) -> str:
    """The failure text of a regressed case: a small table, how the baseline was made, how to accept."""
    gated_label = METRICS[result.metric][2]
    lines = [
        f"performance regression: {record.name}: {gated_label} is {100 * (result.change or 0):+.1f}% against its "
        f"baseline (threshold {100 * result.threshold:g}%, 95% intervals apart)",
    ]
    table = [("", "baseline", "now", "change")]
    for kind, (value, interval, label) in METRICS.items():
        mark = " (gated)" if kind == result.metric else ""
        now, now_ci = getattr(record, value), getattr(record, interval)
        table.append(
            (
                label + mark,
                _cell(kind, entry[value], entry[interval]),
                _cell(kind, now, now_ci),
                f"{100 * (now / entry[value] - 1):+.1f}%",
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
