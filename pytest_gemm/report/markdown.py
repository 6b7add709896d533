"""``--gemm-summary PATH``: a markdown table of every case and its verdict, for CI pages."""

from __future__ import annotations

from collections.abc import Mapping

from ..records.result import CaseResult
from ..records.verdicts import Sanity
from .tables import dtype_label, format_time

__all__ = ["markdown", "summary_cases"]


def summary_cases(tests: Mapping[str, CaseResult]) -> dict[str, CaseResult]:
    """The GEMM cases of a run, as the summary lists them (sorted by test id)."""
    return {test: tests[test] for test in sorted(tests) if tests[test].kind == "case"}


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _verdict(result: CaseResult) -> str:
    record = result.timing
    gate = record.gate if record else None
    if result.outcome == "failed":
        if gate is not None and gate.fails:
            return f"**FAILED** ({gate.verdict})"
        if record is not None and record.verdict != Sanity.OK:
            return f"**FAILED** ({record.verdict} timing)"
        return "**FAILED**"
    if result.outcome == "skipped":
        return "skipped"
    return f"passed ({gate.verdict})" if gate is not None else "passed"


def markdown(cases: Mapping[str, CaseResult]) -> str:
    """The table: one line per case, in the order given."""
    out = [
        "| case | verdict | median | TFLOP/s | % cuBLAS | change vs baseline | notes |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for test, result in cases.items():
        record = result.timing
        gate = record.gate if record else None
        notes = [*(gate.notes if gate else ()), *(f"throttled: {t}" for t in (record.throttle if record else ()))]
        accumulate = record.accumulate if record else result.diagnosis.declared.accumulate if result.diagnosis else ""
        if accumulate:  # a declared accumulation, as the tables show it
            notes.insert(0, dtype_label(record.dtype if record else result.diagnosis.dtype, accumulate))
        if result.message and result.outcome != "passed":
            notes.insert(0, result.message[:200])
        cells = [
            f"`{_escape(test)}`",
            _verdict(result),
            format_time(record.median_s) if record else "",
            f"{record.tflops:.2f}" if record else "",
            f"{record.pct_cublas:.1f}%" if record else "",
            f"{100 * gate.change:+.1f}%" if gate is not None and gate.change is not None else "",
            _escape("; ".join(notes)),
        ]
        out.append("| " + " | ".join(cells) + " |")
    failed = sum(result.outcome == "failed" for result in cases.values())
    out += ["", f"{len(cases)} case(s), {failed} failed."]
    return "\n".join(out) + "\n"
