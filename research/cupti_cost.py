"""What collecting CUPTI's activity records costs the host, per batch of timed launches, in each configuration.

    python research/cupti_cost.py

A batch is 64 pairs of (a 4-byte copy, an L2-sized fill, a small kernel); after each batch the stream is
synchronized and the records flushed. Prints, per configuration (activity kinds, buffer size, flush flag,
whether the kinds stay enabled between batches), the median seconds of the flush (and of enable/disable)
and how many kernel records came back per batch (64 expected: the records a batch needs).
"""

from __future__ import annotations

import statistics
import time

import cupy as cp
from cupti import cupti

_KERNEL = cp.RawKernel(r'extern "C" __global__ void probe(float* x) { x[threadIdx.x] += 1.0f; }', "probe")


def run(kinds: list, buffer_bytes: int, flag: int, keep: bool, batches: int = 20) -> dict:
    records: list[int] = []

    def requested():
        return buffer_bytes, 0

    def completed(activities):
        records.append(sum(1 for a in activities if int(a.kind) == int(cupti.ActivityKind.CONCURRENT_KERNEL)))

    cupti.activity_register_callbacks(requested, completed)
    x = cp.zeros(256, dtype=cp.float32)
    fill = cp.zeros(100 << 20, dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    flushes, toggles, counts = [], [], []
    if keep:
        for kind in kinds:
            cupti.activity_enable(kind)
    with stream:
        for _ in range(batches):
            t0 = time.perf_counter()
            if not keep:
                for kind in kinds:
                    cupti.activity_enable(kind)
            t1 = time.perf_counter()
            for _ in range(64):
                fill.fill(0)
                cupti.activity_push_external_correlation_id(cupti.ExternalCorrelationKind.CUSTOM0, 1)
                _KERNEL((1,), (256,), (x,))
                cupti.activity_pop_external_correlation_id(cupti.ExternalCorrelationKind.CUSTOM0)
            stream.synchronize()
            records.clear()
            t2 = time.perf_counter()
            cupti.activity_flush_all(flag)
            t3 = time.perf_counter()
            if not keep:
                for kind in kinds:
                    cupti.activity_disable(kind)
            t4 = time.perf_counter()
            flushes.append(t3 - t2)
            toggles.append((t1 - t0) + (t4 - t3))
            counts.append(sum(records))
    if keep:
        for kind in kinds:
            cupti.activity_disable(kind)
    cupti.activity_flush_all(1)
    return {
        "flush_ms": 1e3 * statistics.median(flushes),
        "toggle_ms": 1e3 * statistics.median(toggles),
        "kernel records per batch": f"{min(counts)}-{max(counts)}",
    }


def main() -> None:
    k = cupti.ActivityKind
    every = [k.CONCURRENT_KERNEL, k.MEMSET, k.MEMCPY, k.EXTERNAL_CORRELATION, k.DRIVER, k.RUNTIME]
    work = [k.CONCURRENT_KERNEL, k.MEMSET, k.MEMCPY]
    for name, kinds in (("all six", every), ("work only", work), ("kernels only", [k.CONCURRENT_KERNEL])):
        for buffer_bytes in (8 << 20, 256 << 10):
            for flag in (1, 0):
                for keep in (False, True):
                    result = run(kinds, buffer_bytes, flag, keep)
                    print(f"{name:12} buffer {buffer_bytes >> 10:5} KiB flush({flag}) keep={keep!s:5} {result}")


if __name__ == "__main__":
    main()
