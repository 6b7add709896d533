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
from pytest_gemm.specs.cases import AB_CASES, AlphaBeta, Case
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.specs.spec import KernelSpec, Variant
from pytest_gemm.worker.batch_rows import smaller_ms
from pytest_gemm.worker.verify import verify

from support import recorded_records, recording
from support.host_device import FunctionKernel, HostCupy, HostDevice, HostKernel, cu_spec, host_case


def _rows(case, g, a, b, c, n):
    """A row at a time, each the same vector-matrix product whatever M is, as a kernel with one thread a row would
    (a library's GEMM is not: NumPy's BLAS takes another path for one row). In the logical order of A and C."""
    a, c = (x.T if case.storage.transposed(name) else x for x, name in ((a, "A"), (c, "C")))
    b = b.T if case.storage.transposed("B") else b
    for i in range(a.shape[0]):
        c[i] = case.ab.alpha * (a[i] @ b) + (case.ab.beta * c[i] if case.ab.beta else 0)


def _split_when_few(case, g, a, b, c, n):
    """Sums K in two halves when M is small (as a split-K chosen by M would): the same rows, other roundings."""
    half = a.shape[1] // 2
    for i in range(a.shape[0]):
        whole = a[i] @ b if a.shape[0] >= 64 else a[i, :half] @ b[:half] + a[i, half:] @ b[half:]
        c[i] = case.ab.alpha * whole + (case.ab.beta * c[i] if case.ab.beta else 0)


def _case(shape=None, ab=AB_CASES[0], **header) -> Case:
    spec = cu_spec(**header)
    return Case(spec, spec.variants()[0], "fp32", shape or Shape(256, 96, 512), ab)


def _verified(fn, case):
    return verify(host_case(HostKernel(case, fn), 1))


@pytest.mark.parametrize("declared", [True, False])
def test_rows_the_same_at_a_smaller_m_pass_and_say_so(declared):
    verification = _verified(_rows, _case(batch_invariant=declared))
    assert verification.passed
    assert verification.batch_rows == BatchRows(at=(1, 128))
    assert verification.batch_rows.invariant is True


def test_rows_are_compared_in_logical_order_whatever_the_storage():
    case = _case(Shape(300, 96, 64), batch_invariant=True, storage={"A": "KxM", "B": "NxK", "C": "NxM"})
    verification = _verified(_rows, case)
    assert verification.passed and verification.batch_rows == BatchRows(at=(1, 150))


def test_a_declared_kernel_whose_rows_change_with_m_fails_naming_the_rows():
    case = _case(batch_invariant=True)
    verification = _verified(_split_when_few, case)
    assert not verification.passed
    (fault,) = verification.faults
    assert fault.kind == Check.BATCH_VARIANT and fault.count > 0
    result = judge_outcome(case, "k.cu::k", Outcome(verification=verification), recording()["facts"])
    assert result.failed
    assert (
        f"rows of C change with M: {fault.count} row(s) differ bit for bit between C's first 1 rows at M = 1 against "
        "the same rows at M = 256 (it declares batch_invariant = true)"
    ) in diagnosis_lines(result.diagnosis)


def test_an_undeclared_kernel_whose_rows_change_with_m_passes_with_the_measured_answer():
    verification = _verified(_split_when_few, _case())
    assert verification.passed and not verification.faults
    assert verification.batch_rows.invariant is False and verification.batch_rows.where == 1


def test_a_launch_at_a_smaller_m_that_fails_is_not_checked_and_says_why():
    def refuses_few(case, g, a, b, c, n):
        if a.shape[0] < 64:
            raise ValueError("too few rows")
        _rows(case, g, a, b, c, n)

    rows = _verified(refuses_few, _case(batch_invariant=True)).batch_rows
    assert rows.invariant is None and rows.reason == "the launch at M = 1 failed (ValueError: too few rows)"


@pytest.mark.parametrize(
    ("shape", "header", "reason"),
    [
        (
            Shape(256, 96, 512, batch=2),
            {"args": ["M", "N", "K", "alpha", "beta", "A", "stride_a", "B", "stride_b", "C", "stride_c", "batch"]},
            "checked for one plain GEMM",
        ),
        (Shape(1, 96, 512), {}, "no smaller M is allowed by the kernel's rules"),
        (Shape(256, 96, 512), {"nondeterministic": "split-K"}, "its launches may differ (nondeterministic)"),
    ],
)
def test_cases_it_does_not_check_say_why(shape, header, reason):
    case = _case(shape, **header)
    kernel = HostKernel(case, lambda case, g, a, b, c, n: c.__setitem__(..., a @ b))
    rows = verify(host_case(kernel, 1)).batch_rows
    assert rows.invariant is None and rows.reason.startswith(reason)


def test_python_kernels_are_not_launched_at_other_shapes_and_cannot_declare_it():
    spec = KernelSpec(path="k.py", name="k", dtypes=("fp32",), kind="py", attr="k")
    case = Case(spec, Variant(), "fp32", Shape(128, 96, 64), AB_CASES[0])
    gemm = lambda A, B, C, alpha, beta: C.__setitem__(..., alpha * (A @ B))  # noqa: E731
    rows = verify(host_case(FunctionKernel(HostDevice(HostCupy()), case, gemm), 1)).batch_rows
    assert rows.reason.startswith("a Python kernel: a call at another M could compile or tune it again")
    source = 'from pytest_gemm import gemm_kernel\n\n@gemm_kernel(dtypes=["fp32"], batch_invariant=True)\ndef k(A, B, C, alpha, beta):\n    pass\n'  # noqa: E501
    with pytest.raises(KernelFileError, match="key 'batch_invariant': a Python kernel's calls at another M could"):
        parse_py_source("k.py", source)


def test_cases_at_other_scalars_are_not_checked():
    verification = _verified(_split_when_few, _case(ab=AlphaBeta(0.7, 1.3), batch_invariant=True))
    assert verification.passed and verification.batch_rows is None


def test_the_ms_compared_follow_the_kernels_rules_up_to_half_of_m():
    assert smaller_ms(host_case(HostKernel(_case(Shape(512, 64, 64), requires=["M % 64 == 0"]), _rows), 1)) == (
        64,
        256,
    )
    assert smaller_ms(host_case(HostKernel(_case(Shape(100, 64, 64)), _rows), 1)) == (1, 50)
    assert smaller_ms(host_case(HostKernel(_case(Shape(64, 64, 64), requires=["M % 64 == 0"]), _rows), 1)) == ()


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
