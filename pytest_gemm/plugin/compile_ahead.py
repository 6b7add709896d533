"""The run's compile items compiled ahead, in threads, while pytest works through the items in order.

NVRTC compiles on the host's CPU, one program per call, and cuda-python lets go of the GIL while it runs,
so compiles of different programs in threads overlap, while compiled one at a time they keep the GPU waiting
(measured: docs/measurements.md, "The pytest side"). Here they start
when collection ends, in the items' order, on all but two of the cores this process may use (the GPU worker
and the pytest process keep theirs), at a lower priority than the GPU worker's timing, and each compile item
takes its own result, or its compile error, when pytest reaches it. With the compile cache on, every result
lands there, where the GPU workers find it too.

Not under pytest-xdist (each xdist worker runs only its share of the items, so compiling all of them in every
worker would be wasted), not for items that will be skipped (a ``skip`` mark, ``--benchmark-only``, which runs
only the timed cases, ``--setup-plan`` or ``--setup-only``), and not for fewer than two compile items. An
interrupted run waits for the compiles already running (a second or two each) before it ends.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..compiler.cache import CubinCache
from ..compiler.nvrtc import CompileResult, compile_kernel, load_nvrtc
from ..specs.spec import KernelSpec, Variant

__all__ = ["CompileAhead", "Job", "jobs_of", "threads_for"]

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


class CompileAhead:
    """Compiles jobs in a thread pool and hands each item its result; an item never started ahead compiles
    in the calling thread, as it would without this."""

    def __init__(self, cubins: CubinCache | None) -> None:
        self.cubins = cubins
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Future[CompileResult]] = {}

    def start(self, jobs: Sequence[Job], cores: int | None = None) -> int:
        """Start compiling ``jobs`` in their order; how many threads (0: none, too few jobs or cores)."""
        threads = threads_for(len(jobs), usable_cores() if cores is None else cores)
        # NVRTC's one-time probes run here, before the threads race to them; without NVRTC every item compiles
        # where it is run, and says why
        if len(jobs) < 2 or threads < 2 or self._pool is not None or not load_nvrtc():
            return 0
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="gemm-compile", initializer=_lower_priority)
        for nodeid, spec, variant, arch in jobs:
            self._futures[nodeid] = self._pool.submit(compile_kernel, spec, variant, arch, self.cubins)
        return threads

    def result(self, nodeid: str, spec: KernelSpec, variant: Variant, arch: str) -> CompileResult:
        """The item's compile: the one started ahead (its result, or what it raised), else one now."""
        future = self._futures.pop(nodeid, None)
        if future is None:
            return compile_kernel(spec, variant, arch, self.cubins)
        return future.result()

    def close(self) -> None:
        """Drop the compiles no item will ask for (-x, a keyboard interrupt), and wait for those running."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
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
