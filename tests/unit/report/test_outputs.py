"""Where a summary is written (report/outputs.py): the start's check passes exactly when the write at the end
succeeds."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize("step", ["missing/step.md", "step.md", "kept.md", "file.txt/step.md", "here"])
def test_the_summary_check_and_write_follow_one_rule(tmp_path, monkeypatch, step):
    """Whatever $GITHUB_STEP_SUMMARY names, the start's check passes exactly when the write
    at the end succeeds; --gemm-summary in folders that do not exist yet passes both."""
    from pytest_gemm.report.outputs import summary_problems, write_summary

    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("x\n")
    (tmp_path / "kept.md").write_text("before\n")
    (tmp_path / "here").mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", step)
    problems = summary_problems(Path("new/deeper/s.md"), "--gemm-summary")
    error = write_summary(Path("new/deeper/s.md"), "## summary\n", "--gemm-summary")
    assert (problems == []) == (error is None), (problems, error)
    assert all(p.startswith("$GITHUB_STEP_SUMMARY (where the summary is appended): ") for p in problems)
    assert (problems == []) == (step in ("step.md", "kept.md"))
    assert not (tmp_path / "missing").exists()
