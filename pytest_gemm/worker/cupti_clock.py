"""Kernel-only device times from CUPTI's activity records (NVIDIA's ``cupti-python``).

CUDA events time from the start event to the end event: that includes the launch's own latency on
the device, about 3 us on an H100, which is 13% of a 24 us kernel, and it wanders from one process to
the next. CUPTI's kernel records carry each kernel's own start and end on the GPU, the quantity Nsight
Compute's ``gpu__time_duration`` and Nsight Systems report.

Each timed launch is bracketed on the stream by two launches of a tiny mark kernel, outside its events:
every kernel, memset and copy between an opening and a closing mark on that stream belongs to the launch
(cuBLAS may run a split-K GEMM and a reduction), and its time is its first start to its last end. Only
the GPU work's records are collected, not the API calls': flushing CUPTI's buffers costs the host 4-6 ms
that way on an H100, against 15 ms with the API records that correlation ids would need
(``research/cupti_cost.py``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MARK_KERNEL", "CuptiClock", "CuptiUnavailable"]

_BUFFER_BYTES = 1 << 20
MARK_KERNEL = "pytest_gemm_mark"  # the mark kernel's name; the timer launches it


class CuptiUnavailable(Exception):
    """CUPTI cannot time this process's kernels; the message says why."""


class CuptiClock:
    """Collects the GPU work on one stream between :meth:`start` and :meth:`spans`."""

    def __init__(self) -> None:
        try:
            from cupti import cupti
        except ImportError as exc:
            raise CuptiUnavailable(f"cupti-python is not installed ({exc}); pip install 'pytest-gemm[cu13]'") from None
        self.cupti = cupti
        kind = cupti.ActivityKind
        self._kernel = int(kind.CONCURRENT_KERNEL)
        self._kinds = [kind.CONCURRENT_KERNEL, kind.MEMSET, kind.MEMCPY]
        self._work: list[tuple[int, int, int, bool]] = []  # (stream id, start ns, end ns, is a mark)
        try:
            cupti.activity_register_callbacks(self._requested, self._completed)
            self.start()
            self.spans()
        except Exception as exc:  # another profiler holds CUPTI, a driver without it...
            raise CuptiUnavailable(f"CUPTI cannot record activity: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _requested() -> tuple[int, int]:
        return _BUFFER_BYTES, 0

    def _completed(self, activities: list[Any]) -> None:
        for record in activities:
            mark = int(record.kind) == self._kernel and record.name == MARK_KERNEL
            self._work.append((record.stream_id, record.start, record.end, mark))

    def start(self) -> None:
        self._work.clear()
        for kind in self._kinds:
            self.cupti.activity_enable(kind)

    def abandon(self) -> None:
        """Stop collecting and drop what was collected (a launch failed mid-batch)."""
        try:
            for kind in self._kinds:
                self.cupti.activity_disable(kind)
            self.cupti.activity_flush_all(1)
        finally:
            self._work.clear()

    def spans(self) -> list[float | None]:
        """Flush the records (the stream must be synchronized) and stop collecting; then, in launch order, the
        seconds from the first start to the last end of the work between each opening mark and the next
        closing one (None: no GPU work between them)."""
        self.cupti.activity_flush_all(1)
        for kind in self._kinds:
            self.cupti.activity_disable(kind)
        marks = [w for w in self._work if w[3]]
        if not marks:
            return []
        stream = marks[0][0]
        spans: list[float | None] = []
        inside = False
        first = last = 0
        for _stream, start, end, mark in sorted(w for w in self._work if w[0] == stream):
            if mark:
                if inside:
                    spans.append((last - first) / 1e9 if first else None)
                inside, first, last = not inside, 0, 0
            elif inside:
                first = min(first, start) if first else start
                last = max(last, end)
        return spans
