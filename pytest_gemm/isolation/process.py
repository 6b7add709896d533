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
from multiprocessing.connection import Connection
from typing import IO

from .protocol import send

__all__ = ["WorkerProcess", "describe_exit", "worker_environment"]

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


class WorkerProcess:
    """One running worker: the process, its two pipes and its output file."""

    def __init__(self, command: list[str], pin: str | None = None) -> None:
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
