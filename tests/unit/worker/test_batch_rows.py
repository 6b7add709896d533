"""Batch invariance (docs/verification.md#batch-invariance): the worker's own verification, on NumPy arrays standing
for CuPy's, launches the case's first rows of A again as GEMMs of fewer rows and compares their rows of C bit for
bit; a kernel that declares ``batch_invariant = true`` fails on a row that differs, the others carry the answer."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_gemm.judge.case import judge_outcome
from pytest_gemm.records.outcome import BatchRows, Outcome
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import Check
from pytest_gemm.report.failure import diagnosis_lines
from pytest_gemm.report.tables import BATCH_VARIANT_FLAG, row_flags, timing_tables
from pytest_gemm.specs.cases import AB_CASES, Case
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.specs.spec import KernelSpec, Variant
from pytest_gemm.worker.batch_rows import smaller_ms
from pytest_gemm.worker.verify import verify

from support import recorded_records, recording
from support.host_device import FunctionKernel, HostCupy, HostDevice, host_case


def _invariant(A, B, C, alpha, beta):
    """A row at a time, each the same vector-matrix product whatever M is (a library's GEMM is not: NumPy's BLAS
    takes another path for one row)."""
    for i in range(A.shape[0]):
        C[i] = alpha * (A[i] @ B) + (beta * C[i] if beta else 0)


def _library(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


def _split_when_few(A, B, C, alpha, beta):
    """Sums K in two halves when M is small (as a split-K chosen by M would): the same rows, other roundings."""
    half = A.shape[1] // 2
    for i in range(A.shape[0]):
        whole = A[i] @ B if A.shape[0] >= 64 else A[i, :half] @ B[:half] + A[i, half:] @ B[half:]
        C[i] = alpha * whole


def _verified(fn, *, declared: bool):
    spec = KernelSpec(path="k.py", name="k", dtypes=("fp32",), kind="py", attr="k", batch_invariant=declared)
    case = Case(spec, Variant(), "fp32", Shape(256, 96, 512), AB_CASES[0])
    return case, verify(host_case(FunctionKernel(HostDevice(HostCupy()), case, fn), 1))


@pytest.mark.parametrize("declared", [True, False])
def test_rows_the_same_at_a_smaller_m_pass_and_say_so(declared):
    _, verification = _verified(_invariant, declared=declared)
    assert verification.passed
    assert verification.batch_rows == BatchRows(at=(1, 128))
    assert verification.batch_rows.invariant is True


def test_a_declared_kernel_whose_rows_change_with_m_fails_naming_the_rows():
    case, verification = _verified(_split_when_few, declared=True)
    assert not verification.passed
    (fault,) = verification.faults
    assert fault.kind == Check.BATCH_VARIANT and fault.count > 0
    result = judge_outcome(case, "k.py::k", Outcome(verification=verification), recording()["facts"])
    assert result.failed
    assert any(
        line.startswith(f"rows of C change with M: {fault.count} row(s) differ bit for bit between C's first 1 rows")
        and line.endswith("(it declares batch_invariant = true)")
        for line in diagnosis_lines(result.diagnosis)
    ), diagnosis_lines(result.diagnosis)


def test_an_undeclared_kernel_whose_rows_change_with_m_passes_with_the_measured_answer():
    _, verification = _verified(_split_when_few, declared=False)
    assert verification.passed and not verification.faults
    assert verification.batch_rows.invariant is False and verification.batch_rows.where == 1


@pytest.mark.parametrize(
    ("shape", "ab", "reason"),
    [
        (Shape(256, 96, 512), AB_CASES[1], "checked at alpha = 1, beta = 0"),
        (Shape(256, 96, 512, batch=2), AB_CASES[0], "checked for one plain GEMM"),
        (Shape(1, 96, 512), AB_CASES[0], "no smaller M is allowed by the kernel's rules"),
    ],
)
def test_cases_it_does_not_check_say_why(shape, ab, reason):
    spec = KernelSpec(path="k.py", name="k", dtypes=("fp32",), kind="py", attr="k", batched="strided")
    spec = spec if shape.batch > 1 else dataclasses.replace(spec, batched=None)
    case = Case(spec, Variant(), "fp32", shape, ab)
    rows = verify(host_case(FunctionKernel(HostDevice(HostCupy()), case, _library), 1)).batch_rows
    assert rows.invariant is None and rows.reason.startswith(reason)


def test_the_ms_compared_follow_the_kernels_rules():
    source = (
        "from pytest_gemm import gemm_kernel\n\n"
        '@gemm_kernel(dtypes=["fp32"], requires=["M % 64 == 0"])\n'
        "def k(A, B, C, alpha, beta):\n    pass\n"
    )
    (spec,) = parse_py_source("k.py", source)
    case = Case(spec, Variant(), "fp32", Shape(512, 64, 64), AB_CASES[0])
    kernel = FunctionKernel(HostDevice(HostCupy()), case, _invariant)
    assert smaller_ms(host_case(kernel, 1)) == (64, 256)
    small = dataclasses.replace(case, shape=Shape(64, 64, 64))
    assert smaller_ms(host_case(FunctionKernel(HostDevice(HostCupy()), small, _invariant), 1)) == ()


def test_the_table_flags_rows_that_vary_and_its_footer_counts_the_answers():
    row = recorded_records()[0]
    assert BATCH_VARIANT_FLAG not in row_flags(dataclasses.replace(row, batch_invariant=True))
    assert row_flags(dataclasses.replace(row, batch_invariant=False)) == BATCH_VARIANT_FLAG
    rows = [dataclasses.replace(r, batch_invariant=i > 0) for i, r in enumerate(recorded_records()[:3])]
    lines = timing_tables(rows, recording()["facts"], width=120)
    assert (
        "batch invariance: 2 case(s) gave the same rows of C at a smaller M, bit for bit; 1 did not "
        f"({BATCH_VARIANT_FLAG})"
    ) in lines


def test_the_answer_is_kept_in_the_saved_record():
    row = dataclasses.replace(recorded_records()[0], batch_invariant=False)
    assert type(row).from_dict(row.to_dict()).batch_invariant is False
