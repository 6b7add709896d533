"""On the GPU: a shape past the device's memory fails at once with the numbers, and the memory a case is counted to
need is a lower bound of what verification allocates on CuPy. Needs a device."""

from __future__ import annotations

import time

import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import AB_CASES, Case
from pytest_gemm.specs.footprint import case_memory
from pytest_gemm.specs.spec import KernelSpec, Variant

from support import requires_gpu


def _python_kernel(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


@requires_gpu
@pytest.mark.gpu
def test_on_the_gpu_a_shape_past_its_memory_fails_at_once_with_the_numbers(pytester, naive_source):
    """`--gemm-shapes 100000x100000x100000` (120 GB of operands) fails each case quickly, before anything
    is drawn or allocated, with the need and the device's free and total memory in GB."""
    (pytester.path / "naive.cu").write_text(naive_source)
    start = time.monotonic()
    result = pytester.runpytest(
        "--gemm-kernels", "naive.cu", "-m", "gpu", "--gemm-shapes", "100000x100000x100000", "--benchmark-skip"
    )
    assert time.monotonic() - start < 120  # the worker's start included; drawing 40 GB inputs would take minutes
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*sgemm_naive?fp32-100000x100000x100000? (M=100000, N=100000, K=100000, alpha=1, beta=0) does not fit in "
            "GPU memory: it needs at least 780.3 GB of GPU memory while verifying, but this NVIDIA * has * GB free "
            "of * GB; nothing was allocated",
            "*A, B and C in their guarded buffers: 120.3 GB",
        ]
    )


@requires_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "fp32", "fp64"])
@pytest.mark.parametrize("ab", [AB_CASES[0], AB_CASES[1]], ids=["beta0", "prior"])
@pytest.mark.parametrize("shape", [Shape(384, 320, 8), Shape(64, 64, 4096), Shape(2048, 1536, 1024)], ids=str)
def test_on_the_gpu_the_need_is_a_lower_bound_of_what_verification_allocates(dtype, ab, shape):
    """On the device, the worker's verification on CuPy, counted by a pool of its own, holds at its peak at
    least the need (so a case refused as too big could never have fitted), and at most twice it."""
    import cupy

    from pytest_gemm.worker.peers import peer_strategy
    from pytest_gemm.worker.runner import open_device
    from pytest_gemm.worker.verify import verify

    from support.host_device import FunctionKernel, host_case

    spec = KernelSpec(path="k.py", name="k", dtypes=(dtype,), kind="py", attr="k")
    case = Case(spec, Variant(), dtype, shape, ab)
    pool, peak = cupy.cuda.MemoryPool(), [0]

    def malloc(size: int):
        memory = pool.malloc(size)
        peak[0] = max(peak[0], pool.used_bytes())
        return memory

    runner = open_device(0)
    kernel = FunctionKernel(runner, case, _python_kernel)
    prepared = host_case(kernel, 1, peer=peer_strategy(case, kernel.inputs, runner.capability))  # inputs drawn
    cupy.cuda.set_allocator(malloc)
    try:
        base = pool.used_bytes()
        verify(prepared)
        runner.stream.synchronize()
    finally:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
    need = case_memory(spec, dtype, shape, case.c_prior, replayed=case.ab.plain).total
    assert need <= peak[0] - base <= 2 * need, (need, peak[0] - base)
