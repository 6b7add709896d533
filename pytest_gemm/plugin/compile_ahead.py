"""The run's compile items compiled ahead, in threads, while pytest works through the items in order.

NVRTC compiles on the host's CPU, one program per call, and cuda-python lets go of the GIL while it runs,
so compiles of different programs in threads overlap, while compiled one at a time they keep the GPU waiting
(measured: docs/measurements.md, "The pytest side"). Here they start
when collection ends, in the items' order, on all but two of the cores this process may use (the GPU worker
and the pytest process keep theirs), at a lower priority than the GPU worker's timing, and each compile item
takes its own result, or its compile error, when pytest reaches it. With the compile cache on, every result
lands there, where the GPU workers find it too.

Each compile, ahead or not, runs in a child process with a time limit (``--gemm-compile-timeout``,
:mod:`pytest_gemm.compiler.limited`): one past it fails its item and the run goes on. While an item waits for a
compile that runs long, a line on the terminal says so every ``limited.PROGRESS_EVERY`` seconds.

Not under pytest-xdist (each xdist worker runs only its share of the items, so compiling all of them in every
worker would be wasted), not for items that will be skipped (a ``skip`` mark, ``--benchmark-only``, which runs
only the timed cases, ``--setup-plan`` or ``--setup-only``), and not for fewer than two compile items. An
interrupted run waits for the compiles already running (a second or two each) before it ends.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import pytest

from ..compiler import limited
from ..compiler.cache import CubinCache
from ..compiler.limited import CompileTimeout, LimitedCompiler
from ..compiler.nvrtc import CompileResult, compile_kernel, load_nvrtc
from ..options import label
from ..specs.spec import KernelSpec, Variant

__all__ = ["CompileAhead", "Job", "jobs_of", "terminal_line", "threads_for", "timeout_text"]

Job = tuple[str, KernelSpec, Variant, str]  # (the item's node id, spec, variant, architecture)
_MOST_THREADS = 16  # NVRTC takes hundreds of MB a compile: a 128-core host still gets 16


def threads_for(jobs: int, cores: int | None) -> int:
    """Threads for ``jobs`` compiles on a host of ``cores`` (None: unknown): all cores but two, at most 16."""
    return max(0, min(jobs, (cores or 1) - 2, _MOST_THREADS))


def usable_cores() -> int | None:
    """The cores this process may run on (its CPU affinity, as a container or ``taskset`` limits it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _lower_priority() -> None:
    """A compile thread yields to the GPU worker and the pytest process (Linux: a thread's own nice value)."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Write a line on pytest's terminal now, even from inside a test (its output capture set aside meanwhile)."""

    def say(text: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.write_line(text)

    return say


def timeout_text(spec: KernelSpec, variant: Variant, exc: CompileTimeout) -> str:
    """What a compile item that ran past the limit says."""
    return (
        f"{spec.path}: {spec.label(variant)} did not compile for {exc.arch} within {exc.limit:g} s, so the "
        f"compiler was stopped ({label('compile-timeout')} sets the limit)"
    )


class CompileAhead:
    """Compiles jobs in a thread pool and hands each item its result; an item never started ahead compiles
    in the calling thread, as it would without this. With a ``limit``, each compile runs in a child process
    and stops after that many seconds (:class:`~pytest_gemm.compiler.limited.CompileTimeout`); ``say`` writes
    a line on the terminal while an item waits for a long compile."""

    def __init__(
        self, cubins: CubinCache | None, limit: float | None = None, say: Callable[[str], None] | None = None
    ) -> None:
        self.cubins = cubins
        self.compiler = LimitedCompiler(limit) if limit is not None else None
        self.say = say
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Future[CompileResult]] = {}
        self._started: dict[str, float] = {}  # node id -> when its compile ahead began

    def start(self, jobs: Sequence[Job], cores: int | None = None) -> int:
        """Start compiling ``jobs`` in their order; how many threads (0: none, too few jobs or cores)."""
        threads = threads_for(len(jobs), usable_cores() if cores is None else cores)
        # NVRTC's one-time probes run here, before the threads race to them; without NVRTC every item compiles
        # where it is run, and says why
        if len(jobs) < 2 or threads < 2 or self._pool is not None or not load_nvrtc():
            return 0
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="gemm-compile", initializer=_lower_priority)
        for nodeid, spec, variant, arch in jobs:
            self._futures[nodeid] = self._pool.submit(self._ahead, nodeid, spec, variant, arch)
        return threads

    def _ahead(self, nodeid: str, spec: KernelSpec, variant: Variant, arch: str) -> CompileResult:
        self._started[nodeid] = time.monotonic()
        return self._compile(spec, variant, arch, None)

    def _compile(
        self, spec: KernelSpec, variant: Variant, arch: str, progress: Callable[[float], None] | None
    ) -> CompileResult:
        if self.compiler is None:
            return compile_kernel(spec, variant, arch, self.cubins)
        return compile_kernel(spec, variant, arch, self.cubins, self.compiler.with_progress(progress))

    def result(self, nodeid: str, spec: KernelSpec, variant: Variant, arch: str) -> CompileResult:
        """The item's compile: the one started ahead (its result, or what it raised), else one now. While it runs
        long, a line on the terminal says so every ``limited.PROGRESS_EVERY`` seconds."""
        progress = self._progress(spec, variant, arch)
        future = self._futures.pop(nodeid, None)
        if future is None:
            return self._compile(spec, variant, arch, progress)
        if not self._futures and self.compiler is not None:
            self.compiler.trim()  # the last compile ahead: the other threads' compile processes are idle for good
        while True:
            try:
                return future.result(timeout=limited.PROGRESS_EVERY)
            except FutureTimeout:
                started = self._started.get(nodeid)
                if progress is not None and started is not None:  # not while it waits for a thread
                    progress(time.monotonic() - started)

    def _progress(self, spec: KernelSpec, variant: Variant, arch: str) -> Callable[[float], None] | None:
        say, compiler = self.say, self.compiler
        if say is None or compiler is None:
            return None
        what = f"{spec.path}::{spec.label(variant)} for {arch}"
        limit = f"{compiler.limit:g} s, {label('compile-timeout')}"
        return lambda seconds: say(f"pytest-gemm: compiling {what}: {seconds:.0f} s so far (limit {limit})")

    def close(self) -> None:
        """Drop the compiles no item will ask for (-x, a keyboard interrupt), stop those running, and end the
        compile processes."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self.compiler is not None:
            self.compiler.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._futures.clear()

    @property
    def pending(self) -> int:
        """Compiles started ahead that no item has taken yet."""
        return len(self._futures)


def jobs_of(items: Sequence[Any], item_type: type) -> list[Job]:
    """The compile jobs of the run's items of ``item_type`` (the compile items), in their order; an item with a
    ``skip`` mark will not compile, and is left out."""
    return [
        (i.nodeid, i.spec, i.variant, i.arch)
        for i in items
        if isinstance(i, item_type) and i.get_closest_marker("skip") is None
    ]
