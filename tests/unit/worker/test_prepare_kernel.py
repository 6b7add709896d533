"""The prepare kernel ahead of every timed launch restores C, sweeps the SMs' instruction caches and flushes L2.

Compiled here with NVRTC (no GPU): the sweep must survive optimisation as more code than an SM's instruction
caches hold, and must run after C is restored (so that C's lines are written first and the flush evicts them).
tests/gpu/test_gpu_prepare_kernel.py checks on a GPU that every SM's first block sweeps, once per launch.
"""

from __future__ import annotations

import pytest

from pytest_gemm.compiler import nvrtc
from pytest_gemm.worker.rounds import PREPARE_KERNEL, PREPARE_SOURCE, PREPARE_THREADS, SWEEP_INSTRUCTIONS, SWEEP_WARPS

from support import requires_nvrtc

FFMA_BYTES = 16  # every SASS instruction on sm_70 and later


@requires_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_sweep_compiles_to_more_code_than_an_sm_caches_without_spills(arch):
    result = nvrtc._compile(PREPARE_SOURCE, "prepare.cu", PREPARE_KERNEL, (f"-arch={arch}", "-Xptxas=-v"), arch)
    assert result.resources is not None and result.resources.spill_stores == 0
    assert len(result.cubin) >= SWEEP_INSTRUCTIONS * FFMA_BYTES  # the FFMAs were not folded away
    assert SWEEP_INSTRUCTIONS * FFMA_BYTES >= 256 << 10  # measured on an H100: 128 KB left cuBLAS 0.8% warm


def test_every_warp_of_the_block_has_a_part_of_the_sweep():
    assert PREPARE_THREADS == 32 * SWEEP_WARPS
    assert [f"if (warp == {w})" in PREPARE_SOURCE for w in range(SWEEP_WARPS + 1)] == [True] * SWEEP_WARPS + [False]


def test_the_sweep_runs_after_c_is_restored_and_before_the_flush():
    restore = PREPARE_SOURCE.index("c[i] = c_init[i];")
    sweep = PREPARE_SOURCE.index("if (sweeper)")
    flush = PREPARE_SOURCE.index("flush[i] = make_uint4(0, 0, 0, 0);")
    assert restore < sweep < flush
