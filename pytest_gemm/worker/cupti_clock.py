"""Kernel-only device times from CUPTI's activity records (libcupti, as NVIDIA's ``cupti-python`` loads it).

CUDA events time from the start event to the end event: that includes the launch's own latency on
the device, a few microseconds, a large share of a short kernel, and it wanders from one process to
the next. CUPTI's kernel records carry each kernel's own start and end on the GPU, the quantity Nsight
Compute's ``gpu__time_duration`` and Nsight Systems report.

Each timed launch follows a launch of the harness's prepare kernel, which restores C, sweeps the SMs' instruction
caches and flushes L2 (:mod:`.rounds`); a batch ends with a tiny mark kernel. Every kernel, memset and copy on that
stream after a prepare kernel and before the next harness kernel belongs to the launch (cuBLAS may run a split-K
GEMM and a reduction), and its time is the sum of that work's own durations: the GPU's gaps between the kernels of
one call are not counted, as Nsight Compute's per-kernel times, summed over a call, do not count them (the gap
moves from one case to the next more than the kernels do). Only the GPU work's records are collected, not the API
calls': with those, which correlation ids would need, a flush costs far more. The records are read raw from CUPTI's
buffers, through ctypes and numpy (:mod:`.cupti_buffers`), not through cupti-python's record objects, whose every
field read goes through numpy's ``recarray``. The figures behind these choices: docs/measurements.md#cuptis-records.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records.outcome import STREAMS_KEPT
from .cupti_buffers import activity_buffers
from .cupti_records import CONCURRENT_KERNEL, MEMCPY, MEMSET, Row

__all__ = [
    "FRESH_KERNEL",
    "HARNESS_KERNELS",
    "MARK_KERNEL",
    "PREPARE_KERNEL",
    "SPIN_KERNEL",
    "CuptiClock",
    "CuptiUnavailable",
    "Span",
    "build_spans",
    "role_of",
]

_BUFFER_BYTES = 1 << 20  # CUPTI's activity buffers
PREPARE_KERNEL = "pytest_gemm_prepare"  # opens a timed launch's span; the timer launches it
MARK_KERNEL = "pytest_gemm_mark"  # closes a batch's last span
SPIN_KERNEL = "pytest_gemm_spin"  # keeps the GPU busy ahead of an events-timed batch
FRESH_KERNEL = "pytest_gemm_fresh"  # writes a timed launch's inputs afresh, and copies a checked output (worker.fresh)
HARNESS_KERNELS = frozenset({PREPARE_KERNEL, MARK_KERNEL, SPIN_KERNEL, FRESH_KERNEL})  # never a timed launch's work


@dataclass(frozen=True)
class Span:
    """The GPU work of one timed launch: its records' summed durations and its first start and last end (CUPTI's
    ns), and how many records."""

    busy_ns: int  # the time some of its work was running: the union of its records' intervals
    start_ns: int
    end_ns: int
    records: int

    @property
    def seconds(self) -> float:
        """The launch's kernel-only time: its work's own durations, summed (overlaps counted once)."""
        return self.busy_ns / 1e9


class CuptiUnavailable(Exception):
    """CUPTI cannot time this process's kernels; the message says why."""


class CuptiClock:
    """Collects the GPU work on one stream between :meth:`start` and :meth:`spans`."""

    def __init__(self) -> None:
        try:
            from cupti import cupti
        except ImportError as exc:
            raise CuptiUnavailable(f"cupti-python is not installed ({exc}); pip install 'pytest-gemm[cu13]'") from None
        self._kinds = (CONCURRENT_KERNEL, MEMSET, MEMCPY)
        # (stream id, start ns, end ns, role): 0 the work of a launch, 1 a prepare kernel, 2 another harness kernel
        self._work: list[tuple[int, int, int, int]] = []
        buffers = None
        try:
            buffers = self._buffers = activity_buffers(cupti, _BUFFER_BYTES)  # one a process, shared by every clock
            self.start()
            self.spans()
        except Exception as exc:  # another profiler holds CUPTI, a driver without it...
            if buffers is not None and buffers.sink == self._completed:
                buffers.sink = None
            raise CuptiUnavailable(f"CUPTI cannot record activity: {type(exc).__name__}: {exc}") from None

    def _completed(self, rows: list[Row]) -> None:
        """One completed buffer's records, (kind, stream id, start ns, end ns, kernel name or ""), in its order."""
        work = self._work
        for kind, stream, start, end, name in rows:
            work.append((stream, start, end, role_of(name) if kind == CONCURRENT_KERNEL else 0))

    def start(self) -> None:
        self._work.clear()
        self._buffers.sink = self._completed  # the clock that started last gets the records
        self._buffers.error = None
        self._buffers.enable(self._kinds)

    def abandon(self) -> None:
        """Stop collecting and drop what was collected (a launch failed mid-batch)."""
        try:
            self._buffers.disable(self._kinds)
            self._buffers.flush()
        finally:
            self._work.clear()
            self._buffers.error = None

    def spans(self) -> list[Span | None]:
        """Flush the records (the stream must be synchronized) and stop collecting; then, in launch order, the work
        after each prepare kernel (None: no GPU work between it and the next harness kernel)."""
        try:
            self._buffers.flush()
        finally:
            self._buffers.disable(self._kinds)
        self._buffers.raise_error()
        return build_spans(self._work)

    def other_streams(self) -> tuple[int, ...]:
        """:func:`other_streams` of the records :meth:`spans` read."""
        return other_streams(self._work)


def other_streams(work: list[tuple[int, int, int, int]]) -> tuple[int, ...]:
    """The streams (CUPTI's ids) other than the prepare kernels' on which a batch's records show launched work, the
    first :data:`STREAMS_KEPT` and one more (which says there are more): a kernel that launches there is neither
    synchronised nor timed by the harness."""
    opened = {w[0] for w in work if w[3] == 1}
    found = sorted({w[0] for w in work if w[3] == 0 and w[0] not in opened}) if opened else []
    return tuple(found[: STREAMS_KEPT + 1])


def role_of(kernel: str) -> int:
    """A kernel record's role in a batch: 1 the prepare kernel (opens a launch's span), 2 another of the
    harness's kernels (closes one), 0 a launch's work (any other name, ``pytest_gemm_`` prefix or not)."""
    if kernel == PREPARE_KERNEL:
        return 1
    return 2 if kernel in HARNESS_KERNELS else 0


def build_spans(work: list[tuple[int, int, int, int]]) -> list[Span | None]:
    """The spans of a batch from its records, (stream id, start ns, end ns, role): role 0 is a launch's work, 1 a
    prepare kernel (opens a span), 2 another harness kernel (closes one). Only the prepare kernels' stream counts.
    A span's time is the union of its records' intervals: the gaps between them are left out, and records that
    overlap (a programmatic dependent launch) are not counted twice."""
    opened = [w for w in work if w[3] == 1]
    if not opened:
        return []
    stream = opened[0][0]
    spans: list[Span | None] = []
    current: list[int] | None = None  # [busy, first start, last end, records] of the open span
    for _stream, start, end, role in sorted(w for w in work if w[0] == stream):
        if role or current is None:
            if current is not None:
                spans.append(Span(*current) if current[3] else None)
            current = [0, 0, 0, 0] if role == 1 else None
        else:
            covered = current[2] if current[3] else start  # the end of what is already counted
            current[0] += max(0, end - max(start, covered))
            current[1] = min(current[1], start) if current[3] else start
            current[2] = max(current[2], end)
            current[3] += 1
    if current is not None:
        spans.append(Span(*current) if current[3] else None)
    return spans
