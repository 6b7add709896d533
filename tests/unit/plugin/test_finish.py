"""The end of a run (plugin/finish.py): what could not be written fails a run that would pass, and the saved report
says the exit status pytest ends with."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gemm.plugin.finish import finish
from pytest_gemm.plugin.ledger import RunSummary
from pytest_gemm.records.shapes import Shape
from pytest_gemm.settings import GateSettings, Settings


class _Pictures:
    """A report folder that writes nothing: what finish gave it to save."""

    asked = True

    def __init__(self) -> None:
        self.saved: list[int] = []

    def write(self, run: int, drawn: frozenset[str]) -> list[tuple[str, bool]]:
        self.saved.append(run)
        return [("pytest-gemm report: report/index.html", False)]


def _finish(tmp_path: Path, summary_file: Path, status: int = pytest.ExitCode.OK):
    settings = Settings(
        [Shape(64, 64, 64)], None, [], 0, gate=GateSettings(tmp_path / "baselines", summary=summary_file)
    )
    pictures = _Pictures()
    ending = finish(status, RunSummary({}, {}, {}), lambda exit_status: exit_status, settings, pictures,  # type: ignore[arg-type]
                    left_out=0, selection_error=False, rootpath=tmp_path)  # fmt: skip
    return ending, pictures.saved


def test_a_summary_file_that_cannot_be_written_fails_the_run_and_the_report_says_so(tmp_path):
    (tmp_path / "a_file").write_text("")
    ending, saved = _finish(tmp_path, tmp_path / "a_file" / "summary.md")
    assert ending.exit_status == pytest.ExitCode.TESTS_FAILED
    assert saved == [pytest.ExitCode.TESTS_FAILED]  # the report saves the status the run exits with
    errors = [line for line, failed in ending.lines if failed]
    assert len(errors) == 1 and "summary.md" in errors[0]


def test_a_summary_written_leaves_the_status_as_it_was(tmp_path):
    ending, saved = _finish(tmp_path, tmp_path / "summary.md")
    assert (ending.exit_status, saved) == (pytest.ExitCode.OK, [pytest.ExitCode.OK])
    assert (tmp_path / "summary.md").read_text().startswith("## pytest-gemm")
    failing, _ = _finish(tmp_path, tmp_path / "summary.md", pytest.ExitCode.TESTS_FAILED)
    assert failing.exit_status == pytest.ExitCode.TESTS_FAILED
