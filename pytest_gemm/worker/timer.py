"""Device timing of one case: the kernel and cuBLAS, interleaved pair by pair, timed with CUDA events.

Part of the worker (with :mod:`.device`, whose runner launches the kernel): it returns a plain
:class:`~pytest_gemm.records.outcome.TimingRun`.

One round is a pair of timed launches, the kernel then cuBLAS, each prepared the same way:

1. C is restored to its starting content (the NaN poison, or the prior C when beta != 0), so every
   launch does the same work and the last one can be verified again;
2. for cold-cache timing, L2 is flushed by writing a buffer of twice its size;
3. a CUDA event, the launch, a CUDA event, all on the harness's stream.

Only the time between the two events counts: compiling, loading, allocating and creating handles
all happen before. Rounds are queued in batches behind a short spin kernel, so that the GPU never
waits for Python between an event and its launch; batches repeat until the stopping rule holds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..judge.stats import StopRule, median_interval, ratio_interval
from ..records.dtypes import DType, get_dtype
from ..records.outcome import TimingRun
from ..records.request import TimingSettings
from ..specs.cases import Case
from .buffers import GuardedMatrix, case_inputs, uint_type, upload_bits
from .device import GpuRunner

__all__ = ["Timer"]

_SPIN_SOURCE = r"""
extern "C" __global__ void pytest_gemm_spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""
_MAX_COPIES = 32  # input sets rotated through when one set fits in L2
_BATCH_DEVICE_S = 0.02  # aim for this much device time per batch of rounds
_MAX_BATCH = 64
_MAX_SPIN_S = 0.02

# cudaDataType and cublasComputeType_t values
_CUDA_TYPE = {"fp32": 0, "tf32": 0, "fp64": 1, "fp16": 2, "bf16": 14}
_COMPUTE = {"fp32": 68, "tf32": 77, "fp64": 70, "fp16": 68, "bf16": 68}  # 32F, 32F_FAST_TF32, 64F
_GEMM_DEFAULT = -1


class _Operands:
    """One set of A, B and C in storage order, for the kernel or for cuBLAS."""

    def __init__(self, cp: Any, stored: list[np.ndarray], c_shape: tuple[int, int], dt: DType, out: DType) -> None:
        a, b = stored
        self.a = _plain(cp, a.view(f"u{dt.itemsize}"), dt)
        self.b = _plain(cp, b.view(f"u{dt.itemsize}"), dt)
        self.c = GuardedMatrix(
            cp.empty(c_shape[0] * c_shape[1], dtype=uint_type(cp, out.itemsize)),
            0,
            *c_shape,
            c_shape[1],
            out.guard_bits,
        )


def _plain(cp: Any, host_bits: np.ndarray, dt: DType) -> GuardedMatrix:
    rows, cols = host_bits.shape
    flat = cp.asarray(np.ascontiguousarray(host_bits).reshape(-1))
    return GuardedMatrix(flat, 0, rows, cols, cols, dt.guard_bits)


class Timer:
    """Times cases on one runner; owns the flush buffer, the events, the spin kernel and a cuBLAS handle."""

    def __init__(self, runner: GpuRunner) -> None:
        from cupy_backends.cuda.libs import cublas

        self.runner, self.cp, self.cublas = runner, runner.cp, cublas
        self.flush_bytes = max(2 * runner.l2_bytes, 8 << 20)
        self._flush: Any = None
        self._events = [self.cp.cuda.Event() for _ in range(4 * _MAX_BATCH)]
        self._spin = self.cp.RawKernel(_SPIN_SOURCE, "pytest_gemm_spin")
        self._handle = cublas.create()

    # -- one case --------------------------------------------------------------------------------
    def time_case(
        self, case: Case, seed: int, settings: TimingSettings, progress: Callable[[], None] = lambda: None
    ) -> TimingRun:
        """Time one case; ``progress`` is called after every batch (the parent's time limit restarts on it)."""
        with self.runner.stream:
            return self._time(case, seed, settings, progress)

    def _time(self, case: Case, seed: int, settings: TimingSettings, progress: Callable[[], None]) -> TimingRun:
        cp, runner = self.cp, self.runner
        dt, out = get_dtype(case.dtype), get_dtype(case.spec.output_dtype(case.dtype))
        m, n = case.shape.M, case.shape.N
        data = case_inputs(case, seed)
        stored = [data.stored(data.a), data.stored(data.b)]
        c_shape = (n, m) if data.col else (m, n)
        if data.c0 is None:
            c_init = cp.full(m * n, out.poison_bits, dtype=uint_type(cp, out.itemsize))
        else:
            c_init = upload_bits(cp, data.stored(data.c0)).reshape(-1)

        set_bytes = sum(x.nbytes for x in stored) + c_init.nbytes
        copies = 1
        if settings.cold_cache and set_bytes < runner.l2_bytes:
            copies = min(_MAX_COPIES, math.ceil(2 * runner.l2_bytes / set_bytes))
        kernel_sets = [_Operands(cp, stored, c_shape, dt, out) for _ in range(copies)]
        cublas_sets = [_Operands(cp, stored, c_shape, dt, out) for _ in range(copies)]
        if settings.cold_cache and self._flush is None:
            self._flush = cp.empty(self.flush_bytes, dtype=cp.uint8)
        reference = self._cublas_gemm(case, dt, out)  # queues cuBLAS's GEMM on one set of operands
        runner.enqueue(case, kernel_sets[0].a, kernel_sets[0].b, kernel_sets[0].c, dt)  # loads the module
        runner.stream.synchronize()

        def prepare(ops: _Operands) -> None:
            ops.c.flat[...] = c_init
            if settings.cold_cache:
                self._flush.fill(0)

        def kernel(ops: _Operands) -> None:
            runner.enqueue(case, ops.a, ops.b, ops.c, dt)

        kernel_s: list[float] = []
        reference_s: list[float] = []
        start = time.perf_counter()
        # Warm-up, not part of the results: two rounds absorb first-call costs (cuBLAS's heuristics and
        # workspace), then more rounds up to ``warmup_s`` of device time measure the device and host
        # cost of a round, which size the batches and the spin.
        warm_k, warm_r, _ = self._batch(2, 0.0, kernel_sets, cublas_sets, prepare, kernel, reference, 0)
        per_round = (sum(warm_k) + sum(warm_r)) / 2
        extra = max(1, min(_MAX_BATCH, math.ceil(settings.warmup_s / max(per_round, 1e-9))) - 2)
        warm_k, warm_r, host_s = self._batch(extra, 0.0, kernel_sets, cublas_sets, prepare, kernel, reference, 0)
        per_round = (sum(warm_k) + sum(warm_r)) / extra
        host_round = host_s / extra
        batch = max(1, min(_MAX_BATCH, round(_BATCH_DEVICE_S / max(per_round, 1e-9))))
        # The spin keeps the GPU busy while Python queues the batch; only needed when queuing is slow.
        spin = min(_MAX_SPIN_S, 1.5 * host_round * batch) if host_round > per_round / 2 else 0.0

        stop = StopRule(target=settings.noise, min_samples=settings.min_samples, max_time=settings.max_time)
        rounds, reason = 0, ""
        while not reason:
            k, r, _ = self._batch(batch, spin, kernel_sets, cublas_sets, prepare, kernel, reference, rounds)
            progress()
            rounds += batch
            kernel_s += k
            reference_s += r
            intervals = [median_interval(kernel_s), median_interval(reference_s), ratio_interval(kernel_s, reference_s)]
            reason = stop.verdict(intervals, time.perf_counter() - start) or ""

        last = kernel_sets[(rounds - 1) % copies]
        c0_bits = None if data.c0 is None else upload_bits(cp, data.c0)
        truth, gscale = runner.truth(case, upload_bits(cp, data.a), upload_bits(cp, data.b), c0_bits)
        last_output = runner.judge_output(case, last.c, data, c0_bits, truth, gscale)
        reference_output = runner.judge_output(case, cublas_sets[(rounds - 1) % copies].c, data, c0_bits, truth, gscale)
        runner.stream.synchronize()
        return TimingRun(
            kernel_s=tuple(kernel_s),
            reference_s=tuple(reference_s),
            elapsed_s=time.perf_counter() - start,
            stop_reason=reason,
            cold_cache=settings.cold_cache,
            input_copies=copies,
            flush_bytes=self.flush_bytes if settings.cold_cache else 0,
            last_output=last_output,
            reference_output=reference_output,
        )

    def _batch(self, rounds, spin_s, kernel_sets, cublas_sets, prepare, kernel, reference, first):
        """Queue ``rounds`` timed pairs (behind a spin of ``spin_s``), wait, and read the event times."""
        cp, stream, ev = self.cp, self.runner.stream, self._events
        rounds = min(rounds, _MAX_BATCH)
        host0 = time.perf_counter()
        if spin_s > 0:
            self._spin((1,), (1,), (np.uint64(int(spin_s * 1e9)),))
        for i in range(rounds):
            j = (first + i) % len(kernel_sets)
            for slot, (ops, launch) in enumerate(((kernel_sets[j], kernel), (cublas_sets[j], reference))):
                prepare(ops)
                ev[4 * i + 2 * slot].record(stream)
                launch(ops)
                ev[4 * i + 2 * slot + 1].record(stream)
        host_s = time.perf_counter() - host0
        ev[4 * rounds - 1].synchronize()
        kernel_s = [cp.cuda.get_elapsed_time(ev[4 * i], ev[4 * i + 1]) / 1e3 for i in range(rounds)]
        reference_s = [cp.cuda.get_elapsed_time(ev[4 * i + 2], ev[4 * i + 3]) / 1e3 for i in range(rounds)]
        return kernel_s, reference_s, host_s

    # -- cuBLAS ----------------------------------------------------------------------------------
    def _cublas_gemm(self, case: Case, dt: DType, out: DType) -> Callable[[_Operands], None]:
        """A function that queues cuBLAS's GEMM at this case's dtype, shape, scalars and layout (it holds the
        host scalars whose addresses cuBLAS reads)."""
        cublas, handle = self.cublas, self._handle
        m, n, k = case.shape.M, case.shape.N, case.shape.K
        scalar = np.float64 if dt.name == "fp64" else np.float32
        alpha, beta = np.array(case.ab.alpha, scalar), np.array(case.ab.beta, scalar)
        a_type, c_type, compute = _CUDA_TYPE[dt.name], _CUDA_TYPE[out.name], _COMPUTE[dt.name]
        col = case.spec.layout == "col"

        def gemm(ops: _Operands) -> None:
            a, b, c = ops.a.flat.data.ptr, ops.b.flat.data.ptr, ops.c.flat.data.ptr
            if col:  # column-major: C = A B as it stands
                args = (m, n, k, alpha.ctypes.data, a, a_type, m, b, a_type, k, beta.ctypes.data, c, c_type, m)
            else:  # row-major C = A B is column-major C^T = B^T A^T
                args = (n, m, k, alpha.ctypes.data, b, a_type, n, a, a_type, k, beta.ctypes.data, c, c_type, n)
            # CuPy binds the handle to its current stream, the harness's stream, on each call.
            cublas.gemmEx(handle, 0, 0, *args, compute, _GEMM_DEFAULT)

        return gemm
