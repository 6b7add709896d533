"""``--gemm-summary PATH``: a markdown table of every case and its verdict, for CI pages.

Built in the controlling process from test reports (so it works under pytest-xdist); also
appended to ``$GITHUB_STEP_SUMMARY`` when that is set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .summary import format_time

__all__ = ["CASE", "CaseSummary", "markdown"]

#: user property of every case item: what the case is
CASE = "gemm_case"


def _props(report: pytest.TestReport, key: str) -> Any:
    return next((value for name, value in report.user_properties if name == key), None)


def _message(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    text = report.longreprtext.strip()
    return text.splitlines()[0] if text else ""


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _verdict(outcome: str, row: dict[str, Any] | None) -> str:
    if outcome == "failed":
        if row and row.get("gate", {}).get("verdict") in ("regressed", "new", "unstable"):
            return f"**FAILED** ({row['gate']['verdict']})"
        if row and row.get("verdict") in ("wrong", "suspicious"):
            return f"**FAILED** ({row['verdict']} timing)"
        return "**FAILED**"
    if outcome == "skipped":
        return "skipped"
    gate = (row or {}).get("gate", {}).get("verdict")
    return f"passed ({gate})" if gate else "passed"


def markdown(cases: list[dict[str, Any]]) -> str:
    """The table: one line per case, in run order."""
    lines = [
        "| case | verdict | median | TFLOP/s | % cuBLAS | change vs baseline | notes |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for case in cases:
        row = case.get("row") or {}
        gate = row.get("gate") or {}
        change = gate.get("change")
        notes = [*(gate.get("notes") or []), *(f"throttled: {t}" for t in row.get("throttle") or [])]
        if case["message"] and case["outcome"] != "passed":
            notes.insert(0, case["message"][:200])
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{_escape(case['test'])}`",
                    _verdict(case["outcome"], row or None),
                    format_time(row["median_s"]) if "median_s" in row else "",
                    f"{row['tflops']:.2f}" if "tflops" in row else "",
                    f"{row['pct_cublas']:.1f}%" if "pct_cublas" in row else "",
                    f"{100 * change:+.1f}%" if change is not None else "",
                    _escape("; ".join(notes)),
                ]
            )
            + " |"
        )
    failed = sum(case["outcome"] == "failed" for case in cases)
    lines += ["", f"{len(cases)} case(s), {failed} failed."]
    return "\n".join(lines) + "\n"


class CaseSummary:
    """Collects each case's outcome, message and timing row; writes the markdown at the end."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.cases: dict[str, dict[str, Any]] = {}
        self.error: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.path is None or _props(report, CASE) is None:
            return
        case = self.cases.setdefault(report.nodeid, {"test": report.nodeid, "outcome": "passed", "message": ""})
        row = _props(report, "gemm_timing")
        if row is not None:
            case["row"], case["test"] = row, row.get("test", report.nodeid)
        if report.failed or (report.skipped and case["outcome"] == "passed"):
            case["outcome"] = "failed" if report.failed else "skipped"
            case["message"] = case["message"] or _message(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.path is None or hasattr(session.config, "workerinput"):
            return
        text = "## pytest-gemm\n\n" + markdown(list(self.cases.values()))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(text, encoding="utf-8")
            step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
            if step_summary:
                with open(step_summary, "a", encoding="utf-8") as handle:
                    handle.write(text)
        except OSError as exc:
            self.error = f"cannot write the summary: {exc}"
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.path is not None:
            terminalreporter.write_line(self.error or f"pytest-gemm summary: {self.path}", red=bool(self.error))
