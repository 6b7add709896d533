"""Keep a case's time limit for the kernel: report progress while CuPy, Triton or torch compiles.

The pytest process's limit is on silence: each ``phase`` message restarts it. Verification runs
CuPy's elementwise and reduction kernels, which CuPy compiles with NVRTC the first time they are
used on a machine (then loads from its disk cache). The worker's warm-up pays most of that, but a
case can still meet one CuPy has not compiled yet, and on a fresh machine with several workers
compiling at once that can take longer than a case's limit (docs/measurements.md#the-workers-start).
That is the harness's cost, not the kernel's. A Python kernel's compilers are watched the same way: Triton's
JIT and its autotuner, torch.compile's tracing and code generation, and cpp_extension's builds. Its first call runs
in a setup phase of its own, where most of that happens; a later one compiles again only where Triton specializes
anew (the timed launches' buffers are packed where the verified ones are padded, say).

:class:`CompileWatch` looks at the main thread's stack every 0.2 s (well inside any sensible
``--gemm-timeout``); while it holds a frame of CuPy's compiler module, it sends the current phase
again. A kernel that hangs is waited for in a
synchronize or a copy, never inside those modules (an autotuner's own trials aside), so its limit still runs out; and
one phase gets at most ``cap`` seconds of such progress (the request's compile limit, ``--gemm-compile-timeout``), so
a compile that never ends is still stopped.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from ..records.request import COMPILE_TIMEOUT

__all__ = ["COMPILERS", "CUPY_COMPILER", "CompileWatch"]

#: the tail of the path of CuPy's compiler module, whose frames mean "CuPy is compiling"
CUPY_COMPILER = os.path.join("cupy", "cuda", "compiler.py")
#: the modules whose frames mean "compiling": CuPy's, Triton's compiler and autotuner, torch.compile's frame
#: conversion (dynamo's tracing and inductor's code generation run under it) and cpp_extension's builds
COMPILERS = (
    CUPY_COMPILER,
    os.path.join("triton", "compiler", "compiler.py"),
    os.path.join("triton", "runtime", "autotuner.py"),
    os.path.join("torch", "_dynamo", "convert_frame.py"),
    os.path.join("torch", "utils", "cpp_extension.py"),
)


class CompileWatch:
    """Calls ``progress(phase)`` every ``interval`` seconds while the watched thread is in one of ``modules``.

    ``progress`` is called with :attr:`lock` held, and only while the phase it names is still the current
    one; the worker sends all its messages, and calls :meth:`enter`, with that lock held, so that no
    progress of a finished case can follow its outcome.
    """

    def __init__(
        self,
        progress: Callable[[str], None],
        interval: float = 0.2,
        cap: float = COMPILE_TIMEOUT,
        modules: tuple[str, ...] = COMPILERS,
        thread_id: int | None = None,
    ) -> None:
        self.progress = progress
        self.interval = interval
        self.cap = cap
        self.modules = tuple(os.sep + module for module in modules)
        self.thread_id = threading.main_thread().ident if thread_id is None else thread_id
        self.phase = ""
        self.granted = 0.0  # seconds of progress sent in the current phase
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="pytest-gemm compile watch", daemon=True)

    def start(self) -> CompileWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def enter(self, phase: str) -> None:
        """The watched thread began ``phase`` ("" between cases); call with :attr:`lock` held."""
        self.phase, self.granted = phase, 0.0

    def compiling(self) -> bool:
        """Whether the watched thread is inside one of the modules now."""
        frame = sys._current_frames().get(self.thread_id)
        while frame is not None:
            if frame.f_code.co_filename.endswith(self.modules):
                return True
            frame = frame.f_back
        return False

    def _watch(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            with self.lock:
                if self.phase and self.granted < self.cap and self.compiling():
                    self.granted += now - last
                    self.progress(self.phase)
            last = now
