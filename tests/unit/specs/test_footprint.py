"""What a case needs (specs/footprint.py): shapes past the harness's int arguments, and the memory of a case,
counted as the worker's own code allocates it (on NumPy, no device) and checked against the device's memory."""

from __future__ import annotations

import dataclasses
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import AB_CASES, AlphaBeta, Case, expand
from pytest_gemm.specs.cufile import parse_cu_source
from pytest_gemm.specs.footprint import case_memory, input_copies, int_args_problem, memory_problem
from pytest_gemm.specs.limits import INT_ARG_MAX
from pytest_gemm.specs.spec import KernelSpec, Variant

from support import NAIVE_BODY, NAIVE_HEADER
from support.host_device import FunctionKernel, HostDevice, HostKernel, HostPeer, host_case


def _cu(args: str, layout: str = "row") -> KernelSpec:
    header = NAIVE_HEADER.replace('["M", "N", "K", "alpha", "A", "B", "beta", "C"]', args)
    if layout == "col":
        header = header.replace("*/", 'layout = "col"\n*/')
    return parse_cu_source("k.cu", header + NAIVE_BODY)[0]


def test_leading_dimensions_python_kernels_and_the_kernels_own_index_math():
    """lda/ldb/ldc (the dimension plus the guarded row padding) are bound too; a Python kernel gets Python
    ints, but cuBLAS, which computes every case's fp64 truth, takes M, N and K as ints; an index a kernel computes
    itself (row * K + k) is the kernel's business, which verification is there to catch: not skipped."""
    with_ld = _cu('["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]')
    assert int_args_problem(with_ld, Shape(64, 64, INT_ARG_MAX - 8)) == (
        "lda = 2147483655 (K + 16 elements of row padding) is past the kernel's int arguments (at most 2147483647)"
    )
    col = _cu('["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]', layout="col")
    assert int_args_problem(col, Shape(INT_ARG_MAX - 8, 64, 64)).startswith("lda = 2147483655 (M + 16 elements")
    plain = _cu('["M", "N", "K", "alpha", "A", "B", "beta", "C"]')
    assert int_args_problem(plain, Shape(64, 64, INT_ARG_MAX - 8)) is None  # no lda: nothing padded is passed
    assert int_args_problem(plain, Shape(INT_ARG_MAX, 1, 1)) is None  # the largest int itself is fine
    assert int_args_problem(plain, Shape(50_000, 50_000, 1)) is None  # M * N overflows only in a kernel's own math
    py = KernelSpec(path="k.py", name="k", dtypes=("fp32",), kind="py", attr="k")
    assert int_args_problem(py, Shape(3_000_000_000, 1, 1)) == (
        "M = 3000000000 is past cuBLAS's int arguments, which the fp64 truth and the cuBLAS comparison use "
        "(at most 2147483647)"
    )
    skipped = [c for c in expand(plain, [Shape(3_000_000_000, 1, 1), Shape(64, 64, 64)]) if c.skip_reason]
    assert len(skipped) == len(AB_CASES) and all(c.shape.M == 3_000_000_000 for c in skipped)


def test_the_worker_packs_the_int_arguments_as_the_bound_says():
    """Each declared size type's bound and the worker's packing are one definition
    (specs.storage.SIZE_TYPES); the default is a C int, like cuBLAS's."""
    import numpy as np

    from pytest_gemm.specs.size_types import DEFAULT_SIZE_TYPE, SIZE_TYPES

    assert SIZE_TYPES[DEFAULT_SIZE_TYPE].max == INT_ARG_MAX
    for size_type in SIZE_TYPES.values():
        pack = np.dtype(size_type.numpy).type
        assert int(pack(size_type.max)) == size_type.max
        with pytest.raises(OverflowError):
            pack(size_type.max + 1)


# -- buffers past the GPU's memory --------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("guards", [True, False])
@pytest.mark.parametrize("dtype", ["fp16", "fp32", "fp64"])
def test_the_need_counts_the_guarded_buffers_the_worker_allocates(layout, guards, dtype):
    """A, B and C with their guard regions and row padding, as the worker's own code allocates them
    (its prepared case's operands, on NumPy), are the need's first part, byte for byte."""
    spec = _cu('["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]', layout)
    spec = dataclasses.replace(spec, dtypes=(dtype,))
    case = Case(spec, Variant(), dtype, Shape(300, 200, 100), AlphaBeta(0.7, 1.3))
    prepared = host_case(HostKernel(case, lambda *args: None), 7, guards=guards)
    data, ops = prepared.data, prepared.operands()
    allocated = [ops.a, ops.b, ops.c]
    need = case_memory(spec, dtype, case.shape, case.c_prior, guards=guards)
    assert need.parts[0] == ("A, B and C in their guarded buffers", sum(g.flat.nbytes for g in allocated))
    assert need.parts[1][1] == data.a.nbytes + data.b.nbytes + data.c0.nbytes  # uploaded again for the truth


class _Device(np.ndarray):
    """A NumPy array standing for a CuPy one: a subclass, so NumPy never reuses a temporary in place (CuPy does
    not), and tracemalloc counts each array as CuPy's pool would hold it."""


class _HostCupy:
    """NumPy in CuPy's place; asarray copies, as an upload to the device does."""

    cuda = SimpleNamespace(
        driver=SimpleNamespace(CUDADriverError=OSError),
        runtime=SimpleNamespace(CUDARuntimeError=OSError, deviceSynchronize=lambda: None),
    )

    def __getattr__(self, name: str):
        return getattr(np, name)

    @staticmethod
    def asarray(x):
        return np.array(x).view(_Device)

    @staticmethod
    def full(*args, **kwargs):
        return np.full(*args, **kwargs).view(_Device)


def _python_kernel(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "fp64"])
@pytest.mark.parametrize("ab", [AB_CASES[0], AB_CASES[1]], ids=["beta0", "prior"])
@pytest.mark.parametrize("shape", [Shape(384, 320, 8), Shape(64, 64, 4096), Shape(512, 512, 512)], ids=str)
def test_the_need_is_a_lower_bound_of_what_verification_allocates(dtype, ab, shape):
    """The worker's own verification (worker.verify, on NumPy arrays standing for CuPy's) allocates at its peak at
    least the need and at most a third more: the need leaves out only scratch, never what must fit."""
    from pytest_gemm.worker.verify import verify

    spec = KernelSpec(path="k.py", name="k", dtypes=(dtype,), kind="py", attr="k")
    case = Case(spec, Variant(), dtype, shape, ab)
    kernel = FunctionKernel(HostDevice(_HostCupy()), case, _python_kernel)
    prepared = host_case(kernel, 1, peer=HostPeer(case))  # the host's inputs, drawn before counting
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        verify(prepared)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    need = case_memory(spec, dtype, shape, case.c_prior, replayed=case.ab.plain).total
    assert need <= peak <= 1.35 * need, (need, peak)


def test_timing_counts_its_input_sets_for_the_kernel_and_cublas():
    """A timed case also needs its rotated input sets (twice: the kernel's and cuBLAS's), the inputs'
    start and the L2 flush buffer; the need is that of the phase that needs more."""
    spec = _cu('["M", "N", "K", "alpha", "A", "B", "beta", "C"]')
    small, big = Shape(256, 256, 256), Shape(100_000, 100_000, 100_000)
    one_set = 3 * 256 * 256 * 4
    copies = input_copies(one_set, 50 << 20, True)
    timed = case_memory(spec, "fp32", small, False, timed=True, l2_bytes=50 << 20, flush_bytes=100 << 20)
    assert timed.phase == "timing" and copies == 32
    assert dict(timed.parts)["32 sets of A, B and C for the kernel and as many for cuBLAS"] == 2 * 32 * one_set
    assert dict(timed.parts)["the L2 flush buffer"] == 100 << 20
    assert not any("for the fp64 truth" in part for part, _ in timed.parts)  # it judges by verification's truth
    with_prior = dict(case_memory(spec, "fp32", small, True, timed=True, l2_bytes=50 << 20).parts)
    assert with_prior["the prior C again, the start of the outputs judged"] == 256 * 256 * 4
    assert case_memory(spec, "fp32", small, False, timed=True, cold_cache=False, l2_bytes=50 << 20).total < (
        timed.total
    )  # a hot cache rotates no copies and flushes nothing
    verifying = case_memory(spec, "fp32", big, False)
    assert verifying.phase == "verifying" and verifying.total > 700e9  # 120 GB of operands, and their checks


def test_a_case_too_big_for_the_gpu_fails_before_allocating_with_the_numbers():
    """The worker compares the need with the device's free memory before drawing inputs or allocating;
    the failure says how much, in which phase, what the device has, and each part."""
    from pytest_gemm.judge.case import judge_outcome
    from pytest_gemm.records.outcome import Outcome
    from pytest_gemm.records.verdicts import FailureKind
    from pytest_gemm.report.failure import failure_text
    from pytest_gemm.worker.backend import GpuBackend
    from pytest_gemm.worker.errors import TooBigForDevice

    pool = SimpleNamespace(free_bytes=lambda: 1_000_000_000)
    cp = SimpleNamespace(
        cuda=SimpleNamespace(runtime=SimpleNamespace(memGetInfo=lambda: (78_100_000_000, 85_520_809_984))),
        get_default_memory_pool=lambda: pool,
    )
    backend = object.__new__(GpuBackend)
    backend.cp, backend.timer = cp, SimpleNamespace(flush_to_allocate=0)
    backend.runner = SimpleNamespace(name="NVIDIA H100 80GB HBM3", guards=True, l2_bytes=50 << 20)
    spec = _cu('["M", "N", "K", "alpha", "A", "B", "beta", "C"]')
    backend._check_memory(Case(spec, Variant(), "fp32", Shape(4096, 4096, 4096), AB_CASES[0]), None)  # fits
    case = Case(spec, Variant(), "fp32", Shape(100_000, 100_000, 100_000), AB_CASES[0])
    with pytest.raises(TooBigForDevice) as raised:
        backend._check_memory(case, None)
    failure = backend._failure(raised.value, "verify", case)
    assert failure.kind == FailureKind.TOO_BIG and not failure.replace_worker
    result = judge_outcome(case, "k.cu::" + case.name, Outcome(failure=failure), {}, source_sha256="0" * 64)
    text = failure_text(case.name, result, "pytest ...").splitlines()
    assert text[0] == (
        "sgemm_naive[fp32-100000x100000x100000] (M=100000, N=100000, K=100000, alpha=1, beta=0) does not fit in GPU "
        "memory: it needs at least 780.3 GB of GPU memory while verifying, but this NVIDIA H100 80GB HBM3 has "
        "79.1 GB free of 85.5 GB; nothing was allocated"
    )
    assert text[1:4] == [
        "  A, B and C in their guarded buffers: 120.3 GB",
        "  A and B again, for the fp64 truth: 80.0 GB",
        "  fp64 work arrays (the truth, its error bound, C and each element's error): 580.0 GB",
    ]
    assert memory_problem(case_memory(spec, "fp32", Shape(64, 64, 64), False), 10**9, 10**9, "x") is None
