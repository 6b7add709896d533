"""Timed batches of rounds on the harness's stream (used by :mod:`.timer`): a batch queues its pairs of launches
between CUDA events (behind the spin kernel, when queuing is slow), waits, and reads the events and, when CUPTI times
it, CUPTI's records; batches repeat until the stopping rule holds. Part of the worker package.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..judge.stats import StopRule, clock_step, median_interval, ratio_interval, step_floors
from ..records.request import TimingSettings
from .cupti_clock import CuptiClock
from .integrity import HARNESS
from .rounds import (
    BATCH_DEVICE_S,
    CUPTI_BATCH_DEVICE_S,
    FIRST_CUPTI_BATCH,
    HOST_TIMED_ROUNDS,
    MAX_BATCH,
    MAX_CUPTI_BATCH,
    MAX_SPIN_S,
    WARM_ROUNDS,
    Batch,
    Measured,
    disagree,
    read_spans,
)

__all__ = ["Batches"]


class Batches:
    """The events a batch's launches are bracketed by, and the harness's kernels around them: the mark that closes
    CUPTI's last span, the spin that keeps the GPU busy while Python queues."""

    def __init__(self, cp: Any, stream: Any, mark: Any, spin: Any) -> None:
        self.cp, self.stream, self._mark, self._spin = cp, stream, mark, spin
        self._events = [cp.cuda.Event() for _ in range(4 * MAX_CUPTI_BATCH)]

    def timed(
        self,
        run: tuple[Any, ...],
        clock: tuple[CuptiClock | None, str],
        settings: TimingSettings,
        progress: Callable[[], None],
        start: float,
        *,
        watched: bool,
        after: Callable[[Any], None] | None,
    ) -> tuple[Measured, int, str, str]:
        """A case's warm-up, then its timed batches by CUPTI's ``clock`` (or the events, where there is none, with
        why, or CUPTI's times disagree with them): what was measured, the rounds timed, why CUPTI's times were not
        used, and the timer whose times they are. ``progress``: called after each timed batch whose work stayed on
        the harness's stream (a warm-up's outputs wait for the first timed batch's check)."""
        # Warm-up, not part of the results: two rounds absorb first-call costs (cuBLAS's heuristics and
        # workspace), then a round for each input set (each met once before it is timed; at least WARM_ROUNDS, more
        # where ``warmup_s`` asks for more device time, at most MAX_BATCH) measure the device and host cost of a
        # round, which size the batches and the spin (by the events: a round's whole cost).
        warm = self.batch(2, 0.0, *run, 0, None, watched=watched, after=after)
        per_round = (sum(warm.events_k) + sum(warm.events_r)) / 2
        extra = min(MAX_BATCH, max(len(run[0]), WARM_ROUNDS, math.ceil(settings.warmup_s / max(per_round, 1e-9))))
        warm = self.batch(extra, 0.0, *run, 0, None, watched=watched, after=after)
        per_round = (sum(warm.events_k) + sum(warm.events_r)) / extra
        cost = (per_round, warm.host_s / extra)  # the host's with each peer set's first call in it: sizes the spin
        cupti, note = clock
        measured = None
        if cupti is not None:
            measured = self.measure(cupti, run, cost, settings, progress, start, 0, watched=watched, after=after)
            note = measured.problem or disagree(measured.kernel_s, measured.events_k)
            note = note or disagree(measured.reference_s, measured.events_r)
        rounds = measured.rounds if measured is not None else 0
        other = measured.other_streams if measured is not None else ()  # the case fails for it (judge.case)
        if (measured is None or note) and not other:  # the events alone, timed again as they are without CUPTI
            measured = self.measure(None, run, cost, settings, progress, start, rounds, watched=watched, after=after)
            rounds += measured.rounds
        return measured, rounds, note, "events" if cupti is None or note else "cupti"

    def measure(
        self,
        clock: CuptiClock | None,
        run: tuple[Any, ...],
        cost: tuple[float, float],
        settings: TimingSettings,
        progress: Callable[[], None],
        start: float,
        first: int,
        *,
        watched: bool = False,
        after: Callable[[Any], None] | None = None,
    ) -> Measured:
        """Timed batches until the stopping rule holds, by CUPTI's clock when ``clock`` is given (stopping at the
        first batch it cannot time, with why) or by the events (behind the spin where queuing is slow)."""
        per_round, host_round = cost
        if clock is not None:
            batch = max(1, min(MAX_CUPTI_BATCH, round(CUPTI_BATCH_DEVICE_S / max(per_round, 1e-9))))
            # CUPTI's times are the work's own durations: they do not see the host; its events are only a cross-check
            spin = 0.0
        else:
            batch = max(1, min(MAX_BATCH, round(BATCH_DEVICE_S / max(per_round, 1e-9))))
            # The spin keeps the GPU busy while Python queues the batch, so that no event waits for the host;
            # only needed when queuing is slow.
            spin = min(MAX_SPIN_S, 1.5 * host_round * batch) if host_round > per_round / 2 else 0.0
        stop = StopRule(target=settings.noise, min_samples=settings.min_samples, max_time=settings.max_time)
        out = Measured()
        # With CUPTI, batches start small and double: most cases converge within a few hundred pairs, and a case
        # that converges in 40 should not pay for 256.
        size = min(batch, FIRST_CUPTI_BATCH) if clock is not None else batch
        while not out.reason:
            done = self.batch(size, spin, *run, first + out.rounds, clock, watched=watched, after=after)
            if not done.problem:  # its outputs checked (its work all on the harness's stream), its time limit renewed
                progress()
            out.rounds += size
            size = min(batch, 2 * size)
            out.events_k += done.events_k
            out.events_r += done.events_r
            out.host_k += done.host_k
            out.host_r += done.host_r
            if done.problem:
                out.problem = out.reason = done.problem
                out.other_streams = done.other_streams
                break
            out.kernel_s += done.kernel_s if clock is not None else done.events_k
            out.reference_s += done.reference_s if clock is not None else done.events_r
            k, r = out.kernel_s, out.reference_s
            intervals = [median_interval(k), median_interval(r), ratio_interval(k, r)]
            # CUPTI's times are whole steps of its clock: no interval narrower than a step is asked for
            floors = step_floors(clock_step(k + r), intervals[0].median, intervals[1].median) if clock else ()
            out.reason = str(stop.verdict(intervals, time.perf_counter() - start, floors) or "")
        return out

    def batch(
        self,
        rounds: int,
        spin_s: float,
        kernel_sets: list[Any],
        cublas_sets: list[Any],
        prepare: Callable[[Any], None],
        kernel: Callable[[Any], None],
        reference: Callable[[Any], None],
        first: int,
        clock: CuptiClock | None,
        *,
        watched: bool = False,
        after: Callable[[Any], None] | None = None,
    ) -> Batch:
        """Queue ``rounds`` timed pairs (behind a spin of ``spin_s``), wait, and read the events (and CUPTI's
        records of each launch, when ``clock`` is given); ``watched``: the batch's launches run a kernel file's code,
        watched as one before anything is read (:mod:`.integrity`); ``after``: called with each kernel launch's set
        once its closing event is queued (harness work that is not timed: a copy of its output to check)."""
        cp, stream, ev = self.cp, self.stream, self._events
        if rounds > MAX_CUPTI_BATCH:  # the events are allocated for this many
            raise ValueError(f"a batch of {rounds} rounds is over the {MAX_CUPTI_BATCH} the timer has events for")
        host: tuple[list[float], list[float]] = ([], [])  # each launch call's time on the host
        try:
            with HARNESS.watching() if watched else contextlib.nullcontext():  # its check before the host's clock
                host0 = time.perf_counter()
                if clock is not None:
                    clock.start()
                if spin_s > 0:
                    self._spin((1,), (1,), (np.uint64(int(spin_s * 1e9)),))
                for i in range(rounds):
                    j = (first + i) % len(kernel_sets)
                    for slot, (ops, launch) in enumerate(((kernel_sets[j], kernel), (cublas_sets[j], reference))):
                        prepare(ops)  # for CUPTI, also opens the launch's span
                        ev[4 * i + 2 * slot].record(stream)
                        called = time.perf_counter()
                        launch(ops)
                        if i < HOST_TIMED_ROUNDS:  # later, a launch call may wait for room in the launch queue
                            host[slot].append(time.perf_counter() - called)
                        ev[4 * i + 2 * slot + 1].record(stream)
                        if after is not None and slot == 0:
                            after(ops)
                if clock is not None:
                    self._mark((1,), (1,), ())  # closes the last launch's span
                host_s = time.perf_counter() - host0
                stream.synchronize()  # the closing mark too, before CUPTI's records are read
        except BaseException:
            if clock is not None:
                with contextlib.suppress(Exception):  # the launch's own error is the one to report
                    clock.abandon()  # a launch failed: collect nothing more
            raise
        done = Batch(
            events_k=[cp.cuda.get_elapsed_time(ev[4 * i], ev[4 * i + 1]) / 1e3 for i in range(rounds)],
            events_r=[cp.cuda.get_elapsed_time(ev[4 * i + 2], ev[4 * i + 3]) / 1e3 for i in range(rounds)],
            host_s=host_s,
            host_k=host[0],
            host_r=host[1],
        )
        if clock is not None:
            try:
                seen = clock.spans()
            except Exception as exc:  # CUPTI failed: the events take over, saying why
                done.problem = f"CUPTI failed: {type(exc).__name__}: {exc}"
                return done
            read_spans(done, seen, rounds)
            done.other_streams = clock.other_streams()
            if done.other_streams:  # the launches' work is not where the harness times it: no clock can time it
                ids = ", ".join(map(str, done.other_streams))
                done.problem = f"GPU work launched on stream(s) {ids} (CUPTI's ids), besides the harness's stream"
        return done
