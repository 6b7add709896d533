"""Launch limits: what CUDA would refuse, said with its numbers, before any launch (no GPU)."""

from __future__ import annotations

import pytest

from pytest_gemm.specs.limits import DeviceLimits, KernelResources, block_registers, launch_problems, limits_for_arch

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
