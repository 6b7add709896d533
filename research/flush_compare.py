"""One process ("run") of timing-fidelity.sh: the harness's device times per clock, for Nsight Compute to check.

    python research/flush_compare.py OUT.json [--modes events,cupti] [--sizes 256,512,1024,4096] [--layouts 3]

Runs the worker's own backend in this process (no pytest; entry points in docs/lab.md): for each mode, a timer
(``--gemm-timer``: ``events`` or ``cupti``; ``write:TIMER`` is accepted too, the harness's only flush), the naive
kernel and step 8's BN256-BK16 variant at each size, alpha = 1, beta = 0, timed with the default stopping rule,
each launch after the prepare kernel as in the product (C restored, instruction caches swept, L2 flushed by
writing). Also times an empty kernel after the same prepare kernel (what the events add around a launch), and,
with ``--layouts``, the naive kernel at the two smallest sizes again with a buffer of random size held first, so
that the case's operands land elsewhere in memory (does cuBLAS's time move with where its operands are?).
Appends one JSON record per measurement to OUT.json (a JSON-lines file). Run it several times as separate
processes for run-to-run spreads; compare with Nsight Compute through ``timing-fidelity.sh``.

The flushes ``read``, ``write-l2`` and ``read-l2`` (L2 flushed by reading; no instruction-cache sweep) needed
switches of the worker's timer that existed only for research; they were retired, and what they found is in
docs/timing.md ("Accuracy against Nsight Compute", "How far a case's ratio moves") and
docs/data/h100-2026-11-22-fidelity-flush.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

import numpy as np

from pytest_gemm.records.request import Request, TimingSettings
from pytest_gemm.records.shapes import Shape
from pytest_gemm.worker.backend import GpuBackend

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "naive": ("kernels/01_naive.cu", "sgemm_naive", ()),
    "warp": ("kernels/08_warp_tiling.cu", "sgemm_warp_tile", (("BN", 256), ("BK", 16))),
}
_EMPTY = r'extern "C" __global__ void pytest_gemm_empty() {}'


def time_case(backend: GpuBackend, name: str, size: int, settings: TimingSettings) -> dict:
    path, kernel, params = CASES[name]
    shape = Shape(size, size, size)
    request = Request(str(ROOT / path), path, kernel, params, "fp32", shape, 1.0, 0.0, 0, timing=settings)
    outcome = backend.run(request, lambda phase: None)
    if outcome.failure is not None or outcome.timing is None:
        raise SystemExit(f"{name} {size}: {outcome.failure}")
    t = outcome.timing
    k, r = statistics.median(t.kernel_s), statistics.median(t.reference_s)
    events = t.events_median_s or (None, None)
    return {
        "kernel_s": k,
        "cublas_s": r,
        "ratio": k / r,
        "n": len(t.kernel_s),
        "stop": t.stop_reason,
        "timer": t.timer,
        "timer_note": t.timer_note,
        "events_kernel_s": events[0],
        "events_cublas_s": events[1],
        "elapsed_s": t.elapsed_s,
    }


def empty_launch(backend: GpuBackend, rounds: int = 300) -> float:
    """The median time between two events around an empty kernel, each launch after a flush."""
    cp, timer = backend.cp, backend.timer
    c = cp.zeros(4, dtype=cp.uint32)
    empty = cp.RawKernel(_EMPTY, "pytest_gemm_empty")
    events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(rounds)]
    with backend.runner.stream as stream:
        for start, end in events:
            timer.prepare(c, c, True)
            start.record(stream)
            empty((1,), (32,), ())
            end.record(stream)
        stream.synchronize()
    return statistics.median(cp.cuda.get_elapsed_time(s, e) / 1e3 for s, e in events)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--modes", default="events,cupti", help="timers (or write:TIMER), comma-separated")
    parser.add_argument("--sizes", default="256,512,1024,4096")
    parser.add_argument("--layouts", type=int, default=0)
    parser.add_argument("--max-time", type=float, default=None, help="the stopping rule's cap (0 under ncu)")
    args = parser.parse_args()
    capped = {} if args.max_time is None else {"max_time": args.max_time, "warmup_s": 0.0}
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    for mode in modes:
        flush, _, timer = mode.rpartition(":")
        if flush not in ("", "write") or timer not in ("events", "cupti"):
            raise SystemExit(f"unknown mode {mode!r}: events, cupti (or write:events, write:cupti); see the docstring")
    backend = GpuBackend()
    run = f"{os.getpid()}-{time.time():.0f}"
    records = []
    for mode in modes:
        settings = TimingSettings(timer=mode.rpartition(":")[2], **capped)
        if args.max_time is None and settings.timer == "events":  # not under ncu
            records.append({"run": run, "mode": mode, "what": "empty", "seconds": empty_launch(backend)})
        for name in CASES:
            for size in sizes:
                records.append(
                    {"run": run, "mode": mode, "what": name, "size": size, **time_case(backend, name, size, settings)}
                )
        for layout in range(args.layouts):
            held = backend.cp.empty(random.randrange(1, 64) << 20, dtype=np.uint8)
            for size in sizes[:2]:
                records.append(
                    {
                        "run": run,
                        "mode": mode,
                        "what": "naive",
                        "size": size,
                        "layout": layout + 1,
                        **time_case(backend, "naive", size, settings),
                    }
                )
            del held
    with open(args.out, "a", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    for record in records:
        print(json.dumps(record))


if __name__ == "__main__":
    main()
