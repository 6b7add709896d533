"""The GPU backend of a worker: one request in, one outcome out, whatever the kernel does.

Every exception becomes a :class:`~pytest_gemm.records.outcome.Failure` of its own kind. A CUDA
error is sticky when CUDA names it so or when the context no longer works afterwards; then the
outcome asks for this worker to be replaced.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..compiler.cache import CubinCache
from ..compiler.nvrtc import CompileError, NvrtcUnavailable
from ..isolation.protocol import TIME_PHASE
from ..records.outcome import OUT_OF_MEMORY, Failure, Outcome, TimingRun, Verification, internal_failure
from ..records.request import Request, TimingSettings
from ..records.shapes import Shape
from ..records.verdicts import FailureKind
from ..specs.cases import Case
from ..specs.footprint import case_memory, memory_problem
from ..specs.spec import KernelFileError
from .errors import (
    KernelCudaError,
    KernelRaised,
    LaunchRefused,
    TooBigForDevice,
    cuda_error_name,
    is_launch_error,
    is_sticky_name,
)
from .inputs import InputStrategy, input_strategy
from .integrity import HARNESS, HarnessChanged, ThreadLeft
from .kinds import KernelStrategy, kernel_strategy
from .next_inputs import NextInputs
from .nvml import StateAround, open_monitor
from .peers import Peer, peer_strategy
from .prepared import PreparedCase, Watch
from .python_calls import default_torch_stream, release_torch
from .runner import GpuRunner, open_device, visible_devices
from .timer import Timer
from .verify import verify

__all__ = ["GpuBackend"]

_WARM_UP_KERNEL = """
from pytest_gemm import gemm_kernel


@gemm_kernel(dtypes=["fp32"])
def warm_up(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + (beta * C if beta else 0)


@gemm_kernel(dtypes=["fp32"])
def warm_up_wrong(A, B, C, alpha, beta):
    C[...] = alpha * (A @ B) + beta * C  # reads C although beta = 0: the re-run with finite C
    C[0, 0] = float("nan")  # a NaN no re-run explains: the re-runs with each guard region alone NaN
"""
#: what the warm-up runs: a correct case and a wrong one whose diagnosis takes every re-run, each with beta = 0 and not
_WARM_UP_CASES = [
    (name, alpha, beta) for name in ("warm_up", "warm_up_wrong") for alpha, beta in ((1.0, 0.0), (0.7, 1.3))
]


class _Failed(Exception):
    def __init__(self, failure: Failure) -> None:
        self.failure = failure


class GpuBackend:
    """Runs requests on the first visible CUDA device; raises DeviceUnavailable when there is none."""

    standby = True  # its start (CuPy, a CUDA context, the warm-up) costs seconds: the pool keeps one started ahead

    def __init__(self, cubin_cache: str | None = None, warmed: bool = False) -> None:
        cubins = CubinCache(Path(cubin_cache)) if cubin_cache else None
        self.runner: GpuRunner = open_device(0, cubins)
        self.cp = self.runner.cp
        self.monitor = open_monitor(self.runner.pci_bus_id)
        self._sampling = ThreadPoolExecutor(1, thread_name_prefix="pytest-gemm gpu state")  # NVML's, beside timing
        self._next = NextInputs()  # the next case's inputs, drawn beside this one
        # which GPU this is, and which others this process sees (the pytest process plans its GPUs from them)
        listed = visible_devices(self.cp, lambda bus_id: open_monitor(bus_id).uuid())  # name, capability, NVML's UUID
        seen = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "visible_devices": listed}
        self._facts = {"available": True, **self.runner.facts(), **self.monitor.facts(), **seen}
        self.timer = Timer(self.runner)  # compiles its kernels in a thread, while the warm-up verifies
        self._watch: Watch | None = None  # the warm-up's launches are not watched: they need not wait for the timer
        self._warm_up(_WARM_UP_CASES[:1] if warmed else _WARM_UP_CASES)
        self.timer.ready()
        self._watch = self.timer.streams_of  # a Python kernel's verification launch, watched under CUPTI

    def _warm_up(self, cases: list[tuple[str, float, float]]) -> None:
        """Pay the first-use costs of verification (CuPy's JIT-compiled elementwise kernels, cuBLAS's handle)
        now, before any case's time limit runs: with a cold CuPy cache a first verification takes longer than
        a short ``--gemm-timeout``. A wrong output's diagnosis compiles kernels of its own, so the warm-up also
        diagnoses a wrong case. A first timing costs little, so it is not warmed up. A standby worker, started
        once an earlier worker has filled CuPy's cache, runs the first case only: its start is what a crashed case
        costs, and the one case still tells a GPU that no longer works from a kernel that broke it. (Measured:
        docs/measurements.md#the-workers-start.)"""
        folder = Path(tempfile.mkdtemp(prefix="pytest-gemm-warm-up-"))
        path = folder / "warm_up.py"
        path.write_text(_WARM_UP_KERNEL, encoding="utf-8")
        try:
            for name, alpha, beta in cases:
                request = Request(str(path), "warm_up.py", name, (), "fp32", Shape(64, 64, 64), alpha, beta, 0)
                outcome = self._run(request, lambda phase: None)
                if outcome.failure is not None:
                    raise RuntimeError(f"the worker's warm-up failed: {outcome.failure.message}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def facts(self) -> dict[str, Any]:
        return self._facts

    def before_imports(self) -> None:
        """Before libraries are imported ahead (``--import``): CUPTI's clock set up first, as a worker that times before
        any case imports torch has it; set up after torch brought a libcupti of its own, it does not start
        (cupti_buffers.libcupti_path)."""
        self.timer.set_up_cupti()

    def expect_next(self, request: Request) -> None:
        """The case likely to come next (worker.next_inputs): its inputs drawn on a thread while this one runs. Its
        kernel file's header is read here (as its load phase will read it); what that or drawing raises, its case
        says."""
        with contextlib.suppress(Exception):
            case = self.runner.files.case(request)
            if not self.runner.cannot_run(case.spec):
                self._next.expect(request, case, input_strategy(case).draw)

    def run(self, request: Request, notify: Callable[[str], None]) -> Outcome:
        before = dict(self.runner.compiles)
        try:
            outcome = self._run(request, notify)
        finally:
            default_torch_stream()
        compiled = self.runner.compiles["nvrtc"] - before["nvrtc"]
        return replace(outcome, compiled=compiled, cached=self.runner.compiles["cache"] - before["cache"])

    def _run(self, request: Request, notify: Callable[[str], None]) -> Outcome:
        phases: dict[str, float] = {}
        results: dict[str, Any] = {}
        case: Case | None = None
        kernel: KernelStrategy | None = None

        @contextmanager
        def phase(name: str):
            notify(name)
            start = time.perf_counter()
            try:
                yield
                if case is not None and ((kernel is not None and kernel.file_code) or case.spec.fills):
                    HARNESS.check()  # what its file's code changed after its last call returned (a host callback)
            except Exception as exc:
                raise _Failed(self._failure(exc, name, kernel)) from None
            finally:
                phases[name] = time.perf_counter() - start

        try:
            with phase("load"):
                case = self.runner.files.case(request)
                reason = self.runner.cannot_run(case.spec)
                if not reason:  # the case's strategies, chosen once; a Python kernel's file is imported here
                    inputs = input_strategy(case)
                    kernel = kernel_strategy(self.runner, case, inputs, request.path)
                    peer = peer_strategy(case, inputs, self.runner.capability)
            if reason:
                return Outcome(skip=reason, phase_s=phases)
            assert kernel is not None
            with phase("compile"):
                kernel.check()
            prepared = None
            if kernel.setup_call:  # its first call, in a phase of its own: compiling and autotuning there show progress
                with phase("setup"):
                    prepared = self._prepare(case, request, kernel, inputs, peer)
                    self._next.settle()  # an autotuner times its choices with the host to itself
                    results["autotuned"] = prepared.setup_call()
                    release_torch()  # what autotuning and compiling left in torch's cache, before verification
            with phase("verify"):
                prepared = prepared or self._prepare(case, request, kernel, inputs, peer)
                results["verification"] = verification = verify(prepared)
            if request.timing is None or not verification.passed:
                return Outcome(phase_s=phases, **results)
            if peer.reason:  # no GEMM of cuBLAS's to time it against
                return Outcome(phase_s=phases, untimed=peer.reason, **results)
            self._next.settle()  # the next case's inputs drawn: the host is the timing's alone
            with phase(TIME_PHASE):
                state = StateAround(self.monitor, self._sampling)
                results["timing"] = self.timer.time_case(prepared, request.timing, lambda: notify(TIME_PHASE), state)
                results["nvml_before"], results["nvml_after"] = state.samples()
            return Outcome(phase_s=phases, **results)
        except _Failed as failed:
            return Outcome(failure=failed.failure, phase_s=phases, **_partial(results))

    def _prepare(
        self, case: Case, request: Request, kernel: KernelStrategy, inputs: InputStrategy, peer: Peer
    ) -> PreparedCase:
        """The case prepared on this GPU, once it is known to fit (its inputs drawn)."""
        room = self._check_memory(case, request.timing)
        drawn = self._next.take(request, case)  # its inputs, where they were drawn while the case before ran
        return PreparedCase(self.runner, case, request.seed, kernel, inputs, peer, watch=self._watch, graph_room=room,
                            drawn=drawn)  # fmt: skip

    def _check_memory(self, case: Case, timing: TimingSettings | None) -> bool:
        """Refuse a case whose verification (or timing, when it is timed) cannot fit in the device's free memory
        (with the blocks CuPy's pool keeps for reuse; torch's unused cached blocks, which a Python kernel's calls may
        leave, are given back first), before its inputs are drawn or anything is allocated for it:
        :class:`TooBigForDevice`, with the numbers. Whether there is room for a CUDA graph's replay besides
        (worker.graphs): a case that fits without it runs without it."""
        release_torch()
        free, total = self.cp.cuda.runtime.memGetInfo()
        free += self.cp.get_default_memory_pool().free_bytes()
        for replayed in (True, False) if case.ab.plain else (False,):
            need = case_memory(
                case.spec,
                case.dtype,
                case.shape,
                case.c_prior,
                guards=True,
                timed=timing is not None,
                cold_cache=timing is not None and timing.cold_cache,
                l2_bytes=self.runner.l2_bytes,
                flush_bytes=self.timer.flush_to_allocate,
                storage=case.storage,
                replayed=replayed,
            )
            problem = memory_problem(need, free, total, f"this {self.runner.name}")
            if problem is None:
                return replayed
        assert problem is not None
        raise TooBigForDevice(*problem)

    # -- what went wrong -------------------------------------------------------------------------
    def _failure(self, exc: Exception, phase: str, kernel: KernelStrategy | None) -> Failure:
        cp = self.cp
        if isinstance(exc, KernelFileError):
            return Failure(FailureKind.KERNEL_FILE, str(exc), phase)
        if isinstance(exc, CompileError):
            return Failure(FailureKind.COMPILE, f"does not compile for {exc.arch}:", phase, tuple(exc.log.splitlines()))
        if isinstance(exc, NvrtcUnavailable):
            return Failure(FailureKind.COMPILE, str(exc), phase)
        if isinstance(exc, LaunchRefused):
            return Failure(FailureKind.LAUNCH, str(exc), phase, exc.details)
        if isinstance(exc, TooBigForDevice):
            return Failure(FailureKind.TOO_BIG, str(exc), phase, exc.details)
        if isinstance(exc, KernelCudaError):  # through torch or Triton: CUDA's error, as a .cu kernel's would be
            if exc.out_of_memory:
                self._release_memory()
                return Failure(FailureKind.CUDA_ERROR, f"{OUT_OF_MEMORY}: {exc}", phase, exc.details)
            failure = self._cuda_failure(str(exc), phase, kernel)
            return replace(failure, details=failure.details + exc.details)
        if isinstance(exc, (HarnessChanged, ThreadLeft)):  # the worker cannot be trusted again
            kind = FailureKind.HARNESS_CHANGED if isinstance(exc, HarnessChanged) else FailureKind.THREAD_LEFT
            return Failure(kind, str(exc), phase, exc.details, replace_worker=True)
        if isinstance(exc, KernelRaised):
            return Failure(FailureKind.KERNEL_RAISED, str(exc), phase, exc.details, replace_worker=not self._usable())
        if isinstance(exc, cp.cuda.memory.OutOfMemoryError):
            self._release_memory()
            return Failure(FailureKind.CUDA_ERROR, f"{OUT_OF_MEMORY}: {exc}", phase)
        if isinstance(exc, (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError)):
            return self._cuda_failure(str(exc), phase, kernel)
        return internal_failure(exc, phase)

    def _cuda_failure(self, message: str, phase: str, kernel: KernelStrategy | None) -> Failure:
        name = cuda_error_name(message)
        if is_sticky_name(name) or not self._usable():
            return Failure(FailureKind.CUDA_ERROR, message, phase, replace_worker=True)
        if is_launch_error(name) and kernel is not None:
            try:
                details = tuple(kernel.launch_details())
            except Exception:
                details = ()
            return Failure(FailureKind.LAUNCH, message, phase, details)
        return Failure(FailureKind.CUDA_ERROR, message, phase)

    def _release_memory(self) -> None:
        """Give back what CuPy's pool and torch's caching allocator hold unused (torch's only where a kernel file
        imported it and used the GPU)."""
        with contextlib.suppress(Exception):  # a failure's report must not fail
            self.cp.get_default_memory_pool().free_all_blocks()
        with contextlib.suppress(Exception):
            release_torch()

    def _usable(self) -> bool:
        """Whether this process's CUDA context still works (a sticky error makes every call fail)."""
        cp = self.cp
        try:
            cp.cuda.runtime.deviceSynchronize()
            probe = cp.arange(16, dtype=cp.float32)
            return float((probe + 1).sum()) == 136.0
        except Exception:
            return False


def _partial(results: dict[str, Any]) -> dict[str, Any]:
    """What a failed case had finished: its verification when the failure came while timing."""
    kept: dict[str, Any] = {"autotuned": results.get("autotuned", ())}
    if isinstance(results.get("verification"), Verification):
        kept["verification"] = results["verification"]
    if isinstance(results.get("timing"), TimingRun):
        kept["timing"] = results["timing"]
    return kept
