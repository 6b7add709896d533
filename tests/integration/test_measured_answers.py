"""Batch invariance in a run (docs/verification.md#batch-invariance), with recorded outcomes: a kernel that does not
declare it carries the worker's measured answer into the timing table and its saved record, and passes."""

from __future__ import annotations

import json

CASE = "sgemm_naive[fp32-4096x4096x4096]"


def test_rows_that_vary_with_m_are_flagged_counted_and_saved_and_the_case_passes(replay, monkeypatch):
    monkeypatch.setenv("REPLAY_ACT", f"01_naive.cu::{CASE}=rows-vary:7")
    result = replay.runpytest("--gemm-kernels", "kernels/01_naive.cu", "-v", "--benchmark-json", "run.json")
    result.assert_outcomes(passed=8)  # its 2 compile items and 6 cases
    result.stdout.fnmatch_lines(["sgemm_naive * 4096x4096x4096 *rows vary with M*"])
    result.stdout.fnmatch_lines(["batch invariance: 0 case(s) gave the same rows of C at a smaller M, bit for bit; 1 "
                                 "did not (rows vary with M)"])  # fmt: skip
    saved = json.loads((replay.path / "run.json").read_text())["benchmarks"]
    answers = {
        b["extra_info"]["gemm"]["test"].split("::")[-1]: b["extra_info"]["gemm"]["batch_invariant"] for b in saved
    }
    assert answers[CASE] is False
    assert {k: v for k, v in answers.items() if k != CASE} == dict.fromkeys(set(answers) - {CASE})  # not recorded
