"""A GPU worker process owned by the pytest process: started on demand, time-limited, replaced when lost.

One worker runs cases at a time, one after the other: a worker keeps its CUDA context, its loaded
kernels and its cuBLAS handle from case to case. It is replaced when a case leaves it unusable: a
sticky CUDA error, a time limit (the process group is killed), or its death. The worker's stdout and
stderr go to a file; what it printed while running a case (a kernel's printf, a Python kernel's
prints) comes back with that case's outcome.

Where a worker's start is costly (the GPU worker's: CuPy's import, a CUDA context, the warm-up), the
pool keeps a standby worker started beside the one that runs cases, so that a replaced worker costs
the case that lost it and nothing more: the next case runs on the standby, and a new standby starts.
Where workers are lost faster than one starts (a kernel that crashes at every shape), it keeps more,
up to :data:`~.standby.STANDBY_MOST` (:mod:`.standby`).
Nothing of the pool's runs beside a case's timing: a worker asks before it times
(``serve.py``), and the pool answers once the standby has finished starting and the workers it killed
have gone (docs/architecture.md#the-boundary).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from typing import Any

from ..records.outcome import Failure, Outcome, not_compiled_again
from ..records.plain import PlainError, from_plain, to_plain
from ..records.request import Request
from ..records.verdicts import FailureKind
from .process import Dying, WorkerProcess, describe_exit
from .protocol import TIME_PHASE, receive, send
from .standby import START_TIMEOUT, Standbys

__all__ = ["WorkerPool"]

EXIT_WAIT = 5.0  # seconds a worker that closed its pipe may take to exit, before it is killed
START_FAILURES = 2  # consecutive failed starts after which the remaining cases fail at once
STANDBY_FAILURES = 2  # standbys in a row that could not start, after which none is kept (a new worker starts as before)


class WorkerPool(Standbys):
    """One GPU worker that runs cases (replaced whenever it is lost) and its standbys, pinned to ``pin`` when
    given."""

    def __init__(self, backend: str, cubin_cache: str | None, timeout: float, pin: str | None = None) -> None:
        self.command = [sys.executable, "-m", "pytest_gemm.worker", "--backend", backend]
        if cubin_cache:
            self.command += ["--cubin-cache", cubin_cache]
        self.timeout = timeout
        self.pin = pin  # the CUDA_VISIBLE_DEVICES entry of its GPU, or None (the first visible one)
        self.running = False  # a case is in the worker now
        self.facts: dict[str, Any] | None = None
        self.unavailable: str | None = None
        self.lost: str | None = None  # the GPU worked earlier in this run, then a worker found no device
        self._process: WorkerProcess | None = None
        self._starting: WorkerProcess | None = None  # a worker being started (so that it can be interrupted)
        self._interrupted = False  # interrupt() was called during this case: no other worker is started for it
        self.standby = False  # the backend's start is costly (its hello says so): a standby is kept ready
        self.standbys = 1  # how many are kept: one more each time a case needed a standby that had not started yet
        self._standby_failed = 0  # standbys in a row that could not start
        self._standby: list[tuple[WorkerProcess, str | None]] = []  # started ahead, or waiting in turn, with their pins
        self._dying = Dying()  # killed, not yet gone
        self._closed = False  # closed: no worker is started any more
        self._start_failures: list[Failure] = []  # consecutive failed starts
        self._lock = threading.RLock()  # one caller at a time: the thread serving it, or a probe
        self._no_compile: set[tuple] = set()  # variants whose compile timed out here: never compiled again
        self.imports: tuple[str, ...] = ()  # libraries its standbys import once started (:meth:`_promote`)

    @property
    def start_failed(self) -> bool:
        """The last start of a worker here failed (it never is a case's fault)."""
        return bool(self._start_failures)

    @property
    def gave_up(self) -> bool:
        """No worker will start here in this run: no device, or too many failed starts in a row."""
        return self.unavailable is not None or self.lost is not None or len(self._start_failures) >= START_FAILURES

    # -- the worker ------------------------------------------------------------------------------
    def _start(self, fresh: bool = False) -> WorkerProcess | Failure:
        if self.lost is not None:
            message = f"the GPU was lost earlier in this run ({self.lost}); no GPU worker is started any more"
            return Failure(FailureKind.CUDA_ERROR, message, "start")
        if len(self._start_failures) >= START_FAILURES:  # a device or setup that cannot start a worker
            first = self._start_failures[0]
            details = (f"{len(self._start_failures)} starts in a row failed; no more are tried in this run",)
            return Failure(first.kind, first.message, "start", details + first.details)
        if self._closed:
            return Failure(FailureKind.INTERNAL, "the run is ending: no GPU worker is started", "start")
        standby = self._take_standby(fresh)
        if standby is not None:
            greeted = self._greet_interruptibly(standby)
            self._standby_failed = 0 if isinstance(greeted, WorkerProcess) else self._standby_failed + 1
            if isinstance(greeted, WorkerProcess) or self.unavailable is not None or self.lost is not None:
                return greeted
            if self._closed or self._interrupted:  # it was killed to end the run, or to drop the case
                return Failure(FailureKind.INTERNAL, "the run is ending: no GPU worker is started", "start")
            if self.facts is None:  # a first worker started ahead: a failed start, and the next try takes the next
                return greeted
            self._start_failures.pop()  # a standby that could not start: a new worker is tried, and its failure counts
            self.standby = self.standby and self._standby_failed < STANDBY_FAILURES
        try:
            process = WorkerProcess(self.command, self.pin)
        except OSError as exc:
            return self._failed_start(Failure(FailureKind.INTERNAL, f"cannot start a GPU worker: {exc}", "start"))
        return self._greet_interruptibly(process)

    def _greet_interruptibly(self, process: WorkerProcess) -> WorkerProcess | Failure:
        self._starting = process
        try:
            return self._greet(process)
        finally:
            self._starting = None

    def _greet(self, process: WorkerProcess) -> WorkerProcess | Failure:
        """Wait for a new worker's hello, and for what it imports ahead (a case sent before would wait for that within
        its own time limit)."""
        try:
            first = process.first_message(START_TIMEOUT)
            if first is None:
                process.kill()
                message = f"the GPU worker did not start within {START_TIMEOUT:g} s"
                return self._failed_start(Failure(FailureKind.TIMEOUT, message, "start"))
            kind, body = first
            if kind == "hello" and not process.ready(process.left_of(START_TIMEOUT)):
                process.kill()
                message = f"the GPU worker did not import {', '.join(process.imports)} within {START_TIMEOUT:g} s"
                return self._failed_start(Failure(FailureKind.TIMEOUT, message, "start"))
            if kind == "hello" and process.gone:  # it went after its hello, while it imported
                raise EOFError
        except (EOFError, OSError):
            code, output = process.kill_and_read(0, grace=EXIT_WAIT)
            detail = tuple(output.strip().splitlines()[-20:])
            return self._failed_start(Failure(FailureKind.WORKER_DIED, describe_exit(code), "start", detail))
        except BaseException:  # Ctrl-C while it starts: never leave it running
            process.kill()
            raise
        if kind == "hello":
            self.facts = self.facts or body["facts"]
            self.standby = bool(body.get("standby"))
            self._process = process
            self._start_failures.clear()
            return process
        process.stop()
        if kind == "unavailable" and self.facts is not None:  # a worker of this pool had a device before
            self.lost = str(body)
            return Failure(FailureKind.CUDA_ERROR, f"the GPU was lost during the run: {self.lost}", "start")
        if kind == "unavailable":
            self.unavailable = str(body)
            return Failure(FailureKind.INTERNAL, self.unavailable, "start")
        if "cudaError" in str(body) or "CUDA_ERROR" in str(body):  # the device failed, not pytest-gemm
            message = (
                f"the GPU worker could not start: {body} (the GPU may have stopped working: nvidia-smi, and the "
                "Xid lines of the kernel log, say more)"
            )
            return self._failed_start(Failure(FailureKind.CUDA_ERROR, message, "start"))
        return self._failed_start(Failure(FailureKind.INTERNAL, f"the GPU worker could not start: {body}", "start"))

    def _failed_start(self, failure: Failure) -> Failure:
        self._start_failures.append(failure)
        return failure

    def _discard(self) -> None:
        """Kill the current worker, if any; the next case runs on the standby, or starts a new one."""
        if self._process is not None:
            self._dying.add(self._process)
            self._process = None

    def probe(self) -> str | None:
        """Start a worker now: None when it has a device, else why not (no device, or it cannot start)."""
        with self._lock:
            if self.unavailable is not None:
                return self.unavailable
            process = self._process or self._start()
            if isinstance(process, Failure):
                return self.unavailable or f"{process.kind}: {process.message}"
            return None

    def interrupt(self, final: bool = True) -> None:
        """From another thread: kill the worker running a case or starting, with its process group (the thread
        serving it sees its pipe close and cleans up); when ``final`` (the run is ending), start no more."""
        self._closed = self._closed or final
        self._interrupted = True
        standby = [process for process, _ in self._standby] if final else []
        for process in (self._process if self.running else None, self._starting, *standby):
            if process is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)

    def ask_to_stop(self) -> None:
        """Ask its worker to end, without waiting for it (:meth:`close` then waits): its exit, the CUDA context's
        teardown (about 1.3 s on an H200), goes on while the run writes its reports."""
        with self._lock:
            self._closed = True
            if self._process is not None:
                self._process.ask_to_stop()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._process is not None:
                self._process.stop()
                self._process = None
            for process, _ in self._standby:
                process.stop()
            self._standby = []
            self._dying.reap(wait=True)

    # -- one case --------------------------------------------------------------------------------
    def _limit(self, phase: str, request: Request) -> float:
        if phase == "compile":  # NVRTC's time is not the kernel's: a limit of its own (--gemm-compile-timeout)
            return request.compile_timeout
        if phase == TIME_PHASE and request.timing is not None:
            return self.timeout + request.timing.max_time
        return self.timeout

    def run(self, request: Request, next_request: Request | None = None) -> Outcome:
        """Run one request in the worker (starting one if needed); every fault comes back as an outcome. A case that
        ran short of the GPU's memory while standbys or killed workers held some runs once more without them.
        ``next_request``: the request likely to come next, named to the worker first (it draws its inputs meanwhile)."""
        with self._lock:
            self._interrupted = False
            shared = bool(self._standby or self._dying)
            outcome = self._run(request, next_request=next_request)
            short = outcome.failure is not None and outcome.failure.short_of_memory
            if shared and short and not (self._closed or self._interrupted):
                self._alone()
                outcome = self._run(request, alone=True)
            return outcome

    def _run(self, request: Request, alone: bool = False, next_request: Request | None = None) -> Outcome:
        if os.name != "posix":
            return Outcome(skip="GPU workers need Linux (pipes passed to a child, process groups)")
        if self.unavailable is not None:
            return Outcome(skip=f"no CUDA device: {self.unavailable}")
        if self._process is not None and (request.fresh_worker or self._process.popen.poll() is not None):
            self._discard()  # asked for, or it died between cases (killed from outside, a kernel's thread)
        variant = (request.path, request.kernel, request.params, request.dtype)
        if variant in self._no_compile:  # a compile past the limit costs the limit once a variant, not once a case
            return Outcome(failure=not_compiled_again(request.compile_timeout))
        if request.imports:
            self._promote(request.imports)
        process = self._process or self._start(request.fresh_worker)
        if isinstance(process, Failure):
            if self.unavailable is not None:
                return Outcome(skip=f"no CUDA device: {self.unavailable}")
            return Outcome(failure=process)
        if not alone:
            self.keep_standby()
        offset = process.output_end()
        process.served = self.running = True
        try:
            outcome = self._exchange(process, request, offset, next_request)
        except BaseException:
            self._discard()
            raise
        finally:
            self.running = False
        output = process.output_since(offset) if self._process is process else outcome.output
        outcome = replace(outcome, output=output, worker=process.pid)
        failure = outcome.failure
        if failure is not None and failure.kind == FailureKind.TIMEOUT and failure.phase == "compile":
            self._no_compile.add(variant)
        if outcome.failure is not None and outcome.failure.replace_worker and self._process is process:
            self._discard()
        return outcome

    def _exchange(self, process: WorkerProcess, request: Request, offset: int, next_request: Request | None) -> Outcome:
        try:
            if next_request is not None:
                send(process.requests, "next", to_plain(next_request))
            send(process.requests, "run", to_plain(request))
        except OSError:
            return self._lost(process, offset, FailureKind.WORKER_DIED, "", "start")
        phase, start = "load", time.monotonic()
        while True:
            limit = self._limit(phase, request)
            remaining = start + limit - time.monotonic()
            try:
                waiting = remaining > 0 and process.replies.poll(remaining)
                if not waiting:
                    return self._lost(process, offset, FailureKind.TIMEOUT, f"timed out after {limit:g} s", phase)
                kind, body = receive(process.replies)
            except (EOFError, OSError):
                return self._lost(process, offset, FailureKind.WORKER_DIED, "", phase)
            if kind == "phase":  # a new phase, or progress in this one: its time limit starts again
                if body == TIME_PHASE != phase:  # the worker waits for the word to time
                    self._quiet()
                    try:
                        send(process.requests, "go")
                    except OSError:
                        return self._lost(process, offset, FailureKind.WORKER_DIED, "", TIME_PHASE)
                phase, start = str(body), time.monotonic()
            elif kind != "outcome":
                process.note(kind, body)  # between the phases' messages: what it said of itself (``imported``)
            else:
                try:
                    return from_plain(Outcome, body)
                except PlainError as exc:
                    return self._lost(process, offset, FailureKind.INTERNAL, f"unreadable outcome ({exc})", phase)

    def _lost(self, process: WorkerProcess, offset: int, kind: FailureKind, message: str, phase: str) -> Outcome:
        """The worker cannot go on: kill it (if it still runs), and say why with what it printed."""
        code, output = process.kill_and_read(offset, grace=EXIT_WAIT if kind == FailureKind.WORKER_DIED else 0.0)
        self._process = None
        if kind == FailureKind.WORKER_DIED:
            message = describe_exit(code)
        details: tuple[str, ...] = ()
        if kind == FailureKind.TIMEOUT:
            option = (
                "compile-timeout (ini gemm_compile_timeout)" if phase == "compile" else "timeout (ini gemm_timeout)"
            )
            details = (f"the worker was killed and replaced; --gemm-{option} sets the limit",)
        return Outcome(failure=Failure(kind, message, phase, details, replace_worker=True), output=output)
