"""Architecture targets and TMA tensor-map rules: what the harness checks before it touches a GPU."""

from __future__ import annotations

import pytest

from pytest_gemm.specs.archs import arch_runs_on, parse_arch
from pytest_gemm.specs.tensor_maps import TensorMapLayout, layout_problems


@pytest.mark.parametrize(
    ("arch", "capability", "runs"),
    [
        ("sm_90a", (9, 0), True),
        ("sm_90a", (9, 1), False),
        ("sm_90a", (8, 0), False),
        ("sm_90", (9, 0), True),
        ("sm_80", (8, 6), True),
        ("sm_86", (8, 0), False),
        ("sm_80", (9, 0), False),
        ("sm_100a", (10, 0), True),
        ("sm_100f", (10, 3), True),
        ("sm_120", (12, 0), True),
    ],
)
def test_which_devices_run_code_built_for_an_arch(arch, capability, runs):
    assert arch_runs_on(arch, capability) is runs


def test_arch_names_are_parsed_or_refused():
    assert parse_arch("sm_90a") == (9, 0, "a")
    assert parse_arch("sm_120") == (12, 0, "")
    for bad in ("sm90", "compute_90", "sm_9", "sm_90x"):
        with pytest.raises(ValueError, match="not an architecture"):
            parse_arch(bad)


def _layout(**changes) -> TensorMapLayout:
    values = dict(operand="A", rows=4096, cols=4096, ld=4096, itemsize=2, box_inner=64, box_outer=128, swizzle=128)
    values.update(changes)
    return TensorMapLayout(**values)


def test_a_valid_layout_has_no_problems():
    assert layout_problems(_layout()) == []
    assert layout_problems(_layout(rows=1, cols=8, ld=8, box_inner=8, box_outer=1, swizzle=0)) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"cols": 13, "ld": 13},
            "the rows of A are 13 elements (26 bytes) apart; a TMA tensor map needs a multiple of 16",
        ),
        ({"box_outer": 512}, "the outer box size of A_map is 512; TMA allows 1 to 256"),
        ({"box_inner": 0}, "the inner box size of A_map is 0; TMA allows 1 to 256"),
        ({"box_inner": 4}, "the inner box size of A_map is 8 bytes; TMA needs a multiple of 16"),
        ({"box_inner": 128}, "the inner box size of A_map is 256 bytes, more than its 128-byte swizzle allows"),
        ({"swizzle": 64}, "the inner box size of A_map is 128 bytes, more than its 64-byte swizzle allows"),
    ],
)
def test_layout_problems_say_what_tma_needs(changes, message):
    problems = layout_problems(_layout(**changes))
    assert any(message in p for p in problems), problems
