"""What CUDA refuses to launch, checked before the launch: from the header and ptxas's report on the CPU,
and from the compiled function's attributes in the worker. Each problem is said with its numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "ARCH_SHARED_OPTIN",
    "INT_ARG_BITS",
    "INT_ARG_MAX",
    "MAX_BLOCK",
    "MAX_GRID",
    "MAX_SHARED_PER_BLOCK",
    "MAX_THREADS_PER_BLOCK",
    "DeviceLimits",
    "KernelResources",
    "Occupancy",
    "block_registers",
    "launch_problems",
    "limits_for_arch",
    "near_limits",
    "occupancy",
]

#: the integer arguments the harness passes are C ints: a .cu kernel's M, N, K, lda, ldb and ldc, which the worker
#: packs as signed integers of this many bits, and cuBLAS's sizes and leading dimensions (the fp64 truth, the cuBLAS
#: peer and the timed reference), which CuPy casts to int; a shape past them is skipped at collection (specs.footprint)
INT_ARG_BITS = 32
INT_ARG_MAX = 2 ** (INT_ARG_BITS - 1) - 1
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
REGISTERS_PER_BLOCK = 65536  # every architecture from sm_50 to sm_120
REGISTER_UNIT = 256  # registers are allocated per warp, in units of 256
REGISTER_QUARTERS = 4  # an SM's registers are four banks, one per scheduler; each warp's lie in one of them
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
#: per SM, by compute capability (CUDA C++ Programming Guide, "Compute Capabilities", and the occupancy
#: calculator's cuda_occupancy.h): resident threads, resident blocks, shared memory in bytes, the shared
#: memory the system reserves for each block, and the unit a block's shared memory is allocated in
SM_LIMITS = {
    (7, 0): (2048, 32, 98304, 0, 256),
    (7, 5): (1024, 16, 65536, 0, 256),
    (8, 0): (2048, 32, 167936, 1024, 128),
    (8, 6): (1536, 16, 102400, 1024, 128),
    (8, 7): (1536, 16, 167936, 1024, 128),
    (8, 9): (1536, 24, 102400, 1024, 128),
    (9, 0): (2048, 32, 233472, 1024, 128),
    (10, 0): (2048, 32, 233472, 1024, 128),
    (10, 3): (2048, 32, 233472, 1024, 128),
    (12, 0): (1536, 24, 102400, 1024, 128),
}


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


def _warp_registers(registers: int) -> int:
    """Registers one warp takes: 32 threads' worth, rounded up to the allocation unit."""
    return math.ceil(max(registers, 1) * 32 / REGISTER_UNIT) * REGISTER_UNIT


def block_registers(registers: int, threads: int) -> int:
    """Registers a block of ``threads`` takes: per warp, rounded up to the allocation unit."""
    return math.ceil(threads / 32) * _warp_registers(registers)


def _most_warps(registers: int, limit: int) -> int:
    """Warps of ``registers`` registers each that fit in ``limit`` registers split in four quarters."""
    return REGISTER_QUARTERS * (limit // REGISTER_QUARTERS // _warp_registers(registers))


def launch_problems(threads: int, dynamic_smem: int, kernel: KernelResources, limits: DeviceLimits) -> list[str]:
    """Why a block of ``threads`` threads with ``dynamic_smem`` bytes cannot launch (empty: it can)."""
    problems = []
    if threads > MAX_THREADS_PER_BLOCK:
        problems.append(f"{threads} threads per block; CUDA allows {MAX_THREADS_PER_BLOCK}")
    needed = block_registers(kernel.registers, threads)
    fit = _most_warps(kernel.registers, limits.registers_per_block) * 32
    if threads > fit:
        most = min(MAX_THREADS_PER_BLOCK, fit)
        product = kernel.registers * threads
        allocated = "" if needed == product else f" ({needed} as allocated, per warp in units of {REGISTER_UNIT})"
        where = f"but a block on {limits.name} has {limits.registers_per_block}"
        if needed <= limits.registers_per_block:
            quarter = limits.registers_per_block // REGISTER_QUARTERS
            where = (
                f"and a warp's must fit in one quarter ({quarter}) of the {limits.registers_per_block} on {limits.name}"
            )
        problems.append(
            f"{kernel.registers} registers per thread x {threads} threads per block = {product} registers"
            f"{allocated}, {where}: at {kernel.registers} registers, at most {most} threads per block fit"
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


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of a kernel one SM holds at once, and what stops it holding more."""

    blocks: int
    warps_percent: float  # resident warps, as a share of the most the SM holds
    limit: str  # what bounds it: "threads", "blocks", "registers" or "shared memory"; several: "threads and registers"


def occupancy(threads: int, registers: int, shared_bytes: int, capability: tuple[int, int]) -> Occupancy | None:
    """Blocks per SM for blocks of ``threads`` threads using ``registers`` each and ``shared_bytes`` per block
    (static and dynamic); None for a capability not in :data:`SM_LIMITS`."""
    if capability not in SM_LIMITS:
        return None
    sm_threads, sm_blocks, sm_shared, reserved, unit = SM_LIMITS[capability]
    warps = math.ceil(threads / 32)
    shared = math.ceil((shared_bytes + reserved) / unit) * unit
    bounds = {
        "threads": sm_threads // (warps * 32),
        "blocks": sm_blocks,
        "registers": _most_warps(registers, REGISTERS_PER_BLOCK) // warps,
        "shared memory": sm_shared // shared if shared else sm_blocks + 1,
    }
    blocks = min(bounds.values())
    names = [name for name, bound in bounds.items() if bound == blocks]
    limit = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return Occupancy(blocks, 100.0 * blocks * warps * 32 / sm_threads, limit)


NEAR = 0.9  # a kernel that uses this share of a launch limit or more sits near it


def near_limits(threads: int, dynamic_smem: int, kernel: KernelResources, limits: DeviceLimits) -> list[str]:
    """The launch limits a block uses :data:`NEAR` or more of, without breaking them (empty: none). Registers per
    thread are not among them: at 255 the compiler spills, which the report says on its own."""
    near = []
    if NEAR * limits.registers_per_block <= block_registers(kernel.registers, threads) <= limits.registers_per_block:
        near.append("registers per block")
    if NEAR * limits.shared_per_block <= kernel.static_smem + dynamic_smem <= limits.shared_per_block:
        near.append("shared memory per block")
    return near
