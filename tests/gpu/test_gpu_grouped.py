"""On the GPU: grouped kernels pass in every layout (contiguous with padding rows, masked, K-grouped) and dtype, as
.cu kernels (with the group arrays, or pointer arrays as CUTLASS's) and as Python kernels (torch's own grouped GEMM,
the peer, and a CuPy loop); a kernel that declares no groups skips grouped shapes; each way a grouped kernel goes
wrong fails its cases and is named: another group's B read (by index or by pointer array), padding rows written
(passed where declared), rows past a group's end written, an empty group not skipped, padding rows read as data.
Needs a device."""

from __future__ import annotations

import pytest

from pytest_gemm.records.groups import Groups, group_plan
from pytest_gemm.records.shapes import SHAPE_SETS

from support import TESTS, failure_section, outcomes_in, requires_gpu, run_kernel_files

pytestmark = [requires_gpu, pytest.mark.gpu]

GROUPED = TESTS / "kernels_grouped"
SHAPES = SHAPE_SETS["grouped"]
AB = ("", "-a0.7b1.3", "-a-1.5b0")
MOE = SHAPE_SETS["moe-deepseek-v3"][-1]


@pytest.fixture(scope="module")
def grouped_run(tmp_path_factory):
    """The kernels of tests/kernels_grouped, once, on the 'grouped' shape set and DeepSeek-V3's decode shape (the
    other MoE shapes' weights take seconds each to draw: the false-alarm sweep runs them)."""
    work = tmp_path_factory.mktemp("grouped")
    moe = MOE.id
    return run_kernel_files(
        work, GROUPED, ("grouped.cu", "grouped_py.py"), "--gemm-shapes", f"grouped,{moe}", "--benchmark-skip"
    )


def _names(kernel: str, dtypes: tuple[str, ...] = ("fp32",), abs_: tuple[str, ...] = ("",), shapes=SHAPES) -> set:
    return {f"{kernel}[{d}-{s.id}{ab}]" for d in dtypes for s in shapes for ab in abs_}


ALIGNED = [s for s in SHAPES if s.K % 8 == 0 and s.N % 8 == 0]  # what torch's grouped GEMM takes

CORRECT = {
    "grouped_contiguous": _names("grouped_contiguous"),
    "grouped_contiguous_bf16": _names("grouped_contiguous_bf16", ("bf16",)),
    "grouped_masked": _names("grouped_masked"),
    "grouped_masked_bf16": _names("grouped_masked_bf16", ("bf16",)),
    "grouped_k": _names("grouped_k"),
    "grouped_k_bf16": _names("grouped_k_bf16", ("bf16",)),
    "grouped_padding_declared": _names("grouped_padding_declared"),
    "grouped_pointers": _names("grouped_pointers"),
    "grouped_pointers_masked": _names("grouped_pointers_masked"),
    "torch_grouped_contiguous": _names("torch_grouped_contiguous", ("bf16",), shapes=ALIGNED),
    "torch_grouped_masked": _names("torch_grouped_masked", ("bf16",), shapes=ALIGNED),
    "torch_grouped_padded": _names("torch_grouped_padded", ("bf16",), shapes=ALIGNED),
    "cupy_grouped_loop": _names("cupy_grouped_loop", ("fp32", "fp16"), AB),
}


@pytest.mark.parametrize("kernel", list(CORRECT))
def test_correct_grouped_kernels_pass(grouped_run, kernel):
    """Every case of a right grouped kernel passes, each group judged by its own bounds, with no calibration error."""
    outcomes = outcomes_in(grouped_run)
    assert {name for name in CORRECT[kernel] if outcomes.get(name) != "PASSED"} == set(), grouped_run[-6000:]
    assert "calibration error" not in grouped_run


def _applies(layout: str, align: int, rule) -> list:
    """The shapes of the set where ``rule(plan)`` holds: where a fault can show."""
    return [s for s in SHAPES if rule(group_plan(Groups(layout, align=align), s))]


WRONG = {
    "grouped_other_b": (("contiguous", 8, lambda p: p.count > 1), "another group's B read"),
    "grouped_pointers_other_b": (("contiguous", 8, lambda p: p.count > 1), "another group's B read"),
    "grouped_writes_padding": (("contiguous", 8, lambda p: p.outside()), "padding rows written"),
    "grouped_past_end": (
        ("masked", 16, lambda p: any(s for s in p.sizes if 0 < s < p.slot)),
        "rows past a group's end written",
    ),
    "grouped_empty_masked": (("masked", 16, lambda p: 0 in p.sizes), "an empty group not skipped"),
    "grouped_empty_contiguous": (
        ("contiguous", 1, lambda p: any(a == 0 and b > 16 for a, b in zip(p.sizes, p.sizes[1:]))),
        "an empty group computed over another's rows",
    ),
    "grouped_reads_padding": (("contiguous", 8, lambda p: p.outside()), "padding rows read as data"),
}


@pytest.mark.parametrize("kernel", list(WRONG))
def test_each_grouped_fault_is_named(grouped_run, kernel):
    """Each wrong grouped kernel fails every case where its fault can show, and the failure names it."""
    (layout, align, rule), words = WRONG[kernel]
    shapes = _applies(layout, align, rule)
    assert shapes, kernel
    outcomes = outcomes_in(grouped_run)
    expected = _names(kernel, shapes=shapes)
    assert {name: outcomes.get(name) for name in expected} == dict.fromkeys(expected, "FAILED"), grouped_run[-6000:]
    for name in expected:
        assert words in failure_section(grouped_run, name), failure_section(grouped_run, name)


def test_moe_shapes_run_on_grouped_kernels(grouped_run):
    """An MoE shape runs on the right grouped kernels, and passes."""
    outcomes = outcomes_in(grouped_run)
    moe = [MOE]
    expected = _names("grouped_contiguous_bf16", ("bf16",), shapes=moe) | _names(
        "torch_grouped_contiguous", ("bf16",), shapes=moe
    )
    assert {name: outcomes.get(name) for name in expected} == dict.fromkeys(expected, "PASSED"), grouped_run[-6000:]
