"""``--gemm-summary PATH``: a markdown table of every case and its verdict, for CI pages."""

from __future__ import annotations

from dataclasses import dataclass

from ..records.case_record import CaseRecord
from ..records.verdicts import GateVerdict, Sanity
from .tables import format_time

__all__ = ["SummaryLine", "markdown"]

#: gate verdicts that can fail a case (with --gemm-fail-new / --gemm-fail-unstable for the last two)
_FAILING_GATE = (GateVerdict.REGRESSED, GateVerdict.NEW, GateVerdict.UNSTABLE)


@dataclass
class SummaryLine:
    """One case as the summary shows it."""

    test: str
    outcome: str = "passed"  # pytest's outcome: passed, failed or skipped
    message: str = ""  # the first line of a failure, or the skip reason
    record: CaseRecord | None = None


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _verdict(line: SummaryLine) -> str:
    record, gate = line.record, line.record.gate if line.record else None
    if line.outcome == "failed":
        if gate is not None and gate.verdict in _FAILING_GATE:
            return f"**FAILED** ({gate.verdict})"
        if record is not None and record.verdict != Sanity.OK:
            return f"**FAILED** ({record.verdict} timing)"
        return "**FAILED**"
    if line.outcome == "skipped":
        return "skipped"
    return f"passed ({gate.verdict})" if gate is not None else "passed"


def markdown(lines: list[SummaryLine]) -> str:
    """The table: one line per case, in run order."""
    out = [
        "| case | verdict | median | TFLOP/s | % cuBLAS | change vs baseline | notes |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for line in lines:
        record = line.record
        gate = record.gate if record else None
        notes = [*(gate.notes if gate else ()), *(f"throttled: {t}" for t in (record.throttle if record else ()))]
        if line.message and line.outcome != "passed":
            notes.insert(0, line.message[:200])
        cells = [
            f"`{_escape(line.test)}`",
            _verdict(line),
            format_time(record.median_s) if record else "",
            f"{record.tflops:.2f}" if record else "",
            f"{record.pct_cublas:.1f}%" if record else "",
            f"{100 * gate.change:+.1f}%" if gate is not None and gate.change is not None else "",
            _escape("; ".join(notes)),
        ]
        out.append("| " + " | ".join(cells) + " |")
    failed = sum(line.outcome == "failed" for line in lines)
    out += ["", f"{len(lines)} case(s), {failed} failed."]
    return "\n".join(out) + "\n"
