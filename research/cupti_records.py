"""What CUPTI records per timed round, and what reading them costs the worker (issue 16: the main job's speed).

    python research/cupti_records.py

Times a few cases through the worker's own backend with a clock that also counts every record it is handed (by
activity kind and, for kernels, whether it is the harness's own) and the seconds spent in ``spans()`` (the flush
of CUPTI's buffers and the harness's callback). Prints one line per case: rounds, records per round, host
milliseconds per batch and microseconds per record.
"""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import ClassVar

from pytest_gemm.records.request import Request, TimingSettings
from pytest_gemm.worker import cupti_clock, timer
from pytest_gemm.worker.backend import GpuBackend
from pytest_gemm.worker.cupti_buffers import CONCURRENT_KERNEL, MEMCPY, MEMSET, Row

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("kernels/01_naive.cu", "sgemm_naive", (), "fp32", 256),
    ("kernels/01_naive.cu", "sgemm_naive", (), "fp32", 1024),
    ("kernels/10_mma_sync.cu", "hgemm_mma_fp16", (("BK", 32), ("STAGES", 4)), "fp16", 256),
]
KIND_NAMES = {CONCURRENT_KERNEL: "KERNEL", MEMSET: "MEMSET", MEMCPY: "MEMCPY"}


class CountingClock(cupti_clock.CuptiClock):
    kinds: ClassVar[collections.Counter[str]] = collections.Counter()
    batches = 0
    spans_s = 0.0

    def _completed(self, rows: list[Row]) -> None:
        for kind, _stream, _start, _end, name in rows:
            harness = " (harness)" if name.startswith("pytest_gemm_") else ""
            CountingClock.kinds[f"{KIND_NAMES.get(kind, str(kind))}{harness}"] += 1
        super()._completed(rows)

    def spans(self):  # type: ignore[override]
        start = time.perf_counter()
        try:
            return super().spans()
        finally:
            CountingClock.batches += 1
            CountingClock.spans_s += time.perf_counter() - start


def main() -> None:
    timer.CuptiClock = CountingClock
    backend = GpuBackend()
    for path, kernel, params, dtype, size in CASES:
        CountingClock.kinds.clear()
        CountingClock.batches, CountingClock.spans_s = 0, 0.0
        request = Request(
            str(ROOT / path), path, kernel, params, dtype, size, size, size, 1.0, 0.0, 0, timing=TimingSettings()
        )
        start = time.perf_counter()
        outcome = backend.run(request, lambda phase: None)
        wall = time.perf_counter() - start
        if outcome.timing is None:
            print(kernel, dtype, size, "not timed:", outcome.failure)
            continue
        rounds = len(outcome.timing.kernel_s)
        clock = outcome.timing.timer + (f", {outcome.timing.timer_note}" if outcome.timing.timer_note else "")
        records = sum(CountingClock.kinds.values())
        print(
            f"{kernel} {dtype} {size}^3 (timer {clock}): {rounds} rounds in {CountingClock.batches} batches, "
            f"case {wall:.3f} s, "
            f"timing {outcome.timing.elapsed_s:.3f} s; {records / max(rounds, 1):.2f} records a round "
            f"{dict(CountingClock.kinds)}; spans() {CountingClock.spans_s * 1e3:.1f} ms in all, "
            f"{CountingClock.spans_s / max(CountingClock.batches, 1) * 1e3:.2f} ms a batch, "
            f"{CountingClock.spans_s / max(records, 1) * 1e6:.1f} us a record"
        )


if __name__ == "__main__":
    main()
