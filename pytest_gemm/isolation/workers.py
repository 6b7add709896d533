"""A GPU worker process owned by the pytest process: started on demand, time-limited, replaced when lost.

One worker runs at a time, and cases run in it one after the other: a worker keeps its CUDA
context, its loaded kernels and its cuBLAS handle from case to case. It is replaced when a case
leaves it unusable: a sticky CUDA error, a time limit (the process group is killed), or its death.
The worker's stdout and stderr go to a file; what it printed while running a case (a kernel's
printf, a Python kernel's prints) comes back with that case's outcome.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import IO, Any

from ..records.outcome import Failure, Outcome
from ..records.plain import PlainError, from_plain, to_plain
from ..records.request import Request
from ..records.verdicts import FailureKind
from .protocol import receive, send

__all__ = ["WorkerPool", "describe_exit", "worker_environment"]

START_TIMEOUT = 180.0  # seconds a new worker may take to start: import CuPy, open the device, warm up
EXIT_WAIT = 5.0  # seconds a worker that closed its pipe may take to exit, before it is killed
START_FAILURES = 2  # consecutive failed starts after which the remaining cases fail at once
_OUTPUT_TAIL = 64 * 1024  # bytes of a worker's output kept per case


def worker_environment() -> dict[str, str]:
    """The environment a worker process starts with: this one's, with this process's import path."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # the worker imports what this process can (a test project's backend, a source checkout)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    return env


def describe_exit(code: int | None) -> str:
    """'signal 11 (SIGSEGV)' or 'exit code 1', as ``Popen.returncode`` reports it."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class _Process:
    """One running worker: the process, its two pipes and its output file."""

    def __init__(self, command: list[str], pin: str | None = None) -> None:
        req_read, self._req_write = os.pipe()
        self._rep_read, rep_write = os.pipe()
        self.output: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as the worker lives
        env = worker_environment()
        if pin is not None:  # the one GPU this worker may see (an entry of this process's own list)
            env["CUDA_VISIBLE_DEVICES"] = pin
        try:
            self.popen = subprocess.Popen(
                [*command, "--requests", str(req_read), "--replies", str(rep_write)],
                pass_fds=(req_read, rep_write),
                stdin=subprocess.DEVNULL,
                stdout=self.output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        except BaseException:
            for fd in (self._req_write, self._rep_read):
                os.close(fd)
            self.output.close()
            raise
        finally:
            os.close(req_read)
            os.close(rep_write)
        self.requests = Connection(self._req_write, readable=False)
        self.replies = Connection(self._rep_read, writable=False)
        self.pid = self.popen.pid

    def output_since(self, offset: int) -> str:
        """What the worker wrote from ``offset`` on (its last 64 KiB), read without moving the shared offset."""
        end = os.fstat(self.output.fileno()).st_size
        start = max(offset, end - _OUTPUT_TAIL)
        return os.pread(self.output.fileno(), end - start, start).decode("utf-8", errors="replace")

    def output_end(self) -> int:
        return os.fstat(self.output.fileno()).st_size

    def _kill_keeping_output(self, grace: float = 0.0) -> int | None:
        """Kill the worker and everything it started, close the pipes; its exit status.

        With ``grace``, a worker that is already on its way out (it closed its pipe) gets that long to
        exit by itself first, so that its own exit status is the one reported.
        """
        if grace:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=grace)
        # The group outlives its leader while its members (a kernel's child processes) run: kill them too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # a process stuck in the driver
            self.popen.wait(timeout=30)
        for conn in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                conn.close()
        return self.popen.returncode

    def kill(self) -> int | None:
        """Kill the worker and everything it started; its exit status."""
        code = self._kill_keeping_output()
        self.output.close()
        return code

    def kill_and_read(self, offset: int, grace: float = 0.0) -> tuple[int | None, str]:
        """Kill the worker (after ``grace`` seconds to exit by itself); its exit status and what it wrote from
        ``offset`` on."""
        code = self._kill_keeping_output(grace)
        output = self.output_since(offset)
        self.output.close()
        return code, output

    def stop(self) -> None:
        """Ask the worker to end; kill it if it does not."""
        try:
            send(self.requests, "stop")
            self.popen.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class WorkerPool:
    """One GPU worker (one process at a time; replaced whenever it is lost), pinned to ``pin`` when given."""

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
        self._process: _Process | None = None
        self._starting: _Process | None = None  # a worker being started (so that it can be interrupted)
        self._closed = False  # closed: no worker is started any more
        self._start_failures: list[Failure] = []  # consecutive failed starts
        self._lock = threading.RLock()  # one caller at a time: the thread serving it, or a probe
        self._no_compile: set[tuple] = set()  # variants whose compile timed out here: never compiled again

    @property
    def start_failed(self) -> bool:
        """The last start of a worker here failed (it never is a case's fault)."""
        return bool(self._start_failures)

    @property
    def gave_up(self) -> bool:
        """No worker will start here in this run: no device, or too many failed starts in a row."""
        return self.unavailable is not None or self.lost is not None or len(self._start_failures) >= START_FAILURES

    # -- the worker ------------------------------------------------------------------------------
    def _start(self) -> _Process | Failure:
        if self.lost is not None:
            message = f"the GPU was lost earlier in this run ({self.lost}); no GPU worker is started any more"
            return Failure(FailureKind.CUDA_ERROR, message, "start")
        if len(self._start_failures) >= START_FAILURES:  # a device or setup that cannot start a worker
            first = self._start_failures[0]
            details = (f"{len(self._start_failures)} starts in a row failed; no more are tried in this run",)
            return Failure(first.kind, first.message, "start", details + first.details)
        if self._closed:
            return Failure(FailureKind.INTERNAL, "the run is ending: no GPU worker is started", "start")
        try:
            process = _Process(self.command, self.pin)
        except OSError as exc:
            return self._failed_start(Failure(FailureKind.INTERNAL, f"cannot start a GPU worker: {exc}", "start"))
        self._starting = process
        try:
            return self._greet(process)
        finally:
            self._starting = None

    def _greet(self, process: _Process) -> _Process | Failure:
        """Wait for a new worker's hello."""
        try:
            if not process.replies.poll(START_TIMEOUT):
                process.kill()
                message = f"the GPU worker did not start within {START_TIMEOUT:g} s"
                return self._failed_start(Failure(FailureKind.TIMEOUT, message, "start"))
            kind, body = receive(process.replies)
        except (EOFError, OSError):
            code, output = process.kill_and_read(0, grace=EXIT_WAIT)
            detail = tuple(output.strip().splitlines()[-20:])
            return self._failed_start(Failure(FailureKind.WORKER_DIED, describe_exit(code), "start", detail))
        except BaseException:  # Ctrl-C while it starts: never leave it running
            process.kill()
            raise
        if kind == "hello":
            self.facts = self.facts or body["facts"]
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
        """Kill the current worker, if any; the next case starts a new one."""
        if self._process is not None:
            self._process.kill()
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
        for process in (self._process if self.running else None, self._starting):
            if process is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._process is not None:
                self._process.stop()
                self._process = None

    # -- one case --------------------------------------------------------------------------------
    def _limit(self, phase: str, request: Request) -> float:
        if phase == "compile":  # NVRTC's time is not the kernel's: a limit of its own (--gemm-compile-timeout)
            return request.compile_timeout
        if phase == "time" and request.timing is not None:
            return self.timeout + request.timing.max_time
        return self.timeout

    def run(self, request: Request) -> Outcome:
        """Run one request in the worker (starting one if needed); every fault comes back as an outcome."""
        with self._lock:
            return self._run(request)

    def _run(self, request: Request) -> Outcome:
        if os.name != "posix":
            return Outcome(skip="GPU workers need Linux (pipes passed to a child, process groups)")
        if self.unavailable is not None:
            return Outcome(skip=f"no CUDA device: {self.unavailable}")
        if self._process is not None and (request.fresh_worker or self._process.popen.poll() is not None):
            self._discard()  # asked for, or it died between cases (killed from outside, a kernel's thread)
        variant = (request.path, request.kernel, request.params, request.dtype)
        if variant in self._no_compile:  # a compile past the limit costs the limit once a variant, not once a case
            return Outcome(failure=_not_compiled_again(request))
        process = self._process or self._start()
        if isinstance(process, Failure):
            if self.unavailable is not None:
                return Outcome(skip=f"no CUDA device: {self.unavailable}")
            return Outcome(failure=process)
        offset = process.output_end()
        self.running = True
        try:
            outcome = self._exchange(process, request, offset)
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

    def _exchange(self, process: _Process, request: Request, offset: int) -> Outcome:
        try:
            send(process.requests, "run", to_plain(request))
        except OSError:
            return self._lost(process, offset, FailureKind.WORKER_DIED, "", "start")
        phase, start = "load", time.monotonic()
        while True:
            limit = self._limit(phase, request)
            remaining = start + limit - time.monotonic()
            try:
                ready = remaining > 0 and process.replies.poll(remaining)
                if not ready:
                    return self._lost(process, offset, FailureKind.TIMEOUT, f"timed out after {limit:g} s", phase)
                kind, body = receive(process.replies)
            except (EOFError, OSError):
                return self._lost(process, offset, FailureKind.WORKER_DIED, "", phase)
            if kind == "phase":  # a new phase, or progress in this one: its time limit starts again
                phase, start = str(body), time.monotonic()
            elif kind == "outcome":
                try:
                    return from_plain(Outcome, body)
                except PlainError as exc:
                    return self._lost(process, offset, FailureKind.INTERNAL, f"unreadable outcome ({exc})", phase)

    def _lost(self, process: _Process, offset: int, kind: FailureKind, message: str, phase: str) -> Outcome:
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


def _not_compiled_again(request: Request) -> Failure:
    """The failure of a case whose variant's compile timed out in an earlier case on this worker's GPU."""
    return Failure(
        FailureKind.TIMEOUT,
        f"timed out after {request.compile_timeout:g} s",
        "compile",
        (
            "an earlier case of this variant did not compile within the limit either; it is not compiled again in "
            "this run; --gemm-compile-timeout (ini gemm_compile_timeout) sets the limit",
        ),
    )
