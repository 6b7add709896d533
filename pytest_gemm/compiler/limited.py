"""NVRTC compiles with a time limit, each in a child process that is killed when the limit runs out.

NVRTC compiles in the calling process and cannot be interrupted, and a kernel that unrolls a long loop can take
minutes and gigabytes (a ``#pragma unroll`` over 32768 iterations took 60 s and 1.7 GB). So the pytest process
compiles in child processes (:mod:`.child`), each one compile at a time and kept for the next one (starting one
costs about 0.2 s, once per thread that compiles). A compile past the limit kills its process and raises
:class:`CompileTimeout`; the next compile starts a new one. While a compile runs, ``progress`` (when given) is
called every :data:`PROGRESS_EVERY` seconds with the seconds so far.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import IO, Any

from .nvrtc import CompileError, Compiler, CompileResult, NvrtcUnavailable, parse_ptxas_resources

__all__ = ["PROGRESS_EVERY", "CompileTimeout", "LimitedCompiler"]

PROGRESS_EVERY = 10.0  # seconds between two calls of a compile's progress
_ERRORS_SHOWN = 2000  # characters of a dead compile process's stderr shown


class CompileTimeout(Exception):
    """A compile that ran past its time limit; its process was killed."""

    def __init__(self, path: str, arch: str, limit: float) -> None:
        self.path, self.arch, self.limit = path, arch, limit
        super().__init__(f"{path}: compiling for {arch} did not end within {limit:g} s")


def _environment() -> dict[str, str]:
    """This process's environment, with its import path (a source checkout, a test project), as the GPU worker
    gets it (isolation.process.worker_environment)."""
    paths = [p for p in sys.path if p] + [os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths).rstrip(os.pathsep))


class _Child:
    """One compile process and its two pipes."""

    def __init__(self) -> None:
        req_read, req_write = os.pipe()
        rep_read, rep_write = os.pipe()
        self.errors: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as the process lives
        command = [sys.executable, "-m", "pytest_gemm.compiler.child", str(req_read), str(rep_write), str(os.getpid())]
        try:
            self.popen = subprocess.Popen(
                command,
                pass_fds=(req_read, rep_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.errors,
                start_new_session=True,
                env=_environment(),
            )
        except BaseException:
            for fd in (req_write, rep_read):
                os.close(fd)
            self.errors.close()
            raise
        finally:
            os.close(req_read)
            os.close(rep_write)
        self.requests = Connection(req_write, readable=False)
        self.replies = Connection(rep_read, writable=False)

    def kill(self) -> None:
        """Kill the process (and anything it started) and wait for it."""
        self.signal()
        self.popen.wait()
        self.requests.close()
        self.replies.close()
        self.errors.close()

    def signal(self) -> None:
        """Send SIGKILL to the process's group, unless it was waited for already."""
        if self.popen.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)

    def death(self) -> str:
        """How the process ended, with the end of what it wrote to stderr (it is waited for first)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        code = self.popen.returncode
        if code is None:
            said = "it closed its pipe"
        elif code < 0:
            said = f"signal {-code}" + (f" ({signal.Signals(-code).name})" if -code in signal.valid_signals() else "")
        else:
            said = f"exit code {code}"
        self.errors.seek(0)
        errors = self.errors.read().decode(errors="replace").strip()[-_ERRORS_SHOWN:]
        return f"the compile process died ({said})" + (f":\n{errors}" if errors else "")


class LimitedCompiler:
    """Compiles in child processes, at most ``limit`` seconds a compile; safe to use from several threads."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._lock = threading.Lock()
        self._closed = False  # after close(), a process that ends its compile is not kept

    def __call__(self, source: str, path: str, name: str, options: tuple[str, ...], arch: str) -> CompileResult:
        return self.compile(source, path, name, options, arch)

    def with_progress(self, progress: Callable[[float], None] | None) -> Compiler:
        """This compiler, calling ``progress(seconds)`` while a compile runs."""
        return functools.partial(self.compile, progress=progress)

    def compile(
        self,
        source: str,
        path: str,
        name: str,
        options: tuple[str, ...],
        arch: str,
        progress: Callable[[float], None] | None = None,
    ) -> CompileResult:
        """Compile in a child process: the result, or :class:`CompileError`, :class:`NvrtcUnavailable`, or
        :class:`CompileTimeout` past the limit (the process is then killed)."""
        child = self._take()
        job = {"source": source, "path": path, "name": name, "options": list(options), "arch": arch}
        try:
            reply, cubin = self._exchange(child, job, progress)
        except CompileTimeout:
            self._drop(child)
            raise CompileTimeout(path, arch, self.limit) from None
        except (EOFError, OSError):
            death = child.death()
            self._drop(child)
            raise CompileError(path, arch, death) from None
        except BaseException:
            self._drop(child)
            raise
        self._give_back(child)
        if reply.get("error") == "compile":
            raise CompileError(path, arch, reply["text"])
        if reply.get("error") == "unavailable":
            raise NvrtcUnavailable(reply["text"])
        if "error" in reply:
            raise RuntimeError(f"compiling {path} for {arch}: {reply['text']}")
        lowered, log = reply["lowered"], reply["log"]
        return CompileResult(arch, lowered, parse_ptxas_resources(log, lowered), log, cubin)

    def _exchange(
        self, child: _Child, job: dict[str, Any], progress: Callable[[float], None] | None
    ) -> tuple[dict[str, Any], bytes]:
        child.requests.send_bytes(json.dumps(job).encode())
        start = time.monotonic()
        shown = start  # when progress was last called
        while True:
            now = time.monotonic()
            left = start + self.limit - now
            if left <= 0:
                raise CompileTimeout(job["path"], job["arch"], self.limit)
            wait = left if progress is None else min(left, max(0.0, shown + PROGRESS_EVERY - now))
            if child.replies.poll(wait):
                reply = json.loads(child.replies.recv_bytes())
                return reply, child.replies.recv_bytes() if "lowered" in reply else b""
            if progress is not None and time.monotonic() >= shown + PROGRESS_EVERY:
                shown += PROGRESS_EVERY
                progress(time.monotonic() - start)

    def _take(self) -> _Child:
        with self._lock:
            while self._idle:
                child = self._idle.pop()
                if child.popen.poll() is None:
                    self._busy.add(child)
                    return child
                child.kill()  # it died while idle
        child = _Child()
        with self._lock:
            self._busy.add(child)
        return child

    def _give_back(self, child: _Child) -> None:
        with self._lock:
            self._busy.discard(child)
            if not self._closed:
                self._idle.append(child)
                return
        child.kill()

    def _drop(self, child: _Child) -> None:
        with self._lock:
            self._busy.discard(child)
        child.kill()

    def trim(self, keep: int = 1) -> None:
        """End the idle compile processes but ``keep`` (each holds about 180 MB once it has compiled)."""
        with self._lock:
            ended, self._idle = self._idle[keep:], self._idle[:keep]
        for child in ended:
            child.kill()

    def close(self) -> None:
        """Kill every compile process, idle or compiling (a compile that runs ends with a CompileError)."""
        with self._lock:
            idle, busy, self._idle, self._closed = self._idle, list(self._busy), [], True
        for child in busy:  # the thread waiting for it sees its pipe close, and cleans up
            child.signal()
        for child in idle:
            child.kill()
