"""NVRTC compiles (compiler/nvrtc.py), no GPU: template entries, compile errors, a missing entry and ptxas's
resources."""

from __future__ import annotations

import pytest

from pytest_gemm.compiler.nvrtc import CompileError, compile_kernel, parse_ptxas_resources
from pytest_gemm.specs.cufile import parse_cu_file, parse_cu_source

from support import KERNELS, requires_nvrtc

pytestmark = requires_nvrtc


def test_template_entries_resolve_to_their_lowered_name():
    (spec,) = parse_cu_file(KERNELS / "02_smem_tiling.cu")
    result = compile_kernel(spec, spec.variants()[0], "sm_90")
    assert result.lowered_name.startswith("_Z") and "sgemm_smem" in result.lowered_name
    assert result.resources.static_smem == 2 * 32 * 32 * 4


def test_compile_errors_carry_the_compiler_message_and_line(naive_source):
    (spec,) = parse_cu_source("kernels/typo.cu", naive_source.replace("float acc = 0.0f;", "float acc = 0.0f"))
    with pytest.raises(CompileError) as info:
        compile_kernel(spec, spec.variants()[0], "sm_90")
    assert "kernels/typo.cu(" in info.value.log and "error" in info.value.log


def test_a_missing_entry_is_reported(naive_source):
    (spec,) = parse_cu_source("k.cu", naive_source.replace('entry = "sgemm_naive"', 'entry = "sgemm_fast"'))
    with pytest.raises(CompileError, match="sgemm_fast"):
        compile_kernel(spec, spec.variants()[0], "sm_90")


def test_ptxas_resources_are_parsed():
    log = (
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem\n"
    )
    r = parse_ptxas_resources(log, "k")
    assert (r.registers, r.spill_stores, r.spill_loads, r.stack_bytes, r.static_smem) == (255, 8, 12, 16, 8192)
    assert parse_ptxas_resources(log, "other") is None
