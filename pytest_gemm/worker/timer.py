"""Device timing of one case: the kernel and cuBLAS, interleaved pair by pair.

Part of the worker (with :mod:`.prepared`, whose prepared case launches the kernel): it returns a plain
:class:`~pytest_gemm.records.outcome.TimingRun`.

One round is a pair of timed launches, the kernel then cuBLAS, each prepared the same way:

1. the prepare kernel (:mod:`.rounds`) restores C to its starting content (the NaN poison, or the prior C
   when beta != 0), so every launch does the same work and the last one can be verified again, then, for
   cold-cache timing, sweeps every SM's instruction caches and flushes L2 by writing a buffer of twice its size;
2. a CUDA event, the launch, a CUDA event, all on the harness's stream.

With the events, a launch's time is the time between its two events. With CUPTI (:mod:`.cupti_clock`,
``--gemm-timer cupti``, the default) it is the summed durations of the GPU work between the prepare kernel and
the next harness kernel, without the launch's latency on the device; the events are still read, and a CUPTI
median longer than the events' around the same launches sends the case back to the events, saying why.
Compiling, loading, allocating and creating handles all happen before. Rounds are queued in batches (with the
events, behind a short spin kernel when queuing is slow, so that the GPU never waits for Python between an
event and its launch); batches repeat until the stopping rule holds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..records.outcome import TimedCheck, TimingRun
from ..records.request import TimingSettings
from ..specs.footprint import input_copies, storage_dims  # input_copies: research takes it from here
from .batches import Batches
from .buffers import uint_type, upload_bits
from .cupti_clock import FRESH_KERNEL, MARK_KERNEL, PREPARE_KERNEL, SPIN_KERNEL, CuptiClock, CuptiUnavailable
from .fresh import FRESH_SOURCE, FreshInputs, TimedOutputWrong
from .graphs import graphed
from .l2_window import PersistingL2
from .nvml import StateAround
from .operands import Operands
from .prepared import PreparedCase
from .rounds import MARK_SOURCE, PREPARE_SOURCE, PREPARE_THREADS, SM_EPOCH_SLOTS, SPIN_SOURCE, Measured
from .runner import GpuRunner

__all__ = ["Timer", "input_copies"]


class _TimedSet:
    """One set of operands a timed launch runs on (the kernel's or the peer's), and its launch, worked out once."""

    def __init__(self, ops: Operands) -> None:
        self.ops = ops
        self.call: Callable[[], None] | None = None

    def addresses(self) -> dict[str, tuple[int, int, int]]:
        """Each operand's address, leading dimension and batch stride, as a peer takes them."""
        found = (("A", self.ops.a), ("B", self.ops.b), ("C", self.ops.c))
        return {name: (g.flat.data.ptr, g.ld, g.batch_stride) for name, g in found}


class Timer:
    """Times cases on one runner; owns the flush buffer, the events and the harness's kernels (prepare, mark, spin)
    (the cuBLAS handle is the runner's)."""

    def __init__(self, runner: GpuRunner) -> None:
        self.runner, self.cp = runner, runner.cp
        self.flush_bytes = max(2 * runner.l2_bytes, 8 << 20)
        self._flush: Any = None  # L2's flush: written, not read, before a cold-cache launch (docs/timing.md)
        self._prepare = self.cp.RawKernel(PREPARE_SOURCE, PREPARE_KERNEL)
        self._sink = self.cp.zeros(4, dtype=self.cp.uint32)  # also the flush buffer's stand-in when there is none
        self._sm_epochs = self.cp.zeros(SM_EPOCH_SLOTS, dtype=self.cp.uint32)
        self._epoch = 0
        self._mark = self.cp.RawKernel(MARK_SOURCE, MARK_KERNEL)
        self._spin = self.cp.RawKernel(SPIN_SOURCE, SPIN_KERNEL)
        self._fresh = self.cp.RawKernel(FRESH_SOURCE, FRESH_KERNEL)
        self._nothing = self.cp.empty(0, dtype=self.cp.uint8)
        self.batches = Batches(self.cp, runner.stream, self._mark, self._spin)
        # NVRTC compiles the timer's own kernels (most of it the prepare kernel's code sweep) in a thread, while the
        # worker's warm-up verifies: CuPy lets go of the GIL while NVRTC runs. The backend waits for them after its
        # warm-up, so no case's time limit pays for them (measured: docs/measurements.md#the-workers-start).
        pool = ThreadPoolExecutor(1, thread_name_prefix="pytest-gemm timer kernels")
        self._compiled = pool.submit(self._compile)
        pool.shutdown(wait=False)  # its thread ends with the compile
        self._cupti: CuptiClock | str | None = None  # created on first use (or set_up_cupti); a str: why not

    def _compile(self) -> None:
        with self.cp.cuda.Device(self.runner.index):
            for kernel in (self._prepare, self._mark, self._spin, self._fresh):
                kernel.compile()

    @property
    def flush_to_allocate(self) -> int:
        """Bytes the L2 flush buffer will take when a cold-cache case is timed (0 once it is allocated)."""
        return self.flush_bytes if self._flush is None else 0

    def ready(self) -> None:
        """Wait until the timer's kernels are compiled (raises what compiling them raised)."""
        self._compiled.result()

    # -- one case --------------------------------------------------------------------------------
    def time_case(
        self,
        prepared: PreparedCase,
        settings: TimingSettings,
        progress: Callable[[], None] = lambda: None,
        state: StateAround | None = None,
    ) -> TimingRun:
        """Time one verified case; ``progress`` is called after every batch (the parent's time limit restarts on
        it); ``state``: the GPU's state, read before the first timed launch and after the last."""
        self.ready()
        with self.runner.stream:
            return self._time(prepared, settings, progress, state or StateAround())

    def _time(
        self, prepared: PreparedCase, settings: TimingSettings, progress: Callable[[], None], state: StateAround
    ) -> TimingRun:
        cp, runner, case, data = self.cp, self.runner, prepared.case, prepared.data
        dt, out = prepared.dtypes
        c_size = math.prod(storage_dims(case.spec, "C", case.shape))
        stored, c_start = [prepared.stored["A"], prepared.stored["B"]], prepared.stored["C"]
        if c_start is None:
            c_init = cp.full(c_size, out.poison_bits, dtype=uint_type(cp, out.itemsize))
        else:
            c_init = upload_bits(cp, c_start).reshape(-1)

        copies = input_copies(sum(x.nbytes for x in stored) + c_init.nbytes, runner.l2_bytes, settings.cold_cache)
        uploaded = tuple(upload_bits(cp, x) for x in stored)
        kernel_sets = [_TimedSet(prepared.packed(uploaded)) for _ in range(copies)]
        cublas_sets = [_TimedSet(prepared.packed(uploaded)) for _ in range(copies)]
        bind = prepared.peer.gemm(runner, data, dt, out)  # the peer's GEMM of this case, given a set's operands

        def reference(timed: _TimedSet) -> None:
            if timed.call is None:
                timed.call = bind(timed.addresses())
            timed.call()

        for timed in kernel_sets:
            timed.call = prepared.kernel.launcher(timed.ops)
        # a first launch, untimed; a Python kernel's is watched by CUPTI where the timed ones will not be
        watched = prepared.kernel.watched and settings.timer != "cupti"
        first_call = kernel_sets[0].call
        l2 = PersistingL2(runner.stream.ptr) if prepared.kernel.file_code else None  # host code may set one
        if l2 is not None:
            l2.start()
        first = self.streams_of(first_call) if watched else first_call()
        runner.stream.synchronize()
        if l2 is not None:
            l2.after_call()
        if isinstance(first, tuple) and first:  # its work went elsewhere: no clock can time it (judge.case fails it)
            return TimingRun((), (), 0.0, "", settings.cold_cache, copies, 0, timer=settings.timer,
                             timer_asked=settings.timer, other_streams=first)  # fmt: skip
        refused = graphed(prepared, kernel_sets) if settings.timer == "graph" else None  # each launch a graph's replay
        graph_timer = None if refused is None else "events" if refused else "graph"  # the clock, where graphs asked

        # each timed launch's inputs written afresh (worker.fresh), where negating them commutes with the output
        fresh = None
        if prepared.epilogue.signs_commute:
            written = kernel_sets + ([] if settings.cold_cache else cublas_sets)  # the peer's too, where L2 is hot
            fresh = FreshInputs(prepared, self._fresh, (*uploaded, c_init), written)
        truth, prior = prepared.truth(), prepared.prior_bits()  # verification's truth; C's start uploaded again
        kernel_ids = {id(timed) for timed in kernel_sets}

        def prepare(timed: _TimedSet) -> None:
            if fresh is None or (settings.cold_cache and id(timed) not in kernel_ids):  # C restored, then the flush
                self.prepare(c_init, timed.ops.c.flat, settings.cold_cache)
            else:  # A, B and C's start written afresh (a peer's set: as they were), then the flush
                fresh.write(timed, id(timed) in kernel_ids)
                self.prepare(self._nothing, self._nothing, settings.cold_cache)

        def kernel(timed: _TimedSet) -> None:
            timed.call()

        def after(timed: _TimedSet) -> None:
            if l2 is not None:  # a persisting L2 window the call set: reset before the next launch, and said
                l2.after_call()
            if fresh is not None:
                fresh.launched(timed)

        def progressed() -> None:  # after each batch: its time limit renewed, the copies of its checked outputs judged
            progress()
            if fresh is not None:
                fresh.check(truth, prior)

        def stopped(wrong: TimedCheck, timer: str) -> TimingRun:  # a wrong timed output: no speed to claim (judge.case)
            return TimingRun((), (), time.perf_counter() - start, "", settings.cold_cache, copies, 0, timer=timer,
                             timer_note=refused or "", timer_asked=settings.timer, peer=prepared.peer.name,
                             fresh=True, checked=wrong.checked,
                             wrong_round=dataclasses.replace(wrong, replayed=timer == "graph"))  # fmt: skip

        state.timing()  # the GPU's state before, read beside the set-up
        start = time.perf_counter()
        run = (kernel_sets, cublas_sets, prepare, kernel, reference)
        watched = prepared.kernel.file_code  # its file's code runs in each launch: watched a batch at a time
        try:
            clock = self._clock(settings.timer)
            measured, rounds, note, timer = self.batches.timed(run, clock, settings, progressed, start,
                                                               watched=watched, after=after)  # fmt: skip
        except TimedOutputWrong as wrong:
            return stopped(wrong.check, graph_timer or settings.timer)
        state.timed()  # and after, read beside the last outputs' checks
        if graph_timer is not None:  # the graphs' replays, timed by the events; or the launches, saying why not
            note, timer = refused or "", graph_timer
        other = measured.other_streams
        kernel_s, reference_s, reason = measured.kernel_s, measured.reference_s, measured.reason
        events_k, events_r = measured.events_k, measured.events_r

        if other:  # let the work on its own streams finish before anything else reads or frees the buffers
            cp.cuda.runtime.deviceSynchronize()
        last_set, peer_set = kernel_sets[(rounds - 1) % copies], cublas_sets[(rounds - 1) % copies]
        judged = fresh is not None and not other  # the last launch's output judged by fresh.last, and not again
        if fresh is not None and judged and (wrong := fresh.last(truth, prior)) is not None:  # named as checked ones
            return stopped(wrong, timer)
        output = fresh.undone if fresh is not None else lambda timed: timed.ops.c  # a set's C, its signs undone
        reference_c, last_output, reference_output = output(peer_set), None, None  # both pass: the verdicts alone
        passes = prepared.output_passes
        if not passes(reference_c, truth) or not (judged or passes(output(last_set), truth)):
            last_output = prepared.judge_output(output(last_set), prior, truth)  # else both outputs' figures
            reference_output = prepared.judge_output(reference_c, prior, truth)
        runner.stream.synchronize()
        return TimingRun(
            kernel_s=tuple(kernel_s),
            reference_s=tuple(reference_s),
            elapsed_s=time.perf_counter() - start,
            stop_reason=str(reason),
            cold_cache=settings.cold_cache,
            input_copies=copies,
            flush_bytes=self.flush_bytes if settings.cold_cache else 0,
            last_output=last_output,
            reference_output=reference_output,
            timer=timer,
            timer_note=note,
            timer_asked=settings.timer,
            events_median_s=(float(np.median(events_k)), float(np.median(events_r))),
            other_streams=other,
            host_median_s=None if timer == "graph" else self._host_median(prepared, measured),  # a replay: no host code
            peer=prepared.peer.name,
            fresh=fresh is not None,
            checked=fresh.checked if fresh is not None else 0,
            persisting_l2=l2.found if l2 is not None else 0,
        )

    @staticmethod
    def _host_median(prepared: PreparedCase, measured: Measured) -> tuple[float, float] | None:
        """A Python kernel's median host time to make one launch call, and cuBLAS's: its own code's cost
        (Triton's launcher, torch's dispatch), which a caller pays too. None for a ``.cu`` kernel, whose call is the
        harness's own (CuPy's), not the kernel's."""
        if not prepared.kernel.host_timed or not measured.host_k:
            return None
        return float(np.median(measured.host_k)), float(np.median(measured.host_r))

    def streams_of(self, call: Callable[[], None]) -> tuple[int, ...] | str:
        """Run ``call`` (a Python kernel's launch) under CUPTI, between a prepare kernel and a mark kernel on the
        harness's stream, and wait for the whole device: the streams besides the harness's that its GPU work went to
        (CUPTI's ids, :func:`.cupti_clock.other_streams`), or why CUPTI cannot tell. ``call`` runs once in every case:
        where CUPTI cannot watch, unwatched."""
        clock, why = self._clock("cupti")
        if clock is None:
            call()
            return why
        self.ready()
        nothing = self.cp.empty(0, dtype=self.cp.uint8)
        try:
            clock.start()
        except Exception as exc:
            with contextlib.suppress(Exception):
                clock.abandon()
            call()
            return f"CUPTI failed: {type(exc).__name__}: {exc}"
        try:
            self.prepare(nothing, nothing, False)  # opens the span, on the harness's stream
            call()
            self._mark((1,), (1,), ())
            self.cp.cuda.runtime.deviceSynchronize()
        except BaseException:
            with contextlib.suppress(Exception):  # the launch's own error is the one to report
                clock.abandon()
            raise
        try:
            spans = clock.spans()
        except Exception as exc:
            return f"CUPTI failed: {type(exc).__name__}: {exc}"
        if len(spans) != 1:  # the prepare kernel's record opens the one span: without it, nothing was seen
            return f"CUPTI recorded {len(spans)} launch(es) of the harness's prepare kernel around the call, not 1"
        return clock.other_streams()

    def prepare(self, c_init: Any, c: Any, flush: bool) -> None:
        """Queue the prepare kernel on the current stream: C restored from ``c_init``, then (when ``flush``) every
        SM's instruction caches swept and L2 flushed by writing a buffer of twice its size. One kernel, so one CUPTI
        record, that also opens the next launch's span (docs/lab.md: research may call it)."""
        if flush and self._flush is None:  # allocated on the first flush, then kept
            self._flush = self.cp.zeros(self.flush_bytes, dtype=self.cp.uint8)
        flush_words = self.flush_bytes // 16 if flush else 0
        args = (c_init, c, np.uint64(c_init.nbytes), self._flush if flush else self._sink, np.uint64(flush_words))
        epoch = 0  # no sweep
        if flush:
            self._epoch = epoch = self._epoch % 0xFFFFFFFF + 1
        blocks = 4 * self.runner.sm_count
        self._prepare((blocks,), (PREPARE_THREADS,), (*args, self._sink, self._sm_epochs, np.uint32(epoch)))

    def set_up_cupti(self) -> None:
        """Set CUPTI's clock up now (else at its first use), where it works here; why not is kept for that use."""
        self._clock("cupti")

    def _clock(self, wanted: str) -> tuple[CuptiClock | None, str]:
        """CUPTI's clock when it was asked for and works here, else None and why not."""
        if wanted != "cupti":
            return None, ""
        if self._cupti is None:
            try:
                self._cupti = CuptiClock()
            except CuptiUnavailable as exc:
                self._cupti = str(exc)
        if isinstance(self._cupti, str):
            return None, self._cupti
        return self._cupti, ""
