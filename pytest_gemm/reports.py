"""End-of-run reports built from test reports (so they work under pytest-xdist): timing tables, ptxas table."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from .summary import timing_tables

__all__ = ["CompileReport", "TimingReport"]


class TimingReport:
    """Collects the timing rows of every case (from reports, so xdist works) and prints them per dtype."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.gpu: dict[str, Any] | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for key, value in report.user_properties:
            if key == "gemm_timing":
                self.rows.append(value)
            elif key == "gemm_gpu":
                self.gpu = value

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows:
            return
        tr = terminalreporter
        tr.section("pytest-gemm timing (device time, CUDA events)")
        for line in timing_tables(self.rows, self.gpu or {}, width=shutil.get_terminal_size((120, 24)).columns):
            tr.write_line(line)


class CompileReport:
    """Collects what ptxas said about each compiled kernel (from reports, so xdist works) and prints it."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.rows += [value for key, value in report.user_properties if key == "gemm_compile"]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.rows:
            return
        tr = terminalreporter
        tr.section("pytest-gemm compile report (ptxas)")
        width = max(len(r["file"] + "::" + r["kernel"]) for r in self.rows) + 2
        tr.write_line(
            f"{'kernel':<{width}} {'arch':<8} {'regs':>5} {'spill st/ld B':>14} {'stack B':>8} {'static smem B':>14}"
            f" {'dynamic smem B':>15}"
        )
        for row in sorted(self.rows, key=lambda r: (r["file"], r["kernel"], r["arch"])):
            spills = f"{row['spill_stores']}/{row['spill_loads']}"
            flag = "  SPILLS" if (row["spill_stores"] or row["spill_loads"]) else ""
            tr.write_line(
                f"{row['file'] + '::' + row['kernel']:<{width}} {row['arch']:<8} {row['registers']!s:>5} "
                f"{spills:>14} {row['stack_bytes']!s:>8} {row['static_smem']!s:>14} "
                f"{row.get('dynamic_smem', 0)!s:>15}{flag}"
            )
