"""On the GPU: batch invariance (docs/verification.md#batch-invariance). A kernel whose rows of C are the same at any
M passes, its timed rows counted as invariant; one that sums K another way when M is small fails where it declares
batch invariance, naming the rows, and passes flagged where it does not. Needs a CUDA device."""

from __future__ import annotations

import pytest

from support import TESTS, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

SHAPES = "256x256x256,384x640x512"


@pytest.fixture(scope="module")
def rows_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("rows")
    # -vv after run_kernel_files' -q: the full timing table, a row per timed case
    return run_kernel_files(work, TESTS / "kernels_rows", ("rows.cu",), "--gemm-shapes", SHAPES, "-vv")


def _names(kernel: str, ab: str = "") -> set[str]:
    return {f"{kernel}[fp32-{shape}{ab}]" for shape in SHAPES.split(",")}


def test_a_kernel_whose_rows_never_change_passes(rows_run):
    outcomes = outcomes_in(rows_run)
    names = {n for ab in ("", "-a0.7b1.3", "-a-1.5b0") for n in _names("rows_fixed", ab)}
    assert {n: outcomes.get(n) for n in names} == dict.fromkeys(names, "PASSED"), rows_run[-4000:]


def test_a_declared_kernel_whose_rows_change_with_m_fails_naming_them(rows_run):
    outcomes = outcomes_in(rows_run)
    names = _names("rows_split_declared")
    assert {n: outcomes.get(n) for n in names} == dict.fromkeys(names, "FAILED"), rows_run[-4000:]
    for name in names:
        text = failure_section(rows_run, name)
        assert "rows of C change with M: " in text and "(it declares batch_invariant = true)" in text, text
        assert " at M = 1 against the same rows at M = " in text, text


def test_an_undeclared_kernel_whose_rows_change_passes_flagged_and_counted(rows_run):
    outcomes = outcomes_in(rows_run)
    names = {n for ab in ("", "-a0.7b1.3", "-a-1.5b0") for n in _names("rows_split", ab)}
    assert {n: outcomes.get(n) for n in names} == dict.fromkeys(names, "PASSED"), rows_run[-4000:]
    flagged = [line for line in rows_run.splitlines() if line.startswith("rows_split ") and "rows vary with M" in line]
    assert len(flagged) == 2, rows_run[-4000:]  # its timed cases at alpha = 1, beta = 0, one a shape
    assert "batch invariance: 2 case(s) gave the same rows of C at a smaller M, bit for bit; 2 did not" in rows_run
