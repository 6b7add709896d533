"""Grouped FP8 GEMMs verified on the host: each group's B quantised with its own grid of scales, judged by its own
truth; a kernel that applies another group's scales is named so, group by group, and one that reads another group's
B (elements and scales) as that (docs/verification.md#grouped-fp8)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pytest_gemm.judge.case import wrong_output
from pytest_gemm.records.result import CaseResult
from pytest_gemm.records.shapes import Shape
from pytest_gemm.records.verdicts import Misreading
from pytest_gemm.report.failure import failure_text
from pytest_gemm.specs.cases import expand
from pytest_gemm.specs.pyfile import parse_py_source
from pytest_gemm.worker.verify import verify

from support.host_device import FunctionKernel, HostCupy, HostDevice, host_case

HEADER = """
from pytest_gemm import gemm_kernel

@gemm_kernel(dtypes=["fp8_e4m3"], c_dtype="fp32", scales={scales}, groups={groups})
def k(A, B, C, scale_a, scale_b, *args):
    pass
"""
BLOCKS = {"A": "1x128", "B": "128x128"}
CONTIGUOUS = {"layout": "contiguous", "align": 4, "args": ["group_offsets", "group_rows"]}
MASKED = {"layout": "masked", "align": 8, "args": ["group_rows"]}


def _case(tmp_path, groups: dict, shape: Shape, scales: dict = BLOCKS):
    (spec,) = parse_py_source(tmp_path / "k.py", HEADER.format(groups=groups, scales=scales))
    (case,) = [c for c in expand(spec, [shape]) if c.skip_reason is None]
    return case


def _values(x, grid, block):
    """An operand's exact values: its FP8 bytes decoded, times its blocks' scales (UE8M0 bytes: 2^(e - 127))."""
    values = np.asarray(x).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    rows, cols = block[0] or values.shape[0], block[1] or values.shape[1]
    grid = np.asarray(grid)
    grid = np.exp2(grid.astype(np.float64) - 127) if grid.dtype == np.uint8 else grid.astype(np.float64)
    spread = np.repeat(np.repeat(grid, rows, axis=0), cols, axis=1)
    return values * spread[: values.shape[0], : values.shape[1]]


def _blocks(scales: dict) -> tuple[tuple, tuple]:
    a = {"1x128": (1, 128), "row": (1, None), "tensor": (None, None)}[scales["A"]]
    b = {"128x128": (128, 128), "col": (None, 1), "tensor": (None, None)}[scales["B"]]
    return a, b


def _verify(case, fn):
    return verify(host_case(FunctionKernel(HostDevice(HostCupy()), case, fn)))


def _named(case, fn, kind: Misreading) -> str:
    """The failure text of ``fn`` on ``case``, which must fail named as the misreading ``kind``."""
    result = _verify(case, fn)
    assert not result.passed
    assert result.misread is not None and result.misread.kind == kind, result.misread
    diagnosis = wrong_output(result, "fp8_e4m3", case.declarations)
    return failure_text(result.case_id, CaseResult("failed", diagnosis=diagnosis), "replay")


@pytest.mark.parametrize(
    ("shape", "scales"),
    [
        (Shape(300, 256, 256, groups=4), BLOCKS),
        (Shape(700, 128, 200, groups=5), BLOCKS),
        (Shape(300, 64, 96, groups=3), {"A": "row", "B": "col"}),
        (Shape(300, 64, 96, groups=3), {"A": "tensor", "B": "tensor"}),
        (Shape(300, 64, 384, groups=4), {**BLOCKS, "stored": {"A": "KxM", "B": "NxK"}, "align": 16}),
        (Shape(300, 256, 256, groups=4), {**BLOCKS, "type": "ue8m0"}),
        (Shape(300, 64, 96, groups=5), {"A": "tensor", "B": "tensor", "type": "ue8m0"}),
    ],
)
def test_a_right_grouped_fp8_kernel_passes(tmp_path, shape, scales):
    result = _verify(_case(tmp_path, CONTIGUOUS, shape, scales), _group_kernel(scales))
    assert result.passed, result.stats


def _group_kernel(scales: dict = BLOCKS, **kw):
    """Each group's rows of the stacked A and C: its first (group_offsets) and how many (group_rows)."""
    block_a, block_b = _blocks(scales)
    other = kw.get("other_scales", False) or kw.get("other_b", False)

    def fn(A, B, C, scale_a, scale_b, offsets, sizes):
        count = B.shape[0]
        for g in range(count):
            r0 = int(offsets[g])
            r1 = r0 + int(sizes[g])
            h = (g + 1) % count if other else g
            a = _values(A[r0:r1], scale_a[r0:r1] if block_a[0] else scale_a, block_a)
            b = _values(B[h if kw.get("other_b") else g], scale_b[h], block_b)
            C[r0:r1] = a @ b

    return fn


@pytest.mark.parametrize(
    "scales",
    [
        BLOCKS,
        {**BLOCKS, "stored": {"A": "KxM", "B": "NxK"}, "align": 16},
        {"A": "tensor", "B": "tensor", "type": "ue8m0"},
    ],
)
def test_another_groups_scales_are_named_group_by_group(tmp_path, scales):
    """Even one UE8M0 scale an expert differs from its neighbours' (each expert's weights a size of their own)."""
    case = _case(tmp_path, CONTIGUOUS, Shape(300, 256, 256, groups=4), scales)
    text = _named(case, _group_kernel(scales, other_scales=True), Misreading.OTHER_GROUP_SCALES)
    assert "another group's scales applied" in text and "B scaled by group" in text


def test_another_groups_b_is_named_as_such_not_as_its_scales(tmp_path):
    result = _verify(_case(tmp_path, CONTIGUOUS, Shape(300, 256, 256, groups=4)), _group_kernel(other_b=True))
    assert not result.passed
    assert result.misread is not None and result.misread.kind == Misreading.OTHER_GROUP_B


def test_masked_grouped_fp8_passes_with_each_slots_scales(tmp_path):
    block_a, block_b = _blocks(BLOCKS)

    def fn(A, B, C, scale_a, scale_b, rows):
        for g in range(B.shape[0]):
            m = int(rows[g])
            a = _values(A[g, :m], scale_a[g, :m], block_a)
            C[g, :m] = a @ _values(B[g], scale_b[g], block_b)

    result = _verify(_case(tmp_path, MASKED, Shape(300, 128, 256, groups=4)), fn)
    assert result.passed, result.stats


def test_one_gemms_scale_slip_is_named_in_every_group(tmp_path):
    """A grouped kernel that ignores B's scales in every group is named so, as a GEMM's slip is (each group tried as a
    GEMM of its own), not as another group's data."""
    block_a, _ = _blocks(BLOCKS)

    def fn(A, B, C, scale_a, scale_b, offsets, sizes):
        for g in range(B.shape[0]):
            r0 = int(offsets[g])
            r1 = r0 + int(sizes[g])
            a = _values(A[r0:r1], scale_a[r0:r1], block_a)
            C[r0:r1] = a @ np.asarray(B[g]).view(ml_dtypes.float8_e4m3fn).astype(np.float64)

    text = _named(_case(tmp_path, CONTIGUOUS, Shape(300, 256, 256, groups=4)), fn, Misreading.B_SCALES_IGNORED)
    assert "B's scales ignored (A's applied) in groups 0, 1, 3 (3 of 4)" in text, text  # group 2 is empty


def test_another_slots_scales_of_a_are_named(tmp_path):
    """Masked: each slot of A has its own grid; a kernel that scales group g's rows by slot g + 1's is named so."""
    block_a, block_b = _blocks(BLOCKS)

    def fn(A, B, C, scale_a, scale_b, rows):
        count = B.shape[0]
        for g in range(count):
            m = int(rows[g])
            a = _values(A[g, :m], scale_a[(g + 1) % count, :m], block_a)
            C[g, :m] = a @ _values(B[g], scale_b[g], block_b)

    text = _named(_case(tmp_path, MASKED, Shape(300, 128, 256, groups=4)), fn, Misreading.OTHER_GROUP_A_SCALES)
    assert "another slot's scales of A applied (group 0's A scaled by slot 1's scales" in text, text
