"""Grouped GEMMs verified on the host: the worker's prepared case, truth and diagnosis run on NumPy by Python
kernels in each layout, right and wrong in each way a grouped kernel goes wrong (docs/verification.md#grouped-gemm)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gemm.judge.case import wrong_output
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import Check, Misreading
from pytest_gemm.report.failure import failure_text
from pytest_gemm.specs.cases import expand
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.worker.verify import verify

from support.host_device import FunctionKernel, HostCupy, HostDevice, host_case

HEADER = """
from pytest_gemm import gemm_kernel

@gemm_kernel(dtypes=["fp32"], alpha_beta={ab}, groups={groups})
def k(A, B, C, *args):
    pass
"""


def _case(tmp_path, groups: dict, shape: Shape, ab: bool = False, which: int = 0):
    (spec,) = parse_py_source(tmp_path / "k.py", HEADER.format(groups=groups, ab=ab))
    cases = [c for c in expand(spec, [shape]) if c.skip_reason is None]
    return cases[which]


def _verify(case, fn):
    return verify(host_case(FunctionKernel(HostDevice(HostCupy()), case, fn)))


def _text(result, case=None) -> str:
    """The failure text a user reads for a verification (of ``case``, whose declarations it carries)."""
    declared = None if case is None else case.declarations
    diagnosis = wrong_output(result, "fp32", declared)
    return failure_text(result.case_id, CaseResult("failed", diagnosis=diagnosis), "replay")


def _contiguous(A, B, C, ends, *, other=0, pad=None, alpha=1.0, beta=0.0):
    start = 0
    for g in range(B.shape[0]):
        end = int(ends[g])
        h = max(g - other, 0)
        C[start:end] = alpha * (A[start:end] @ B[h]) + (beta * C[start:end] if beta else 0)
        start = end
    if pad is not None:
        pad(C)


CONTIGUOUS = {"layout": "contiguous", "args": ["group_ends"]}
PADDED = {"layout": "contiguous", "align": 8, "args": ["group_index", "group_offsets"]}
MASKED = {"layout": "masked", "align": 16, "args": ["group_rows"]}
K_GROUPED = {"layout": "k", "args": ["group_offsets"]}


def _padded(A, B, C, index, offsets, *, write_padding=False, read_padding=False):
    for g in range(B.shape[0]):
        rows = np.nonzero(index == g)[0]
        if read_padding and len(rows):
            rows_a = rows.copy()
            rows_a[-1] += 1  # a group's last row reads the row after it
        else:
            rows_a = rows
        C[rows] = A[rows_a] @ B[g]
    if write_padding:
        C[index < 0] = 0


@pytest.mark.parametrize(
    "shape", [Shape(300, 256, 128, groups=4), Shape(7, 64, 32, groups=16), Shape(64, 32, 16, groups=1)]
)
def test_right_contiguous_passes(tmp_path, shape):
    result = _verify(_case(tmp_path, CONTIGUOUS, shape), lambda A, B, C, ends: _contiguous(A, B, C, ends))
    assert result.passed, result


def test_right_contiguous_with_alpha_beta_passes(tmp_path):
    case = _case(tmp_path, CONTIGUOUS, Shape(300, 64, 96, groups=4), ab=True, which=1)
    assert case.ab.beta != 0
    fn = lambda A, B, C, alpha, beta, ends: _contiguous(A, B, C, ends, alpha=alpha, beta=beta)  # noqa: E731
    assert _verify(case, fn).passed


def test_padded_contiguous_passes_and_padding_written_is_named(tmp_path):
    case = _case(tmp_path, PADDED, Shape(300, 64, 32, groups=4))
    assert case.plan.outside()
    assert _verify(case, lambda A, B, C, index, offsets: _padded(A, B, C, index, offsets)).passed
    wrong = _verify(case, lambda A, B, C, index, offsets: _padded(A, B, C, index, offsets, write_padding=True))
    assert not wrong.passed
    (fault,) = [f for f in wrong.faults if f.kind == Check.PADDING_WRITTEN]
    written = sum(r1 - r0 for r0, r1, _ in case.plan.outside())
    assert fault.count == written and "group" in fault.where
    assert f"padding rows written: {written} row(s) in the padding rows after groups" in _text(wrong)


def test_padding_written_passes_where_declared(tmp_path):
    case = _case(tmp_path, {**PADDED, "writes_padding": True}, Shape(300, 64, 32, groups=4))
    assert _verify(case, lambda A, B, C, index, offsets: _padded(A, B, C, index, offsets, write_padding=True)).passed


_STORED = """
from pytest_gemm import gemm_kernel

@gemm_kernel(dtypes=["fp32"], alpha_beta=False, groups={groups}{stored})
def k(A, B, C, *args):
    pass
"""


def _stored_case(tmp_path, groups: dict, shape: Shape, stored: str):
    """A grouped case with C in the storage order ``stored`` says (a header's extra keys)."""
    (spec,) = parse_py_source(tmp_path / "k.py", _STORED.format(groups=groups, stored=stored))
    return next(c for c in expand(spec, [shape]) if c.skip_reason is None)


ORDERS_OF_C = ["", ", layout='col'", ", storage={'C': 'NxM'}"]  # row-major, all column-major, C alone column-major


@pytest.mark.parametrize("stored", ORDERS_OF_C)
def test_padding_written_anew_each_launch_passes_where_declared_and_a_groups_row_changing_does_not(tmp_path, stored):
    """A kernel that may write rows of no group may leave anything there, another value each launch (torch's grouped
    GEMM does): the determinism check compares the groups' rows only, whichever order C is stored in; a group's
    element that changes still fails it."""
    launches = iter(range(1, 100))

    def garbage(A, B, C, index, offsets, changing=False):
        _padded(A, B, C, index, offsets)
        n = next(launches)
        C[index < 0] = n  # the padding: another value each launch
        if changing:
            C[np.nonzero(index >= 0)[0][-1], 3] += n  # one element of a group's last row, another value each launch

    case = _stored_case(tmp_path, {**PADDED, "writes_padding": True}, Shape(300, 64, 32, groups=4), stored)
    assert _verify(case, garbage).passed
    changing = _verify(case, lambda *args: garbage(*args, changing=True))
    (fault,) = [f for f in changing.faults if f.kind == Check.NONDETERMINISTIC]
    assert fault.count == 1  # that element, not the padding's
    undeclared = _verify(_stored_case(tmp_path, PADDED, Shape(300, 64, 32, groups=4), stored), garbage)
    assert {Check.PADDING_WRITTEN, Check.NONDETERMINISTIC} <= {f.kind for f in undeclared.faults}


@pytest.mark.parametrize("stored", ORDERS_OF_C)
def test_a_masked_groups_slot_past_its_rows_may_change_each_launch_where_declared(tmp_path, stored):
    """The same for a masked layout, each group a matrix of its own: the rows past a group's end may change."""
    launches = iter(range(1, 100))

    def garbage(A, B, C, rows, changing=False):
        n = next(launches)
        for g in range(B.shape[0]):
            m = int(rows[g])
            C[g, :m] = A[g, :m] @ B[g]
            C[g, m:] = n  # past the group's rows: another value each launch
        if changing:
            g = next(g for g in range(B.shape[0]) if int(rows[g]))
            C[g, 0, 0] += n

    case = _stored_case(tmp_path, {**MASKED, "writes_padding": True}, Shape(64, 48, 32, groups=3), stored)
    assert _verify(case, garbage).passed
    (fault,) = [
        f for f in _verify(case, lambda *a: garbage(*a, changing=True)).faults if f.kind == Check.NONDETERMINISTIC
    ]
    assert fault.count == 1


def test_padding_read_as_data_is_named(tmp_path):
    case = _case(tmp_path, PADDED, Shape(300, 64, 32, groups=4))
    result = _verify(case, lambda A, B, C, index, offsets: _padded(A, B, C, index, offsets, read_padding=True))
    assert not result.passed
    assert Check.PADDING_READ in [f.kind for f in result.faults]
    assert "padding rows read as data" in _text(result) and "A's padding rows (NaN" in _text(result)


def test_other_group_b_is_named_group_by_group(tmp_path):
    case = _case(tmp_path, {**CONTIGUOUS, "sizes": "uniform"}, Shape(400, 64, 32, groups=4))
    result = _verify(case, lambda A, B, C, ends: _contiguous(A, B, C, ends, other=1))
    assert not result.passed
    assert result.misread.kind == Misreading.OTHER_GROUP_B
    assert result.misread.batches == ((1, 0), (2, 1), (3, 2))
    assert "group 1's rows computed with group 0's B" in _text(result) and "3 of 4 groups" in _text(result)


def _masked(A, B, C, rows, *, past_end=False, empty_tile=0):
    for g in range(B.shape[0]):
        n = int(rows[g]) or empty_tile
        n = A.shape[1] if past_end else n
        C[g, :n] = A[g, :n] @ B[g]


def test_masked_right_past_end_and_empty_group(tmp_path):
    case = _case(tmp_path, MASKED, Shape(300, 64, 32, groups=4))
    assert 0 in case.plan.sizes
    assert _verify(case, lambda A, B, C, rows: _masked(A, B, C, rows)).passed
    past = _verify(case, lambda A, B, C, rows: _masked(A, B, C, rows, past_end=True))
    kinds = {f.kind for f in past.faults}
    assert {Check.PAST_GROUP_END, Check.EMPTY_GROUP} <= kinds
    empty = _verify(case, lambda A, B, C, rows: _masked(A, B, C, rows, empty_tile=4))
    assert [f.kind for f in empty.faults if f.kind in (Check.EMPTY_GROUP, Check.PAST_GROUP_END)] == [Check.EMPTY_GROUP]
    assert "an empty group not skipped: 4 row(s) in the slot of empty group" in _text(empty)
    assert "rows past a group's end written" in _text(past)


def test_k_grouped_right_and_wrong(tmp_path):
    case = _case(tmp_path, K_GROUPED, Shape(48, 40, 300, groups=5))
    assert 0 in case.plan.sizes

    def k_grouped(A, B, C, offsets, skip_empty=True):
        for g in range(C.shape[0]):
            k0, k1 = int(offsets[g]), int(offsets[g + 1])
            if k0 == k1 and skip_empty:
                continue  # C starts as NaN: an empty group must still write its zeros
            C[g] = A[:, k0:k1] @ B[k0:k1]

    assert _verify(case, lambda A, B, C, offsets: k_grouped(A, B, C, offsets, skip_empty=False)).passed
    unwritten = _verify(case, lambda A, B, C, offsets: k_grouped(A, B, C, offsets))
    assert not unwritten.passed and unwritten.kernel.unwritten == 48 * 40


def test_empty_contiguous_group_not_skipped_is_named(tmp_path):
    case = _case(tmp_path, CONTIGUOUS, Shape(300, 64, 32, groups=4))
    empty = case.plan.sizes.index(0)

    def fn(A, B, C, ends):
        _contiguous(A, B, C, ends)
        start = int(ends[empty])  # the empty group computes 16 rows from its start: the next group's
        C[start : start + 16] = A[start : start + 16] @ B[empty]

    result = _verify(case, fn)
    assert result.misread.kind == Misreading.EMPTY_GROUP_COMPUTED
    assert result.misread.batches == ((empty + 1, empty),)
    assert f"group {empty + 1}'s rows computed with empty group {empty}'s B" in _text(result)


def test_a_grouped_failure_says_which_group_and_row(tmp_path):
    """Rows of a grouped case's C are named by group in the failure text, never by the stacked row alone."""
    case = _case(tmp_path, K_GROUPED, Shape(64, 64, 300, groups=5))

    def wrong(A, B, C, offsets):
        for g in range(C.shape[0]):
            C[g] = A[:, offsets[g] : offsets[g + 1]] @ B[offsets[g] : offsets[g + 1]]
        C[3, 40:45, 10:12] += 1.0  # group 3's rows 40 to 44

    text = _text(_verify(case, wrong), case)
    assert "(group 3 row 40 to group 3 row 44, columns 10-11" in text, text
    assert "worst elements (group row, col)" in text and "(group 3 row 4" in text
    assert "declared in the header: groups: k layout, sizes 'edge' (at 64x64x300g5, k per group: 5," in text


def test_a_groups_b_read_in_the_other_order_is_named_as_a_gemms_slip(tmp_path):
    """Each group tried as a GEMM of its own: every group's B read N x K where it is stored K x N."""
    case = _case(tmp_path, CONTIGUOUS, Shape(300, 64, 64, groups=4))

    def transposed(A, B, C, ends):
        start = 0
        for g in range(B.shape[0]):
            end = int(ends[g])
            C[start:end] = A[start:end] @ B[g].T
            start = end

    result = _verify(case, transposed)
    assert not result.passed
    assert result.misread is not None and result.misread.kind == Misreading.B_ORDER
    assert "B read as N x K; the header says K x N" in _text(result, case)
