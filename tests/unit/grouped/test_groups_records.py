"""A grouped GEMM's records and declarations, on the CPU: the groups of a shape (sizes drawn once per shape, each
layout's geometry, the group arrays), grouped shapes written MxNxKgG, the groups key checked against the rest of the
header, and which kernels run which shapes (docs/kernel-files.md#grouped-gemm)."""

from __future__ import annotations

import pytest

from pytest_gemm.records.groups import TINY_GROUP, Groups, group_plan
from pytest_gemm.records.shapes import SHAPE_SETS, Shape, ShapeError, parse_shapes
from pytest_gemm.specs.cases import expand
from pytest_gemm.specs.errors import KernelFileError
from pytest_gemm.specs.footprint import harness_ints
from pytest_gemm.specs.header import spec_from_mapping


def test_grouped_shapes_are_written_with_their_groups():
    assert Shape.of("300x256x128g4") == Shape(300, 256, 128, groups=4)
    assert parse_shapes("64x64x64g1,grouped")[0].id == "64x64x64g1"
    assert all(s.groups for name in SHAPE_SETS if "moe" in name or name == "grouped" for s in SHAPE_SETS[name])
    for bad in ("4x4x4g0", "4x4x4b2g2"):
        with pytest.raises(ShapeError):
            parse_shapes(bad)


@pytest.mark.parametrize("layout", ["contiguous", "masked", "k"])
@pytest.mark.parametrize("shape", SHAPE_SETS["grouped"])
def test_a_shapes_groups_add_up_and_are_the_same_in_every_run(layout, shape):
    groups = Groups(layout, align=1 if layout == "k" else 8)
    plan = group_plan(groups, shape)
    assert plan == group_plan(Groups(layout, align=groups.align), shape)  # drawn from the shape alone
    assert len(plan.sizes) == shape.groups and min(plan.sizes) >= 0
    assert sum(plan.sizes) == (shape.K if layout == "k" else shape.M)
    if shape.groups >= 3:  # the edge distribution: an empty group and one smaller than a tile
        assert 0 in plan.sizes and min(TINY_GROUP, sum(plan.sizes)) in plan.sizes


def test_contiguous_groups_are_padded_and_their_padding_belongs_to_no_group():
    plan = group_plan(Groups("contiguous", sizes="uniform", align=8), Shape(30, 16, 8, groups=3))
    assert plan.sizes == (10, 10, 10) and plan.starts == (0, 16, 32) and plan.rows == 48
    assert plan.outside() == ((10, 16, 0), (26, 32, 1), (42, 48, 2))
    args = plan.group_args()
    assert args["group_ends"] == (10, 26, 42) and args["group_offsets"] == (0, 16, 32, 42)
    assert args["group_index"][8:18] == (0, 0, -1, -1, -1, -1, -1, -1, 1, 1)
    assert plan.operand_shape("A") == Shape(48, 16, 8) and plan.operand_shape("B") == Shape(48, 16, 8, 3)


def test_masked_slots_and_k_groups():
    masked = group_plan(Groups("masked", sizes="uniform", align=16), Shape(30, 16, 8, groups=3))
    assert masked.slot == 16 and masked.c_rows(2) == (32, 42) and masked.outside()[2] == (42, 48, 2)
    assert masked.operand_shape("C") == Shape(16, 16, 8, 3)
    k = group_plan(Groups("k", sizes="uniform"), Shape(5, 6, 30, groups=3))
    assert [k.k_range(g) for g in range(3)] == [(0, 10), (10, 20), (20, 30)] and k.c_rows(1) == (5, 10)
    assert k.outside() == () and "group_index" not in k.group_args()
    assert k.ints == {"M": 5, "N": 6, "K": 30, "num_groups": 3}


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"layout": "ragged"}, "layout: expected one of"),
        ({"layout": "contiguous", "sizes": "zipf"}, "sizes: expected one of"),
        ({"layout": "contiguous", "align": 0}, "align: expected an integer"),
        ({"layout": "k", "align": 8}, "a K-grouped layout has no padding"),
        ({"layout": "k", "args": ("group_index",)}, "group_index lists the rows of a contiguous A"),
        ({"layout": "masked", "args": ("group_index",)}, "a 'masked' layout has none"),
        ({"layout": "k", "writes_padding": True}, "a K-grouped C has no rows outside the groups"),
        ({"layout": "contiguous", "args": ("group_ends", "group_ends")}, "named twice"),
    ],
)
def test_the_groups_record_refuses_what_cannot_be(fields, words):
    with pytest.raises(ValueError, match=words):
        Groups(**fields)


BLOCK_SCALES = {"A": "1x128", "B": "128x128"}


def _cu(**header):
    data = {"entry": "k", "block": [16], "grid": [1], "dtypes": ["fp32"], "args": ["A", "B", "C"]} | header
    return spec_from_mapping(data, path="k.cu", kind="cu")


def _py(**header):
    return spec_from_mapping({"dtypes": ["fp32"]} | header, path="k.py", kind="py", default_name="k")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: _cu(groups={"layout": "contiguous"}), "a grouped kernel takes at least one group array"),
        (lambda: _cu(args=["A", "B", "C", "group_ends"]), "group_ends is a grouped kernel's argument"),
        (
            lambda: _cu(args=["A", "B", "C", "group_ends"], groups={"layout": "contiguous", "args": ["group_ends"]}),
            "a .cu kernel names the group arrays it takes in the header's args",
        ),
        (lambda: _cu(args=["A", "B", "C", "group_index"], groups={"layout": "k"}), "a 'k' layout has none"),
        (
            lambda: _py(dtypes=["fp8_e4m3"], scales=BLOCK_SCALES, groups={"layout": "k", "args": ["group_ends"]}),
            "a K-grouped FP8 kernel is not supported yet",
        ),
        (lambda: _cu(args=["A", "B", "C", "group_ends", "batch"], groups={"layout": "k"}), "not both"),
        (lambda: _py(groups={"layout": "contiguous"}), "name the group arrays the function takes after C"),
        (lambda: _py(groups={"layout": "contiguous", "args": ["x"]}), "expected names from group_ends"),
        (lambda: _py(groups={"layout": "masked", "slot": 64, "args": ["group_rows"]}), "unknown key 'slot'"),
        (lambda: _py(groups="contiguous"), "expected a table"),
        (lambda: _py(batched=True, groups={"layout": "masked", "args": ["group_rows"]}), "not both"),
        (
            lambda: _py(dtypes=["int8"], groups={"layout": "contiguous", "args": ["group_ends"]}),
            "grouped INT8 kernels are not supported yet",
        ),
    ],
)
def test_the_groups_key_is_checked_against_the_header(make, words):
    with pytest.raises(KernelFileError, match=words) as caught:
        make()
    assert caught.value.path == "k.cu" or str(caught.value.path) == "k.py"


def test_a_grouped_kernel_runs_grouped_shapes_and_another_kernel_skips_them():
    args = ["M", "N", "K", "A", "B", "C", "group_index", "num_groups"]
    grouped = _cu(name="grouped", args=args, groups={"layout": "contiguous", "align": 8})
    plain = _cu(name="plain")
    shapes = [Shape(64, 64, 64), Shape(300, 256, 128, groups=4)]
    reasons = {(c.spec.name, c.shape.id): c.skip_reason for s in (grouped, plain) for c in expand(s, shapes)}
    assert "the kernel is grouped and runs grouped shapes" in reasons[("grouped", "64x64x64")]
    assert reasons[("grouped", "300x256x128g4")] is None and reasons[("plain", "64x64x64")] is None
    assert "the kernel is not grouped" in reasons[("plain", "300x256x128g4")]
    assert grouped.group_args == ("group_index",)
    ints = harness_ints(grouped, shapes[1])
    plan = group_plan(grouped.groups, shapes[1])
    assert ints["M"] == (plan.rows, "") and ints["num_groups"] == (4, "") and plan.rows % 8 == 0


def test_a_grouped_kernel_runs_under_compute_sanitizer_at_grouped_shape():
    """The one case compute-sanitizer runs for a grouped kernel is grouped (4 groups, an empty one among them)."""
    from pytest_gemm.specs.sanitizing import SANITIZE_GROUPS, sanitize_case

    spec = _cu(name="grouped", args=["M", "N", "K", "A", "B", "C", "group_ends"], groups={"layout": "contiguous"})
    case = sanitize_case(spec)
    assert case is not None and case.shape.groups == SANITIZE_GROUPS and 0 in case.plan.sizes


def test_a_saved_record_says_which_peer_it_was_timed_against():
    """A timed record's peer reads back from a saved run (old runs: cuBLAS), and is checked as text."""
    import dataclasses

    from pytest_gemm.records.case_record import CaseRecord, record_problem
    from pytest_gemm.records.plain import from_plain, to_plain

    from support.baselines import timed_record

    row = dataclasses.replace(timed_record(), peer="torch _grouped_mm")
    assert from_plain(CaseRecord, to_plain(row)).peer == "torch _grouped_mm"
    old = to_plain(row)
    del old["peer"]
    assert from_plain(CaseRecord, old).peer == "cuBLAS"
    assert record_problem(dataclasses.replace(row, peer="x\x00y")) is not None


def test_pointer_arrays_are_a_cu_kernels_and_an_m_grouped_layouts():
    with pytest.raises(ValueError, match="K-grouped, groups are ranges of K"):
        Groups("k", args=("A_ptrs",))
    with pytest.raises(KernelFileError, match=r"pointer arrays are a \.cu kernel"):
        _py(groups={"layout": "contiguous", "args": ["A_ptrs"]})
    spec = _cu(args=["N", "K", "A", "B", "C", "A_ptrs", "B_ptrs", "C_ptrs", "group_rows"], groups={"layout": "masked"})
    assert spec.group_args == ("A_ptrs", "B_ptrs", "C_ptrs", "group_rows")


def test_each_groups_address_is_its_first_element_as_stored():
    """A pointer array holds, for each group, the address of its matrix in a batch (B; every operand masked), or of
    its first row of the one matrix (a column where it is stored transposed), 64-bit (two int32 each)."""
    from types import SimpleNamespace

    import numpy as np

    from pytest_gemm.records.storage import Storage
    from pytest_gemm.worker.grouped import group_host

    plan = group_plan(Groups("contiguous", align=8), Shape(300, 64, 32, groups=4))
    base, itemsize, ld = 1 << 40, 4, 40

    def matrix(stride: int):
        view = SimpleNamespace(data=SimpleNamespace(ptr=base))
        return SimpleNamespace(pointer=lambda: view, flat=np.zeros(1, np.uint32), ld=ld, batch_stride=stride)

    operands = {"A": matrix(0), "B": matrix(32 * 64), "C": matrix(0)}

    def addresses(name: str, storage: Storage) -> list[int]:
        return group_host(plan, name, operands, storage).view(np.uint64)[0].tolist()

    rows = Storage()
    assert addresses("A_ptrs", rows) == [base + start * ld * itemsize for start in plan.starts]
    assert addresses("B_ptrs", rows) == [base + g * 32 * 64 * itemsize for g in range(4)]
    assert addresses("A_ptrs", Storage(A="KxM")) == [base + start * itemsize for start in plan.starts]
    assert addresses("C_ptrs", Storage(C="NxM")) == [base + start * itemsize for start in plan.starts]
    # masked: every operand one matrix a group, a stride's gap apart (a kernel that takes its strides)
    plan = group_plan(Groups("masked", align=16), Shape(300, 64, 32, groups=4))
    operands = {"A": matrix(plan.slot * ld + 3 * ld), "B": matrix(32 * 64), "C": matrix(plan.slot * ld + 3 * ld)}
    for name in ("A_ptrs", "C_ptrs"):
        assert addresses(name, rows) == [base + g * (plan.slot + 3) * ld * itemsize for g in range(4)]


def test_a_per_group_operands_map_with_a_batch_stride_is_refused():
    args = ["M", "N", "K", "A", "B_map", "C", "stride_b", "group_index"]
    maps = {"B": {"box": [64, 64], "swizzle": 128}}
    with pytest.raises(KernelFileError, match="B_map is one map over B's matrices stacked"):
        _cu(args=args, tensor_maps=maps, groups={"layout": "contiguous"}, dtypes=["bf16"])
