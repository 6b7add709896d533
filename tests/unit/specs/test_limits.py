"""Launch limits: what CUDA would refuse, said with its numbers, before any launch (no GPU)."""

from __future__ import annotations

import pytest

from pytest_gemm.specs.limits import (
    DeviceLimits,
    KernelResources,
    block_registers,
    launch_problems,
    limits_for_arch,
    occupancy,
)

SM90 = DeviceLimits("sm_90", shared_per_block=232448)


@pytest.mark.parametrize(
    ("registers", "threads", "allocated"),
    [(32, 1024, 32768), (255, 256, 65536), (255, 1024, 262144), (33, 32, 1280), (1, 1, 256)],
)
def test_registers_are_allocated_per_warp_in_units_of_256(registers, threads, allocated):
    assert block_registers(registers, threads) == allocated


def test_a_block_that_fits_has_no_problem():
    assert launch_problems(256, 0, KernelResources(255, 0), SM90) == []
    assert launch_problems(384, 197632, KernelResources(159, 64), SM90) == []  # step 11's STAGES4 variant


def test_too_many_registers_for_the_block_is_said_with_the_numbers():
    (problem,) = launch_problems(1024, 0, KernelResources(255, 0), SM90)
    assert problem == (
        "255 registers per thread x 1024 threads per block = 261120 registers (262144 as allocated, per warp in "
        "units of 256), but a block on sm_90 has 65536: at 255 registers, at most 256 threads per block fit"
    )


def test_launch_bounds_lower_than_the_block_are_caught():
    (problem,) = launch_problems(512, 0, KernelResources(64, 0, max_threads=256), SM90)
    assert problem.startswith("512 threads per block, but the compiled kernel launches at most 256")


def test_shared_memory_over_the_architecture_limit_is_caught():
    sm86 = limits_for_arch("sm_86", (8, 6))
    assert sm86 is not None and sm86.shared_per_block == 101376
    (problem,) = launch_problems(256, 98304, KernelResources(64, 4096), sm86)
    assert problem == (
        "4096 bytes of static + 98304 bytes of dynamic shared memory = 102400 bytes per block, "
        "but sm_86 allows at most 101376"
    )
    assert launch_problems(256, 98304, KernelResources(64, 4096), SM90) == []


def test_an_architecture_without_a_known_limit_is_not_guessed():
    assert limits_for_arch("sm_99", (9, 9)) is None


@pytest.mark.parametrize(
    "threads, registers, shared, capability, expected",
    [
        # step 12 on an H100: 384 threads x 168 registers fill the register file, 214 KB of shared memory
        (384, 168, 214064, (9, 0), (1, 18.75, "registers and shared memory")),
        (128, 205, 99456, (9, 0), (2, 12.5, "registers and shared memory")),
        (256, 64, 0, (9, 0), (4, 50.0, "registers")),
        (1024, 32, 0, (9, 0), (2, 100.0, "threads and registers")),
        (32, 16, 0, (9, 0), (32, 50.0, "blocks")),
        (1024, 32, 0, (8, 6), (1, 66.66666666666667, "threads")),
        (128, 32, 60000, (8, 9), (1, 4 / 48 * 100, "shared memory")),
        (1024, 32, 102400, (9, 0), (2, 100.0, "threads, registers and shared memory")),
        # warps are placed in quarters of the register file: 5 one-warp blocks of 96 registers per quarter
        (32, 96, 0, (9, 0), (20, 31.25, "registers")),
        (288, 200, 0, (9, 0), (0, 0.0, "registers")),  # 2 warps per quarter: 8 < 9
        # shared memory is allocated in 128-byte units: 45632 + 1024 reserved is 46720 bytes, 4 per SM, not 5
        (128, 32, 45632, (9, 0), (4, 25.0, "shared memory")),
    ],
)
def test_occupancy_is_the_tightest_of_threads_blocks_registers_and_shared_memory(
    threads, registers, shared, capability, expected
):
    occ = occupancy(threads, registers, shared, capability)
    assert (occ.blocks, occ.warps_percent, occ.limit) == (expected[0], pytest.approx(expected[1]), expected[2])


def test_occupancy_of_an_unknown_architecture_is_not_guessed():
    assert occupancy(256, 64, 0, (6, 1)) is None


def test_a_block_whose_warps_do_not_fit_the_quarters_of_the_register_file_is_caught():
    # 9 warps of 224 registers: 64512 registers, under 65536, but a quarter (16384) holds only 2 such warps
    (problem,) = launch_problems(288, 0, KernelResources(224, 0), SM90)
    assert problem == (
        "224 registers per thread x 288 threads per block = 64512 registers, and a warp's must fit in one "
        "quarter (16384) of the 65536 on sm_90: at 224 registers, at most 256 threads per block fit"
    )
    assert launch_problems(288, 0, KernelResources(168, 0), SM90) == []  # what ptxas gives 9 warps
    assert launch_problems(2048, 0, KernelResources(16, 0), SM90) == ["2048 threads per block; CUDA allows 1024"]
