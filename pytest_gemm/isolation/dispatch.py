"""One GPU worker per GPU, fed from one queue: the pytest process's way of using every GPU of a host.

pytest runs its items one after the other; the session submits the next few cases' requests ahead of the item
it is running, and each GPU's worker, served by a thread of its own here, takes the oldest request it may run
(a timed case whose baseline some of the GPUs recorded is left to them, unless its item waits for it or more
than LEFT_PER_GPU cases a GPU wait for them while another GPU has nothing to do; the request a GPU named next, its
inputs drawn there, is left to it until its item waits for it, worker.next_inputs). An item then waits for its
own case's result (moved to the front of the queue if no worker has taken it yet, where the first GPU free
takes it). So all GPUs verify and time at once while the reports, the gate, pytest-benchmark and every other
plugin see one ordinary pytest process, and no two cases ever run on one GPU at the same time (one worker per
GPU, one case per worker).

The first worker starts unpinned, on the first visible GPU, and says in its hello which devices it
sees; the others are then pinned, one per GPU (:func:`~.devices.plan_gpus`), each started with its
standby. A GPU whose worker cannot start (no device, or failed starts) is taken out of service while
another still serves, and its cases go to the others.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Collection
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ..records.case_record import gpu_identity
from ..records.outcome import Failure, Outcome
from ..records.request import Request
from ..records.verdicts import FailureKind
from .devices import DRIVER_DEVICE, Gpu, plan_gpus
from .workers import WorkerPool

__all__ = ["LEFT_PER_GPU", "Done", "GpuWorkers"]

#: cases left to the GPUs that recorded them, per GPU, beyond which a GPU with nothing else to do takes one: a case
#: held to its own GPU's record is worth a short wait, not a GPU idle while another works through a queue of them
LEFT_PER_GPU = 2


@dataclass(frozen=True)
class Done:
    """A case's outcome, with the GPU that ran it."""

    outcome: Outcome
    facts: dict[str, Any]  # that GPU's facts (its worker's hello); {} when no worker started
    gpu: Gpu | None  # None: one worker, not pinned (its device list unknown)
    wall_s: float  # from the worker taking the case to its outcome
    unavailable: str | None = None  # why that GPU's worker has no device, when it has none


@dataclass
class _Job:
    request: Request
    allowed: frozenset[int] | None  # the GPUs (indices) that may run it; None: any
    preferred: frozenset[int] | None = None  # the GPUs that take it while their item does not wait; None: any
    hurried: bool = False  # its item waits for it: any GPU it is allowed on takes it
    future: Future[Done] = field(default_factory=Future)
    next_request: Request | None = None  # when taken: the request queued next for the same GPU (worker.next_inputs)
    named: int | None = None  # the GPU that named it next (drawing its inputs): left to it until its item waits


class GpuWorkers:
    """The GPU workers of one pytest process: one per GPU it uses, each pinned to its GPU."""

    def __init__(
        self,
        backend: str,
        cubin_cache: str | None,
        timeout: float,
        *,
        wanted: int | None,
        worker_id: str | None,
        costly: bool = False,
    ) -> None:
        self._pool = lambda pin: WorkerPool(backend, cubin_cache, timeout, pin=pin)
        self._wanted, self._worker_id = wanted, worker_id
        self._costly = costly  # the first worker's standby starts beside it (the GPU backend's costly start, no xdist)
        self.imports: tuple[str, ...] = ()  # the libraries the run's cases may import in their workers (expect)
        self.gpus: list[Gpu] = []
        self.pools: list[WorkerPool] = []
        self.note: str | None = None  # said once: fewer GPUs than asked for, GPUs out of service
        self.retired: dict[int, str] = {}  # GPU index -> why it was taken out of service
        self._cond = threading.Condition()
        self._queue: list[_Job] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._capability: list[str] = []  # each GPU's compute capability ("9.0")
        self.identities: list[str] = []  # each GPU's gpu_identity, as its baseline records name it ('' if unknown)
        self._idle: set[int] = set()  # the GPUs (indices) waiting for a case they may take
        self._named: dict[int, _Job] = {}  # GPU index -> the job it last named next

    # -- the plan --------------------------------------------------------------------------------
    def _plan(self) -> None:
        """Start the first worker, unpinned, and pin one per GPU from the devices it sees."""
        if self.pools:
            return
        first = self._make(None)
        self.pools = [first]
        if self._costly and os.path.exists(DRIVER_DEVICE):  # beside it: elsewhere it would find no device either
            first.start_first()
        if os.name != "posix" or first.probe() is not None:
            return  # no device (every case skips with the reason), or no worker can start (each case says why)
        devices = (first.facts or {}).get("visible_devices") or []
        models = [str(d.get("name", "")) for d in devices if isinstance(d, dict)]
        if not models:
            return  # a backend that does not list its devices: one worker, on the first GPU
        self.gpus, self.note = plan_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), models, self._wanted, self._worker_id)
        arch = [str(d.get("capability", "")) for d in devices]  # each device's compute capability ("9.0")
        self._capability = [arch[g.index] for g in self.gpus]
        self.identities = [gpu_identity(devices[g.index]) for g in self.gpus]
        if self.gpus and self.gpus[0].index == 0:
            first.pin_to(self.gpus[0].entry)  # it runs there already; a replacement is pinned there too
            first.keep_standby()  # started now, while pytest compiles and verifies, not beside a timing
        else:  # an xdist worker whose GPU is another: this one goes
            first.close()
            self.pools = []
        self.pools = self.pools + [self._make(g.entry) for g in self.gpus[len(self.pools) :]]
        for gpu, pool in zip(self.gpus, self.pools, strict=True):  # with its standby: one started after it delays
            if pool is not first and first.standby and arch[gpu.index] == arch[0]:  # its first timing; CuPy's cache,
                pool.start_ahead()  # which the first worker (device 0) warmed, is per architecture
        self._start_threads()  # the other GPUs' threads greet their workers (or start them) while pytest goes on

    def _make(self, pin: str | None) -> WorkerPool:
        pool = self._pool(pin)
        pool.imports = self.imports
        return pool

    def expect(self, imports: Collection[str]) -> None:
        """The libraries the run's cases may import in their workers (``Request.imports``): each GPU's standbys import
        them once started, so that the first case to use one finds a worker that has (``WorkerPool._promote``)."""
        self.imports = tuple(sorted(set(imports)))
        for pool in self.pools:
            pool.imports = self.imports

    def _start_threads(self) -> None:
        with self._cond:
            if self._threads or self._closed:
                return
            for i in range(len(self.pools)):
                thread = threading.Thread(target=self._serve, args=(i,), name=f"pytest-gemm GPU {i}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def probe(self) -> str | None:
        """Plan the GPUs (starting the first worker): None when a device is usable, else why not."""
        self._plan()
        return self.pools[0].probe()

    @property
    def unavailable(self) -> str | None:
        """Why there is no device at all (None when some GPU serves)."""
        if not self.pools or not all(pool.unavailable for pool in self.pools):
            return None
        return self.pools[0].unavailable

    @property
    def facts(self) -> dict[str, Any] | None:
        """The first GPU's facts (the run's GPU, when it has one)."""
        return next((pool.facts for pool in self.pools if pool.facts), None)

    def queue_state(self) -> tuple[int, dict[str, str]]:
        """How many cases were sent ahead and wait in the queue (shared by the GPUs), and each GPU's state, by
        label in GPU order: "busy" (its thread holds a case, its worker starting included), "out" (taken out
        of service) or ""."""
        with self._cond:
            queued = len(self._queue)
            threads = list(self._threads)
        state = {}
        for i, gpu in enumerate(self.gpus):
            held = i < len(threads) and getattr(threads[i], "job", None) is not None
            state[gpu.label] = "out" if i in self.retired else "busy" if held else ""
        return queued, state

    def capable(self, runs_on: Any) -> list[Gpu]:
        """The GPUs for which ``runs_on(capability)`` holds (a kernel pinned to an architecture)."""
        self._plan()
        return [g for g, cap in zip(self.gpus, self._capability, strict=True) if runs_on(cap)]

    # -- cases -----------------------------------------------------------------------------------
    def submit(
        self, request: Request, allowed: Collection[int] | None = None, preferred: Collection[int] | None = None
    ) -> Future[Done]:
        """Queue a case for one of the ``allowed`` GPUs (any, when None); its future holds the outcome. A case with
        ``preferred`` GPUs is left to them, unless its item waits for it (:meth:`hurry`) or more than LEFT_PER_GPU
        cases a GPU are left to them while another GPU has nothing to do (:meth:`_suits`)."""
        self._plan()
        job = _Job(
            request,
            frozenset(allowed) if allowed is not None else None,
            frozenset(preferred) if preferred else None,
        )
        self._start_threads()
        with self._cond:
            if self._closed:
                failure = Failure(FailureKind.INTERNAL, "the run is ending: the case was not run", "start")
                job.future.set_result(Done(Outcome(failure=failure), {}, None, 0.0))
                return job.future
            if self._threads and len(self.retired) == len(self.pools):
                job.future.set_exception(RuntimeError(f"no GPU worker serves any more: {self.retired}"))
                return job.future
            self._queue.append(job)
            self._cond.notify_all()
        return job.future

    def hurry(self, future: Future[Done]) -> None:
        """Move a queued case to the front: its item is waiting for it now."""
        with self._cond:
            for i, job in enumerate(self._queue):
                if job.future is future:
                    job.hurried = True
                    self._queue.insert(0, self._queue.pop(i))
                    self._cond.notify_all()
                    return

    def drop(self, future: Future[Done]) -> None:
        """A case whose item will not use it: cancel it if queued; kill its worker if it is running."""
        if future.cancel():
            with self._cond:
                self._queue = [job for job in self._queue if job.future is not future]
            return
        if future.running():
            for i, pool in enumerate(self.pools):
                if getattr(self._threads[i], "job", None) is future and pool.running:
                    pool.interrupt(final=False)

    def drain(self) -> None:
        """Cancel every queued case and wait for the running ones: the GPUs are idle when this returns."""
        with self._cond:
            for job in self._queue:
                job.future.cancel()
            self._queue.clear()
            running = [getattr(t, "job", None) for t in self._threads]
        for future in running:
            if future is not None:
                future.exception()  # waits; its outcome is its item's, if any

    def _may_run(self, index: int, job: _Job) -> bool:
        if job.allowed is None or index in job.allowed:
            return True
        return not any(i not in self.retired for i in job.allowed)  # its GPUs are out of service: any may

    def _suits(self, index: int, job: _Job) -> bool:
        """Whether GPU ``index`` takes the job now: one its item waits for; not one another GPU named next; one it
        prefers or any GPU may take; one left to other GPUs when none of them is idle and more than LEFT_PER_GPU cases
        a GPU are left to them."""
        if job.hurried:
            return True
        if job.named not in (None, index) and job.named not in self.retired:
            return False  # its inputs are drawn on that GPU (worker.next_inputs)
        if job.preferred is None or index in job.preferred:
            return True
        theirs = job.preferred - self.retired.keys()
        if not theirs:
            return True
        if theirs & self._idle:
            return False  # one of them takes it now
        left = sum(1 for other in self._queue if other.preferred is not None and other.preferred & theirs)
        return left > LEFT_PER_GPU * len(theirs)

    def _next(self, index: int) -> _Job | None:
        with self._cond:
            while True:
                if self._closed or index in self.retired:
                    self._idle.discard(index)
                    return None
                job = next((job for job in self._queue if self._may_run(index, job) and self._suits(index, job)), None)
                if job is None:
                    self._idle.add(index)
                    self._cond.wait()
                    continue
                self._idle.discard(index)
                self._queue.remove(job)
                job.next_request = self._name_next(index)
                if self._idle:
                    self._cond.notify_all()  # this GPU is busy now: an idle one may take what was left to it
                if job.future.running() or job.future.set_running_or_notify_cancel():  # running: given back
                    threading.current_thread().job = job.future  # type: ignore[attr-defined]
                    return job

    def _name_next(self, index: int) -> Request | None:
        """The request queued next for GPU ``index`` (worker.next_inputs), left to it from now on unless its item waits
        for it (:meth:`_suits`); the one it named before is left to any GPU again. None for one that asks for a fresh
        worker (the inputs would be drawn in a worker that will not run it), or one left to other GPUs (this one takes
        it only while they are busy)."""
        previous = self._named.pop(index, None)
        if previous is not None and previous.named == index:
            previous.named = None
        job = next((job for job in self._queue if self._may_run(index, job) and self._suits(index, job)), None)
        if job is None or job.request.fresh_worker or (job.preferred is not None and index not in job.preferred):
            return None
        job.named, self._named[index] = index, job
        return job.request

    def _retire(self, index: int, job: _Job | None, why: str) -> bool:
        """Take a GPU whose worker cannot start out of service, giving its case back; False for the last one."""
        with self._cond:
            if self._closed:  # the run ended while its worker started: killed by close(), not out of service
                if job is not None and not job.future.done():
                    job.future.set_exception(RuntimeError("the run ended before this case ran"))
                return True
            serving = [i for i in range(len(self.pools)) if i not in self.retired and i != index]
            if not serving:
                return False
            self.retired[index] = why
            self.pools[index].interrupt()  # its standbys, started ahead, hold the GPU no longer
            if job is not None:
                self._queue.insert(0, job)
            self._cond.notify_all()
            return True

    def _serve(self, index: int) -> None:
        """A GPU's thread: serve cases until the run ends or the GPU is taken out of service."""
        try:
            self._serve_cases(index)
        except BaseException as exc:  # a fault of this code, never of a case: the others take over
            with self._cond:
                self.retired[index] = f"internal error: {type(exc).__name__}: {exc}"
                if all(i in self.retired for i in range(len(self.pools))):  # no GPU serves: say so to each case
                    for job in self._queue:
                        if job.future.set_running_or_notify_cancel():
                            job.future.set_exception(exc)
                    self._queue.clear()
                self._cond.notify_all()

    def _serve_cases(self, index: int) -> None:
        pool, gpu = self.pools[index], self.gpus[index] if self.gpus else None
        thread = threading.current_thread()
        thread.job = None  # type: ignore[attr-defined]
        if len(self.pools) > 1:  # start its worker before taking a case: a GPU that cannot start takes none
            why = pool.probe()
            if why is not None and self._retire(index, None, why):
                return
        while (job := self._next(index)) is not None:
            start = time.perf_counter()
            try:
                outcome = pool.run(job.request, job.next_request)
                if (pool.gave_up or pool.start_failed) and self._retire(index, job, pool.unavailable or _why(outcome)):
                    return
                done = Done(outcome, dict(pool.facts or {}), gpu, time.perf_counter() - start, pool.unavailable)
                job.future.set_result(done)
            except BaseException as exc:  # never leave an item waiting for ever
                if not job.future.done():
                    job.future.set_exception(exc)
                raise
            finally:
                thread.job = None  # type: ignore[attr-defined]

    def close(self, wait: bool = True) -> None:
        """Stop taking cases, cancel the queued ones, and stop every worker (killing any case still running); without
        ``wait``, the workers are asked to end and a later close waits for them."""
        with self._cond:
            self._closed = True
            for job in self._queue:
                job.future.cancel()
            self._queue.clear()
            self._cond.notify_all()
        for pool in self.pools:
            pool.interrupt()  # a case queued ahead that no item waits for now (-x, Ctrl-C), or a worker starting
        for thread in self._threads:
            thread.join(timeout=60)
        for pool in self.pools:
            if wait:
                pool.close()
            else:
                pool.ask_to_stop()


def _why(outcome: Outcome) -> str:
    failure = outcome.failure
    return f"{failure.kind}: {failure.message}" if failure is not None else "its worker cannot start"
