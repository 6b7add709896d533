"""What CUDA refuses to launch, checked before the launch: from the header and ptxas's report on the CPU,
and from the compiled function's attributes in the worker. Each problem is said with its numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "ARCH_SHARED_OPTIN",
    "MAX_BLOCK",
    "MAX_GRID",
    "MAX_SHARED_PER_BLOCK",
    "MAX_THREADS_PER_BLOCK",
    "DeviceLimits",
    "KernelResources",
    "block_registers",
    "launch_problems",
    "limits_for_arch",
]

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
REGISTERS_PER_BLOCK = 65536  # every architecture from sm_50 to sm_120
REGISTER_UNIT = 256  # registers are allocated per warp, in units of 256
#: the most shared memory (static + dynamic) one block may opt in to, in bytes, by compute capability
ARCH_SHARED_OPTIN = {
    (7, 0): 98304,
    (7, 5): 65536,
    (8, 0): 166912,
    (8, 6): 101376,
    (8, 7): 166912,
    (8, 9): 101376,
    (9, 0): 232448,
    (10, 0): 232448,
    (10, 3): 232448,
    (12, 0): 101376,
}
MAX_SHARED_PER_BLOCK = max(ARCH_SHARED_OPTIN.values())


@dataclass(frozen=True)
class DeviceLimits:
    """The limits of one GPU or architecture that a launch must respect."""

    name: str  # how messages name it: "sm_90" or "this NVIDIA H100 80GB HBM3"
    registers_per_block: int = REGISTERS_PER_BLOCK
    shared_per_block: int = MAX_SHARED_PER_BLOCK  # the opt-in maximum, static and dynamic together


@dataclass(frozen=True)
class KernelResources:
    """What one compiled kernel needs per thread and per block."""

    registers: int  # per thread
    static_smem: int  # bytes per block
    max_threads: int | None = None  # the function's own limit (launch bounds); None when unknown


def limits_for_arch(arch: str, capability: tuple[int, int]) -> DeviceLimits | None:
    """The limits of an architecture, or None when its shared-memory limit is not in the table."""
    shared = ARCH_SHARED_OPTIN.get(capability)
    return None if shared is None else DeviceLimits(arch, shared_per_block=shared)


def block_registers(registers: int, threads: int) -> int:
    """Registers a block of ``threads`` takes: per warp, rounded up to the allocation unit."""
    per_warp = math.ceil(registers * 32 / REGISTER_UNIT) * REGISTER_UNIT
    return math.ceil(threads / 32) * per_warp


def _most_threads(registers: int, limit: int) -> int:
    per_warp = math.ceil(max(registers, 1) * 32 / REGISTER_UNIT) * REGISTER_UNIT
    return min(MAX_THREADS_PER_BLOCK, limit // per_warp * 32)


def launch_problems(threads: int, dynamic_smem: int, kernel: KernelResources, limits: DeviceLimits) -> list[str]:
    """Why a block of ``threads`` threads with ``dynamic_smem`` bytes cannot launch (empty: it can)."""
    problems = []
    if threads > MAX_THREADS_PER_BLOCK:
        problems.append(f"{threads} threads per block; CUDA allows {MAX_THREADS_PER_BLOCK}")
    needed = block_registers(kernel.registers, threads)
    if needed > limits.registers_per_block:
        most = _most_threads(kernel.registers, limits.registers_per_block)
        product = kernel.registers * threads
        allocated = "" if needed == product else f" ({needed} as allocated, per warp in units of {REGISTER_UNIT})"
        problems.append(
            f"{kernel.registers} registers per thread x {threads} threads per block = {product} registers"
            f"{allocated}, but a block on {limits.name} has {limits.registers_per_block}: at "
            f"{kernel.registers} registers, at most {most} threads per block fit"
        )
    elif kernel.max_threads is not None and threads > kernel.max_threads:
        problems.append(
            f"{threads} threads per block, but the compiled kernel launches at most {kernel.max_threads} "
            "(its __launch_bounds__ or register use)"
        )
    shared = kernel.static_smem + dynamic_smem
    if shared > limits.shared_per_block:
        problems.append(
            f"{kernel.static_smem} bytes of static + {dynamic_smem} bytes of dynamic shared memory = {shared} "
            f"bytes per block, but {limits.name} allows at most {limits.shared_per_block}"
        )
    return problems
