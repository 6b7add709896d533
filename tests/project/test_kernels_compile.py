"""The repository's kernels build with NVRTC (no GPU): the bundled kernels for sm_80 and sm_90 without spills, the
dtype test kernels with CUDA's headers, and the kernels of research/mma_ceiling.py without spills."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_gemm.compiler.nvrtc import _compile, _include_dirs, compile_kernel
from pytest_gemm.specs.cufile import parse_cu_file

from support import KERNELS, ROOT, requires_nvrtc

pytestmark = requires_nvrtc


def _archs(spec) -> tuple[str, ...]:
    """What a bundled kernel is built for: the one arch its header names, else sm_80 and sm_90."""
    return (spec.arch,) if spec.arch else ("sm_80", "sm_90")


#: each bundled file with each arch one of its kernels is built for: a test each, so that -n spreads the compiles
BUILDS = sorted({(p.name, a) for p in KERNELS.glob("*.cu") for spec in parse_cu_file(p) for a in _archs(spec)})


@pytest.mark.parametrize(("name", "arch"), BUILDS)
def test_bundled_kernels_compile_for_sm80_and_sm90_without_spills(name, arch):
    """Each bundled kernel builds without spills for sm_80 and sm_90, or for the one arch its header names."""
    for spec in (s for s in parse_cu_file(KERNELS / name) if arch in _archs(s)):
        for variant in spec.variants():
            result = compile_kernel(spec, variant, arch)
            assert result.cubin[:4] == b"\x7fELF"
            r = result.resources
            assert r is not None and r.registers > 0
            assert r.spill_stores == r.spill_loads == 0, (name, variant, arch)


def test_dtype_fixture_kernels_compile_with_cuda_headers():
    for spec in parse_cu_file(ROOT / "tests" / "kernels_dtypes" / "naive_dtypes.cu"):
        assert compile_kernel(spec, spec.variants()[0], "sm_90").resources.spill_stores == 0


def _module_strings(path: Path) -> dict[str, str]:
    """Module-level string constants of a Python file, read without importing it (it needs CuPy)."""
    tree = ast.parse(path.read_text())
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


SCRIPT_SOURCES = ROOT / "research" / "mma_ceiling.py"
SCRIPT_OPTIONS = ("--gpu-architecture=sm_90", "-std=c++17", "--ptxas-options=-v")


@pytest.mark.parametrize("mode", range(5))
def test_mma_ceiling_ablation_kernels_build_without_spills(mode):
    strings = _module_strings(SCRIPT_SOURCES)
    source = strings["FRAGMENT_SOURCE"] + strings["ABLATION_SOURCE"]
    options = (*SCRIPT_OPTIONS, *(f"-I{d}" for d in _include_dirs()), f"-DMODE={mode}")
    resources = _compile(source, "mma_ceiling.py", "loop", options, "sm_90").resources
    assert resources.spill_stores == resources.spill_loads == 0


@pytest.mark.parametrize(("tma", "no_mma"), [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_mma_ceiling_copy_kernels_build_without_spills(tma, no_mma):
    strings = _module_strings(SCRIPT_SOURCES)
    source = strings["FRAGMENT_SOURCE"] + strings["COPY_SOURCE"]
    options = (*SCRIPT_OPTIONS, *(f"-I{d}" for d in _include_dirs()), f"-DUSE_TMA={tma}", f"-DNO_MMA={no_mma}")
    resources = _compile(source, "mma_ceiling.py", "loop", options, "sm_90").resources
    assert resources.spill_stores == resources.spill_loads == 0


@pytest.mark.parametrize(("mi", "ni"), [(4, 8), (8, 4), (2, 8), (4, 4), (2, 16), (1, 32)])
def test_mma_ceiling_pattern_kernels_build_without_spills(mi, ni):
    source = _module_strings(SCRIPT_SOURCES)["PATTERN_SOURCE"]
    for order in range(4):
        options = (*SCRIPT_OPTIONS, f"-DMI={mi}", f"-DNI={ni}", f"-DORDER={order}")
        resources = _compile(source, "mma_ceiling.py", "pattern", options, "sm_90").resources
        assert resources.spill_stores == resources.spill_loads == 0


@pytest.mark.parametrize("chains", [4, 8, 16, 32])
def test_mma_ceiling_peak_kernels_build_without_spills(chains):
    source = _module_strings(SCRIPT_SOURCES)["PEAK_SOURCE"]
    options = (*SCRIPT_OPTIONS, f"-DILP={chains}", '-DDT="bf16"')
    resources = _compile(source, "mma_ceiling.py", "mma_loop", options, "sm_90").resources
    assert resources.spill_stores == resources.spill_loads == 0
