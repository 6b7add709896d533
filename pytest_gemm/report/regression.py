"""The failure text of a regressed case (a small table of baseline against now, and how to accept it), the
commands that run one case alone, and the table cells both the gate and the ``pytest-gemm`` command print."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..judge.gate import CONFIRM_ALPHA, DEFAULT_BASELINES, FAILS_WITH, RUN_ALPHA
from ..options import label
from ..records.case_record import METRICS, CaseRecord, GateResult
from ..records.shapes import Shape
from ..records.verdicts import GateVerdict
from .tables import format_time

__all__ = [
    "accept_command",
    "aligned",
    "case_command",
    "certainty",
    "gate_failure",
    "gate_failure_text",
    "gate_line",
    "interval_cell",
    "regression_text",
    "replay_command",
]


def case_command(test: str, shape: Shape | str, *options: str) -> str:
    """The pytest command that runs one case alone: its id, and its shape (``MxNxK``), which may not be in the
    default shape set, with ``options`` after."""
    return " ".join((f"pytest '{test}' --gemm-kernels --gemm-shapes {shape}", *options))


def replay_command(test: str, shape: Shape | str, base_seed: int) -> str:
    """The command that runs one case again, on the same data."""
    return case_command(test, shape, f"--gemm-seed {base_seed}")


def accept_command(record: CaseRecord, baselines: str) -> str:
    """The command that records this case's new number as its baseline (``baselines``: the folder as shown)."""
    extra = () if baselines == DEFAULT_BASELINES else (f"--gemm-baselines {baselines}",)
    return case_command(record.test, record.shape, "--gemm-update-baselines", *extra)


def interval_cell(kind: str, value: float, interval: Any) -> str:
    """A metric (``kind``: one of METRICS) with its 95% interval, as a table cell."""
    if kind == "time":
        return f"{format_time(value)} [{format_time(interval[0])}, {format_time(interval[1])}]"
    return f"{value:.4g} [{interval[0]:.4g}, {interval[1]:.4g}]"


def aligned(rows: Sequence[Sequence[str]], right: Collection[int]) -> list[str]:
    """A plain-text table: columns two spaces apart, those in ``right`` right-aligned, the rest left."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]


def regression_text(record: CaseRecord, entry: Mapping[str, Any], result: GateResult, accept: str) -> str:
    """The failure text of a regressed case: a small table, how the baseline was made, how to accept."""
    gated_label = METRICS[result.metric][2]
    lines = [
        f"performance regression: {record.name}: {gated_label} is {100 * (result.change or 0):+.1f}% against its "
        f"baseline (threshold {100 * result.threshold:g}%)",
        *certainty(result),
    ]
    table = [("", "baseline", "now", "change")]
    for kind, (value, interval, name) in METRICS.items():
        mark = " (gated)" if kind == result.metric else ""
        now, now_ci = getattr(record, value), getattr(record, interval)
        table.append(
            (
                name + mark,
                interval_cell(kind, entry[value], entry[interval]),
                interval_cell(kind, now, now_ci),
                f"{100 * (now / entry[value] - 1):+.1f}%",
            )
        )
    lines += ["  " + line for line in aligned(table, {1, 2, 3})]
    rec = entry.get("recorded") or {}
    clocks, date = rec.get("sm_clock_mhz"), entry.get("date") or rec.get("date", "?")
    lines.append(
        f"  baseline recorded {date} with pytest-gemm {rec.get('pytest_gemm', '?')}, "
        f"CuPy {rec.get('cupy', '?')}, cuBLAS {rec.get('cublas', '?')}, driver {rec.get('driver', '?')}"
        + (f", SM clock {clocks[0]}-{clocks[1]} MHz" if clocks else "")
    )
    lines += [f"  note: {note}" for note in result.notes]
    lines.append(f"  to accept the new number: {accept}")
    return "\n".join(lines)


def certainty(result: GateResult) -> list[str]:
    """How sure a regression (or a flagged case not confirmed) is: the chance that noise alone made a same-code run
    this slow, against the run's share of false alarms, and its re-timing in a fresh worker
    (docs/baselines.md#the-runs-false-alarms)."""
    if result.p_value is None:
        return []
    share = RUN_ALPHA / max(1, result.cases)
    lines = [
        f"  how sure: noise alone makes a same-code run this slow with a chance of {result.p_value:.2g} (a regression "
        f"needs under {share:.2g}: {100 * RUN_ALPHA:g}% for any of the run's {result.cases} gated case(s))"
    ]
    if result.confirmed_change is not None and result.confirmed_p is not None:
        verdict = "confirmed" if result.verdict == GateVerdict.REGRESSED else "not confirmed"
        lines.append(
            f"  timed again in a fresh worker: {100 * result.confirmed_change:+.1f}% (chance {result.confirmed_p:.2g};"
            f" needs over the threshold and under {CONFIRM_ALPHA:g}): {verdict}"
        )
    elif result.verdict == GateVerdict.REGRESSED:
        lines.append("  not timed again here: a run's gate times a flagged case again in a fresh worker")
    return lines


def gate_failure_text(
    record: CaseRecord, result: GateResult, entry: Mapping[str, Any] | None, accept: str, baseline_file: str
) -> str:
    """The failure text of a case the gate failed (``entry``: the baseline it was compared with, as shown)."""
    if result.verdict == GateVerdict.REGRESSED and entry is not None:
        return regression_text(record, entry, result, accept)
    option = label(FAILS_WITH[result.verdict])
    if result.verdict == GateVerdict.NEW:
        return f"no baseline entry for {record.test} in {baseline_file} ({option}); record it with: {accept}"
    return f"{record.test}: {'; '.join(result.notes)} ({option})"


def gate_failure(record: CaseRecord, gate: GateResult) -> str:
    """The failure text of a case its gate verdict failed, from its gated record alone (the baseline file as shown, and
    a regression's baseline entry, are the gate's)."""
    folder = str(Path(gate.baseline_file).parent) if gate.baseline_file else DEFAULT_BASELINES
    return gate_failure_text(record, gate, gate.baseline, accept_command(record, folder), gate.baseline_file)


def gate_line(record: CaseRecord, gate: GateResult) -> str:
    """One line for a case ``pytest-gemm merge``'s gate failed."""
    change = f" is {100 * gate.change:+.1f}% against its baseline" if gate.change is not None else ""
    return f"pytest-gemm merge gate: {record.name}: {METRICS[gate.metric][2]}{change} ({gate.verdict})"
