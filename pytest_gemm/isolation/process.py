"""One GPU worker process: started with two pipes and an output file, killed with everything it started.

:class:`~.workers.WorkerPool` decides when a worker starts, which one runs a case and when one is replaced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from multiprocessing.connection import Connection
from typing import IO, Any

from .protocol import receive, send

__all__ = ["REAP_WAIT", "Dying", "WorkerProcess", "describe_exit", "worker_environment"]

_OUTPUT_TAIL = 64 * 1024  # bytes of a worker's output kept per case
REAP_WAIT = 30.0  # seconds a killed worker may take to go before timing starts without waiting for it


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


class WorkerProcess:
    """One running worker: the process, its two pipes and its output file."""

    def __init__(self, command: list[str], pin: str | None = None, imports: Collection[str] = ()) -> None:
        self.started = time.monotonic()
        self.killed: float | None = None  # when :meth:`kill_later` killed it
        self._asked = False  # asked to stop
        self.output: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as the worker lives
        try:
            req_read, self._req_write = os.pipe()
        except OSError:
            self.output.close()
            raise
        try:
            self._rep_read, rep_write = os.pipe()
        except OSError:
            for fd in (req_read, self._req_write):
                os.close(fd)
            self.output.close()
            raise
        env = worker_environment()
        if pin is not None:  # the one GPU this worker may see (an entry of this process's own list)
            env["CUDA_VISIBLE_DEVICES"] = pin
        try:
            ahead = [arg for name in imports for arg in ("--import", name)]
            self.popen = subprocess.Popen(
                [*command, *ahead, "--requests", str(req_read), "--replies", str(rep_write)],
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
        self._first: tuple[str, Any] | None = None  # its first message (hello, or why it cannot start), once read
        self.imports = tuple(imports)  # the libraries it imports ahead, after its hello (``--import``)
        self.imported: frozenset[str] = frozenset()  # those it said it has (``imported``: after them, and cases')
        self._answered = not imports  # it said what it imported ahead
        self.gone = False  # its pipe closed while it was awaited (:meth:`ready`)
        self.served = False  # it ran a case: no longer a fresh worker

    def left_of(self, limit: float) -> float:
        """Seconds left of ``limit`` counted from its start (at least 0)."""
        return max(0.0, self.started + limit - time.monotonic())

    def first_message(self, wait: float) -> tuple[str, Any] | None:
        """Its first message (``hello``, or why it cannot start), waiting up to ``wait`` seconds; None if it has not
        come. EOFError or OSError: the worker went without one."""
        if self._first is None and self.replies.poll(wait):
            self._first = receive(self.replies)
        return self._first

    def settled(self, wait: float) -> bool:
        """Whether it has finished starting (its first message, or its end, came), waiting up to ``wait`` seconds."""
        try:
            return self.first_message(wait) is not None
        except (EOFError, OSError):
            return True

    @property
    def greeted(self) -> bool:
        """Its hello has been read: it started and waits for requests."""
        return self._first is not None and self._first[0] == "hello"

    def ready(self, wait: float) -> bool:
        """Whether it has started and said what it imported ahead (it imports once its hello is sent, on the CPU
        alone), waiting up to ``wait`` seconds; True also for one that went or cannot start (its greeting says so)."""
        deadline = time.monotonic() + wait
        if not self.settled(wait):
            return False
        try:
            while self.greeted and not self._answered:
                if not self.replies.poll(max(0.0, deadline - time.monotonic())):
                    return False
                self.note(*receive(self.replies))
        except (EOFError, OSError):
            self.gone = True
        return True

    def note(self, kind: str, body: Any) -> None:
        """Take in a message a worker sends about itself between a case's messages (``imported``)."""
        if kind == "imported" and isinstance(body, list):
            self.imported |= frozenset(str(name) for name in body)
            self._answered = True

    def read_news(self) -> None:
        """Read, without waiting, what a worker that waits between cases has said (its hello, what it imported)."""
        with contextlib.suppress(EOFError, OSError):
            if self.settled(0) and self.greeted:
                while self.replies.poll(0):
                    self.note(*receive(self.replies))

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

    def kill_later(self) -> None:
        """Kill the worker and everything it started without waiting for it to go (a process leaving a CUDA
        context takes its time): :meth:`reaped` waits."""
        self.killed = time.monotonic()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        for conn in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                conn.close()

    def reaped(self, wait: float) -> bool:
        """Whether a worker killed by :meth:`kill_later` has gone, waiting up to ``wait`` seconds; its output file
        is closed once it has."""
        try:
            self.popen.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return False
        self.output.close()
        return True

    def kill_and_read(self, offset: int, grace: float = 0.0) -> tuple[int | None, str]:
        """Kill the worker (after ``grace`` seconds to exit by itself); its exit status and what it wrote from
        ``offset`` on."""
        code = self._kill_keeping_output(grace)
        output = self.output_since(offset)
        self.output.close()
        return code, output

    def ask_to_stop(self) -> None:
        """Ask the worker to end, without waiting for it (:meth:`stop` waits)."""
        if not self._asked:
            self._asked = True
            with contextlib.suppress(OSError):
                send(self.requests, "stop")

    def stop(self) -> None:
        """Ask the worker to end (unless asked already); kill it if it has not within 10 s."""
        self.ask_to_stop()
        try:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=10)
        finally:  # killed with everything it started, even when the wait is interrupted (Ctrl-C)
            self.kill()


class Dying:
    """Workers killed without waiting for them to go (a process leaving a CUDA context takes its time)."""

    def __init__(self) -> None:
        self._processes: list[WorkerProcess] = []

    def __bool__(self) -> bool:
        return bool(self._processes)

    def add(self, process: WorkerProcess) -> None:
        """Kill a worker without waiting for it to go (timing waits, :meth:`reap`); forget those that have gone."""
        process.kill_later()
        self._processes.append(process)
        self.reap(wait=False)

    def reap(self, wait: bool) -> None:
        """Forget the killed workers that have gone; with ``wait``, wait for each until REAP_WAIT after its kill (one
        stuck in the driver past that is waited for no more)."""
        now = time.monotonic()
        left = [(p, max(0.0, (p.killed or now) + REAP_WAIT - now) if wait else 0.0) for p in self._processes]
        self._processes = [process for process, seconds in left if not process.reaped(seconds)]
