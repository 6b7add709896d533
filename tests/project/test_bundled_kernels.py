"""The rules the bundled kernel suite (kernels/) keeps: numbered files, one or more per optimisation step."""

from __future__ import annotations

import re

import pytest

from pytest_gemm.records.shapes import SHAPE_SETS
from pytest_gemm.specs.cases import launch_geometry
from pytest_gemm.specs.cufile import parse_cu_file
from pytest_gemm.specs.header_keys import DEVICE_NAMES

from support import KERNELS

FILES = sorted(KERNELS.glob("*.cu"))
SPECS = {path.name: parse_cu_file(path) for path in FILES}
# Steps that must accept every shape: 1 to 4, and the fastest fp32 kernel (step 8).
NO_RULES = ("01_", "02_", "03_", "04_", "08_")


def test_files_are_numbered_by_step_in_order_without_gaps():
    numbers = [int(path.name[:2]) for path in FILES]
    assert sorted(set(numbers)) == list(range(1, max(numbers) + 1))
    assert len(set(numbers)) >= 12


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_opens_with_its_step_comment_and_measured_gain(path):
    text = path.read_text()
    step = int(path.name[:2])
    assert text.startswith(f"// Step {step}:"), "the file must open with its step comment"
    opening = text[: text.index("/* pytest-gemm")]
    # where and at what: an H100 (or, for the grouped step, an H200) at 4096^3 or at MoE shapes (MxNxKgG)
    assert re.search(r"Measured on (the|an) H(100|200)", opening) and re.search(r"4096\^3|\d+x\d+x\d+g\d+", opening)
    earlier = [p for p in FILES if p.name[:2] == path.name[:2] and p.name < path.name]
    if earlier:  # a step's second file says what it changes from the first
        assert earlier[0].name in opening, "the comment must say what changed from the step's earlier file"
    elif step > 1:
        assert f"from step {step - 1}" in opening.lower(), "the comment must say what changed from the previous step"


@pytest.mark.parametrize("prefix", NO_RULES)
def test_steps_that_must_accept_every_shape_have_no_requires_rule(prefix):
    (path,) = [p for p in FILES if p.name.startswith(prefix)]
    for spec in SPECS[path.name]:
        assert spec.requires == (), f"{path.name}: {spec.name} must accept every edge shape"


@pytest.mark.parametrize("path", [p for p in FILES if not p.name.startswith(NO_RULES)], ids=lambda p: p.name)
def test_every_requires_rule_is_explained_in_a_comment(path):
    text = path.read_text()
    if any(spec.requires for spec in SPECS[path.name]):
        explained = re.search(r"^// requires:", text, re.M) or re.search(r"(^#[^\n]*\n)+requires\s*=", text, re.M)
        assert explained, f"{path.name}: a requires rule needs a comment saying why"


@pytest.mark.parametrize("prefix", ["09_", "10_", "12_"])
def test_tensor_core_steps_cover_fp16_and_bf16(prefix):
    paths = [p for p in FILES if p.name.startswith(prefix)]
    assert paths
    for path in paths:
        assert {d for spec in SPECS[path.name] for d in spec.dtypes} == {"fp16", "bf16"}, path.name


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_launch_geometry_is_valid_for_every_accepted_shape(path):
    shapes = {s for name in ("edge", "quick", "standard", "llm") for s in SHAPE_SETS[name]}
    for spec in SPECS[path.name]:
        for variant in spec.variants():
            accepted = 0
            for shape in sorted(shapes):
                names = {"M": shape.M, "N": shape.N, "K": shape.K, **variant.as_dict()}
                if all(rule(names) for rule in spec.requires):
                    geometry = launch_geometry(spec, variant, shape, sm_count=None)  # raises on a CUDA limit
                    assert geometry.shared_mem <= 227 * 1024
                    for sm_count in (16, 114, 132, 148):  # the persistent grids: at most one block per SM
                        grid = launch_geometry(spec, variant, shape, sm_count=sm_count).grid
                        if any(e.names & DEVICE_NAMES for e in spec.grid):
                            assert grid[0] <= sm_count and grid[0] % variant.as_dict().get("CLUSTER", 1) == 0
                    accepted += 1
            assert accepted >= len(SHAPE_SETS["standard"]), (spec.name, variant)
