"""Bounds on what a user can ask for (issue 33, "Shapes out of range" and "Slow compiles"): shapes past the
harness's int arguments (row 3), shapes whose buffers exceed the GPU's memory (row 2), compiles that take minutes
(row 62)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_gemm.records.request import Request
from pytest_gemm.records.shapes import Shape
from pytest_gemm.specs.cases import AB_CASES, AlphaBeta, Case, expand
from pytest_gemm.specs.footprint import case_memory, input_copies, int_args_problem, memory_problem
from pytest_gemm.specs.limits import INT_ARG_MAX
from pytest_gemm.specs.spec import KernelSpec, Variant, parse_cu_source

from conftest import NAIVE_BODY, NAIVE_HEADER, ROOT, requires_gpu, requires_nvrtc

# -- row 3: past the kernels' int arguments ----------------------------------------------------------------------


def test_row3_a_shape_past_the_kernels_int_arguments_is_skipped_at_collection_with_the_reason(pytester, naive_source):
    """Row 3: `--gemm-shapes 3000000000x1x1` is skipped at collection (never sent to a worker, whose int32 packing
    it would overflow), saying which argument and the bound; the other shape's cases are untouched."""
    (pytester.path / "naive.cu").write_text(naive_source)
    result = pytester.runpytest(
        "--gemm-kernels", "naive.cu", "-m", "gpu", "--gemm-shapes", "3000000000x1x1,64", "-rs", "--benchmark-skip"
    )
    result.stdout.fnmatch_lines(
        ["SKIPPED ?3? naive.cu*: M = 3000000000 is past the kernel's int arguments (at most 2147483647)"]
    )
    assert result.stdout.str().count("past the kernel's int arguments") == 1  # the 64 cases are not among them


def _cu(args: str, layout: str = "row") -> KernelSpec:
    header = NAIVE_HEADER.replace('["M", "N", "K", "alpha", "A", "B", "beta", "C"]', args)
    if layout == "col":
        header = header.replace("*/", 'layout = "col"\n*/')
    return parse_cu_source("k.cu", header + NAIVE_BODY)[0]


def test_row3_leading_dimensions_python_kernels_and_the_kernels_own_index_math():
    """Row 3: lda/ldb/ldc (the dimension plus the guarded row padding) are bound too; a Python kernel gets Python
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


def test_row3_the_worker_packs_the_int_arguments_as_the_bound_says():
    """Row 3 (and #34 item 2): each declared size type's bound and the worker's packing are one definition
    (specs.storage.SIZE_TYPES); the default is a C int, like cuBLAS's."""
    import numpy as np

    from pytest_gemm.specs.storage import DEFAULT_SIZE_TYPE, SIZE_TYPES

    assert SIZE_TYPES[DEFAULT_SIZE_TYPE].max == INT_ARG_MAX
    for size_type in SIZE_TYPES.values():
        pack = np.dtype(size_type.numpy).type
        assert int(pack(size_type.max)) == size_type.max
        with pytest.raises(OverflowError):
            pack(size_type.max + 1)


# -- row 2: buffers past the GPU's memory -------------------------------------------------------------------------


def _runner(cp, guards: bool = True):
    from pytest_gemm.worker.device import GpuRunner

    runner = object.__new__(GpuRunner)  # its buffers and checks, on NumPy arrays, without a device
    runner.cp, runner.guards, runner.sm_count = cp, guards, 132
    runner.stream, runner.stream_check = _Stream(), None  # no CUPTI to watch a Python kernel's streams
    runner.peer = functools.partial(_host_peer, cp)  # cuBLAS's part: the same copies, NumPy's matmul
    return runner


def _host_peer(cp, case, data, truth, bits):
    """What GpuRunner.peer allocates (worker.cublas.peer_output: the operands as stored, from the truth's bits, and
    C's result in fp64), with NumPy's matmul for cuBLAS's GEMM."""
    from pytest_gemm.specs.cases import precision
    from pytest_gemm.worker.cublas import stored_operands

    dt, out = precision(case)
    stored = stored_operands(cp, data, bits, case.shape, out)
    a, b = (data.logical(stored[name], name).view(x.dtype) for name, x in (("A", data.a), ("B", data.b)))
    c = data.logical(stored["C"], "C").view(data.a.dtype if data.c0 is None else data.c0.dtype)
    product = np.matmul(a, b, dtype=np.float32)
    product *= case.ab.alpha
    if data.c0 is not None:
        product += case.ab.beta * data.c0
    c[...] = product
    del product
    return truth.judge(cp, c.astype(np.float64), case.shape.K, dt, out)


class _Stream(contextlib.nullcontext):
    def synchronize(self) -> None:
        pass


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("guards", [True, False])
@pytest.mark.parametrize("dtype", ["fp16", "fp32", "fp64"])
def test_row2_the_need_counts_the_guarded_buffers_the_worker_allocates(layout, guards, dtype):
    """Row 2: A, B and C with their guard regions and row padding, as the worker's own code allocates them
    (GpuRunner.guarded_input/guarded_output on NumPy), are the need's first part, byte for byte."""
    from pytest_gemm.worker.buffers import case_inputs

    spec = _cu('["M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc"]', layout)
    spec = dataclasses.replace(spec, dtypes=(dtype,))
    case = Case(spec, Variant(), dtype, Shape(300, 200, 100), AlphaBeta(0.7, 1.3))
    runner, data = _runner(np, guards), case_inputs(case, 7)
    allocated = [runner.guarded_input(case, "A", data), runner.guarded_input(case, "B", data)]
    allocated.append(runner.guarded_output(case, data, data.stored(data.c0, "C")))
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
def test_row2_the_need_is_a_lower_bound_of_what_verification_allocates(dtype, ab, shape):
    """Row 2: the worker's own verification (GpuRunner.verify, on NumPy arrays standing for CuPy's) allocates at
    its peak at least the need and at most a third more: the need leaves out only scratch, never what must fit."""
    from pytest_gemm.worker.buffers import case_inputs

    spec = KernelSpec(path="k.py", name="k", dtypes=(dtype,), kind="py", attr="k")
    case = Case(spec, Variant(), dtype, shape, ab)
    runner = _runner(_HostCupy())
    runner._python = (case, _python_kernel, "k.py")
    case_inputs(case, 1)  # the host's inputs, drawn before counting
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        runner.verify(case, 1)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    need = case_memory(spec, dtype, shape, case.c_prior).total
    assert need <= peak <= 1.35 * need, (need, peak)


def test_row2_timing_counts_its_input_sets_for_the_kernel_and_cublas():
    """Row 2: a timed case also needs its rotated input sets (twice: the kernel's and cuBLAS's), the inputs'
    start and the L2 flush buffer; the need is that of the phase that needs more."""
    spec = _cu('["M", "N", "K", "alpha", "A", "B", "beta", "C"]')
    small, big = Shape(256, 256, 256), Shape(100_000, 100_000, 100_000)
    one_set = 3 * 256 * 256 * 4
    copies = input_copies(one_set, 50 << 20, True)
    timed = case_memory(spec, "fp32", small, False, timed=True, l2_bytes=50 << 20, flush_bytes=100 << 20)
    assert timed.phase == "timing" and copies == 32
    assert dict(timed.parts)["32 sets of A, B and C for the kernel and as many for cuBLAS"] == 2 * 32 * one_set
    assert dict(timed.parts)["the L2 flush buffer"] == 100 << 20
    assert case_memory(spec, "fp32", small, False, timed=True, cold_cache=False, l2_bytes=50 << 20).total < (
        timed.total
    )  # a hot cache rotates no copies and flushes nothing
    verifying = case_memory(spec, "fp32", big, False)
    assert verifying.phase == "verifying" and verifying.total > 700e9  # 120 GB of operands, and their checks


def test_row2_a_case_too_big_for_the_gpu_fails_before_allocating_with_the_numbers():
    """Row 2: the worker compares the need with the device's free memory before drawing inputs or allocating;
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


@requires_gpu
@pytest.mark.gpu
def test_row2_on_the_gpu_a_shape_past_its_memory_fails_at_once_with_the_numbers(pytester, naive_source):
    """Row 2: `--gemm-shapes 100000x100000x100000` (120 GB of operands) fails each case quickly, before anything
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
def test_row2_on_the_gpu_the_need_is_a_lower_bound_of_what_verification_allocates(dtype, ab, shape):
    """Row 2, on the device: the worker's verification on CuPy, counted by a pool of its own, holds at its peak at
    least the need (so a case refused as too big could never have fitted), and at most twice it."""
    import cupy

    from pytest_gemm.worker.buffers import case_inputs
    from pytest_gemm.worker.device import GpuRunner

    spec = KernelSpec(path="k.py", name="k", dtypes=(dtype,), kind="py", attr="k")
    case = Case(spec, Variant(), dtype, shape, ab)
    pool, peak = cupy.cuda.MemoryPool(), [0]

    def malloc(size: int):
        memory = pool.malloc(size)
        peak[0] = max(peak[0], pool.used_bytes())
        return memory

    runner = GpuRunner(cupy, 0)
    runner._python = (case, _python_kernel, "k.py")
    case_inputs(case, 1)
    cupy.cuda.set_allocator(malloc)
    try:
        base = pool.used_bytes()
        runner.verify(case, 1)
        runner.stream.synchronize()
    finally:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
    need = case_memory(spec, dtype, shape, case.c_prior).total
    assert need <= peak[0] - base <= 2 * need, (need, peak[0] - base)


# -- row 62: compiles that take minutes ---------------------------------------------------------------------------

SLOW = (ROOT / "tests" / "kernels_slow" / "slow_compile.cu").read_text()  # UNROLL=4096: 40 s or more in NVRTC


@requires_nvrtc
@pytest.mark.parametrize("ahead", [False, True], ids=["one by one", "compiled ahead"])
def test_row62_a_compile_past_the_limit_fails_that_variant_saying_so_and_the_run_goes_on(pytester, monkeypatch, ahead):
    """Row 62: with a 2 s limit (ini or option), the variant that would compile for 40 s fails after 2 s with the
    limit and the option that sets it, terminal lines said how long it had run, and the other variant passes;
    the same when the compile items are compiled ahead in threads."""
    from pytest_gemm.compiler import limited
    from pytest_gemm.plugin import compile_ahead

    monkeypatch.setattr(limited, "PROGRESS_EVERY", 0.5)
    if ahead:
        start = compile_ahead.CompileAhead.start
        monkeypatch.setattr(compile_ahead.CompileAhead, "start", lambda self, jobs, cores=None: start(self, jobs, 8))
        pytester.makeini("[pytest]\ngemm_compile_timeout = 2\n")
        limit: tuple[str, ...] = ()
    else:
        limit = ("--gemm-compile-timeout", "2")
    (pytester.path / "slow.cu").write_text(SLOW)
    began = time.monotonic()
    result = pytester.runpytest(
        "--gemm-kernels", "slow.cu", "-m", "gemm_compile", "--gemm-archs", "sm_90", "-p", "no:cacheprovider", *limit
    )
    assert time.monotonic() - began < 20
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-gemm: compiling slow.cu::slow?UNROLL4096? for sm_90: * s so far (limit 2 s, "
            "--gemm-compile-timeout / gemm_compile_timeout)",
            "*slow.cu: slow?UNROLL4096? did not compile for sm_90 within 2 s, so the compiler was stopped "
            "(--gemm-compile-timeout / gemm_compile_timeout sets the limit)",
        ]
    )


@requires_nvrtc
def test_row62_a_compile_process_that_dies_fails_its_variant_with_how_it_ended():
    """Row 62: a compile process killed from outside (the OOM killer, say) fails that compile with the signal,
    and the next compile starts a new process, which is kept for the next one until trimmed."""
    import os
    import signal
    import threading

    from pytest_gemm.compiler.limited import LimitedCompiler
    from pytest_gemm.compiler.nvrtc import CompileError, compile_kernel

    spec = parse_cu_source("slow.cu", SLOW)[0]
    slow, fast = spec.variants()[1], spec.variants()[0]
    compiler = LimitedCompiler(60.0)
    try:
        threading.Timer(1.0, lambda: [os.kill(pid, signal.SIGKILL) for pid in _children(compiler)]).start()
        with pytest.raises(CompileError, match=r"the compile process died \(signal 9 \(SIGKILL\)\)"):
            compile_kernel(spec, slow, "sm_90", None, compiler)
        assert compile_kernel(spec, fast, "sm_90", None, compiler).cubin
        (idle,) = compiler._idle  # kept for the next compile, until trimmed
        compiler.trim(keep=0)
        assert not compiler._idle and idle.popen.returncode is not None
    finally:
        compiler.close()


def _children(compiler) -> list[int]:
    return [child.popen.pid for child in compiler._busy]


def _endless_compile_project(pytester, naive_source: str) -> None:
    """A project of the naive kernel whose GPU worker's backend compiles for ever (standing for a slow NVRTC)."""
    (pytester.path / "naive.cu").write_text(naive_source)
    (pytester.path / "endless_compile.py").write_text(ENDLESS_COMPILE)
    pytester.makeconftest(
        f"import sys\nsys.path.insert(0, {str(pytester.path)!r})\n\n\ndef pytest_gemm_worker_backend(config):\n"
        '    return "endless_compile:EndlessCompile"\n'
    )


def test_row62_the_worker_compile_phase_has_the_compile_limit(pytester, naive_source):
    """Row 62: in the GPU worker the compile phase is limited by --gemm-compile-timeout, not --gemm-timeout; a
    compile past it fails the case naming that option (a backend whose compile never ends stands for NVRTC)."""
    _endless_compile_project(pytester, naive_source)
    result = pytester.runpytest(
        "--gemm-kernels", "naive.cu", "-m", "gpu", "--gemm-shapes", "64", "--benchmark-skip", "-x",
        "--gemm-compile-timeout", "1", "--gemm-timeout", "60",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*sgemm_naive?fp32-64x64x64? (M=64, N=64, K=64, alpha=1, beta=0) timed out after 1 s while compiling",
            "*the worker was killed and replaced; --gemm-compile-timeout (ini gemm_compile_timeout) sets the limit",
        ]
    )
    assert Request("p", "s", "k", (), "fp32", Shape(1, 1, 1), 1.0, 0.0, 0).compile_timeout == 300.0  # the default


def test_row62_a_variant_whose_compile_timed_out_is_not_compiled_again(pytester, naive_source):
    """Row 62: a compile past the limit costs the limit once a variant, not once a case: the variant's later cases
    fail at once, saying an earlier case did not compile, and no other worker is killed for them."""
    _endless_compile_project(pytester, naive_source)
    result = pytester.runpytest(
        "--gemm-kernels", "naive.cu", "-m", "gpu", "--gemm-shapes", "64", "--benchmark-skip",
        "--gemm-compile-timeout", "1", "--gemm-timeout", "60",
    )  # fmt: skip
    result.assert_outcomes(failed=3)
    # the failure sections only: under CI=... pytest repeats each whole message in its short summary
    text = result.stdout.str().split("short test summary info")[0]
    assert text.count("the worker was killed and replaced; --gemm-compile-timeout") == 1, text
    assert text.count("an earlier case of this variant did not compile within the limit either") == 2, text
    result.stdout.fnmatch_lines(
        ["*sgemm_naive?fp32-64x64x64-a0.7b1.3? (M=64, N=64, K=64, alpha=0.7, beta=1.3) timed out after 1 s while *"]
    )


ENDLESS_COMPILE = """
import time


class EndlessCompile:
    def __init__(self, cubin_cache=None):
        pass

    def facts(self):
        device = {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0"}
        return {
            "name": device["name"],
            "compute_capability": "9.0",
            "sm_count": 132,
            "max_sm_clock_mhz": 1980,
            "uuid": "GPU-00000000-endless",
            "visible_devices": [device],
        }

    def run(self, request, notify):
        notify("load")
        notify("compile")
        time.sleep(120)
"""
