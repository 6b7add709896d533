"""Why cuBLAS's time at small sizes moves from one process to the next (issues 13, 16, 17: ratios within 1%).

    python research/cublas_spread.py OUT.jsonl [--sizes 256,512] [--each 3]   # one process; run it 5 times
    python research/cublas_spread.py OUT.jsonl --report                          # the table

In 5 separate processes on an H100, cuBLAS's median at fp32 512^3 spread about 4% (9% at 256^3), the naive
kernel's 0.5%. What a process fixes once and could explain it: where cuBLAS's workspace lies (one per
handle, allocated at its creation), where the L2 flush buffer lies, where the case's operands lie (CuPy's
pool hands the same blocks back to every case of a shape), and which kernels cuBLAS picks. This script
times the naive kernel and cuBLAS at each size through the worker's own backend, once as the process
starts ("base", twice), then ``--each`` times with only one of those moved:

- ``handle``: a new cuBLAS handle (so a new workspace), created behind a held allocation of random size;
- ``flush``: a new flush buffer behind a held allocation of random size;
- ``operands``: the case's operands behind a held allocation of random size;
- ``all``: all three at once.

Each record names the cuBLAS kernels CUPTI saw. ``--report`` prints, per size and factor, the spread
(max/min - 1) of cuBLAS's median within each process, and the spread of the process's base medians
across processes. A factor whose within-process spread matches the across-process one is the cause.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

from pytest_gemm.records.request import Request, TimingSettings
from pytest_gemm.worker import cupti_clock, timer
from pytest_gemm.worker.backend import GpuBackend
from pytest_gemm.worker.cupti_buffers import Row

ROOT = Path(__file__).resolve().parent.parent
NAIVE = ("kernels/01_naive.cu", "sgemm_naive")
SEEN: collections.Counter[str] = collections.Counter()
CUBLAS: list[tuple[int, int, str]] = []  # (start ns, end ns, name) of every cuBLAS kernel of the current case


class NamingClock(cupti_clock.CuptiClock):
    """The worker's CUPTI clock, also counting the names of the kernels it records."""

    def _completed(self, rows: list[Row]) -> None:
        for _kind, _stream, start, end, name in rows:
            if name:
                SEEN[name] += 1
                if "cublas" in name:
                    CUBLAS.append((start, end, name))
        super()._completed(rows)


def measure(backend: GpuBackend, size: int) -> dict[str, Any]:
    SEEN.clear()
    CUBLAS.clear()
    request = Request(
        str(ROOT / NAIVE[0]),
        NAIVE[0],
        NAIVE[1],
        (),
        "fp32",
        size,
        size,
        size,
        1.0,
        0.0,
        0,
        timing=TimingSettings(timer="cupti"),
    )
    outcome = backend.run(request, lambda phase: None)
    if outcome.failure is not None or outcome.timing is None:
        raise SystemExit(f"naive {size}: {outcome.failure}")
    t = outcome.timing
    names = {n: c for n, c in SEEN.items() if not n.startswith("pytest_gemm") and "naive" not in n}
    return {
        "kernel_s": statistics.median(t.kernel_s),
        "cublas_s": statistics.median(t.reference_s),
        "n": len(t.kernel_s),
        "timer": t.timer,
        "timer_note": t.timer_note,
        "elapsed_s": t.elapsed_s,
        "cublas_kernels": sorted(names),
        "cublas_parts_us": parts(),
        "cublas_samples_us": [round(x * 1e6, 3) for x in t.reference_s],
    }


def parts() -> dict[str, float]:
    """Medians of a split-K call's parts: its GEMM kernel, the gap before the reduction, the reduction."""
    calls = sorted(CUBLAS)
    gemm, gap, reduction = [], [], []
    for first, second in itertools.pairwise(calls):
        if "split_k" not in first[2] and "split_k" in second[2]:
            gemm.append(first[1] - first[0])
            gap.append(second[0] - first[1])
            reduction.append(second[1] - second[0])
    if not gemm:
        return {}
    return {
        "gemm": statistics.median(gemm) / 1e3,
        "gap": statistics.median(gap) / 1e3,
        "reduction": statistics.median(reduction) / 1e3,
        "calls": len(gemm),
    }


def hold(cp: Any) -> Any:
    """A held allocation of 1-64 MiB, so that what is allocated next lands elsewhere."""
    return cp.cuda.runtime.malloc(random.randrange(1, 64) << 20)


def run(out: str, sizes: list[int], each: int) -> None:
    timer.CuptiClock = NamingClock
    backend = GpuBackend()
    cp, t = backend.cp, backend.timer
    from cupy_backends.cuda.libs import cublas

    proc = f"{os.getpid()}-{time.time():.0f}"
    held: list[int] = []
    records = []

    def record(factor: str, index: int) -> None:
        for size in sizes:
            rec = {"run": proc, "factor": factor, "index": index, "size": size, **measure(backend, size)}
            records.append(rec)
            print(json.dumps(rec), flush=True)

    for i in range(2):
        record("base", i)
    factors = ["handle", "flush", "operands", "all"]
    for i in range(each):
        for factor in factors:
            if factor in ("handle", "all"):
                held.append(hold(cp))
                t._handle = cublas.create()
            if factor in ("flush", "all"):
                held.append(hold(cp))
                t._flush = cp.zeros(t.flush_bytes, dtype=cp.uint8)
            if factor in ("operands", "all"):
                held.append(hold(cp))
                # CuPy's pool would hand the freed blocks back; a fresh pool makes the operands new allocations
                cp.cuda.set_allocator(cp.cuda.MemoryPool().malloc)
            record(factor, i)
    with open(out, "a", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")


def spread(values: list[float]) -> float:
    return max(values) / min(values) - 1 if values else float("nan")


def report(out: str) -> None:
    recs = [json.loads(line) for line in Path(out).read_text().splitlines() if line.strip()]
    runs = sorted({r["run"] for r in recs})
    sizes = sorted({r["size"] for r in recs})
    print(f"{len(runs)} processes; spreads are max/min - 1 of the medians, in %")
    for size in sizes:
        at = [r for r in recs if r["size"] == size]
        base = [
            statistics.median(r["cublas_s"] for r in at if r["run"] == run and r["factor"] == "base") for run in runs
        ]
        kbase = [
            statistics.median(r["kernel_s"] for r in at if r["run"] == run and r["factor"] == "base") for run in runs
        ]
        ratio = [k / c for k, c in zip(kbase, base, strict=True)]
        print(
            f"\n{size}^3: across processes (base): cuBLAS {spread(base) * 100:.2f}, naive {spread(kbase) * 100:.2f}, "
            f"ratio {spread(ratio) * 100:.2f}; cuBLAS medians (us): " + " ".join(f"{b * 1e6:.2f}" for b in base)
        )
        for factor in ["base", "handle", "flush", "operands", "all"]:
            within = []
            for run in runs:
                vals = [r["cublas_s"] for r in at if r["run"] == run and r["factor"] == factor]
                if len(vals) > 1:
                    within.append(spread(vals) * 100)
            if within:
                print(
                    f"  {factor:9s} within a process: cuBLAS spread {statistics.mean(within):.2f} mean, "
                    f"{max(within):.2f} max"
                )
        kernels = collections.Counter(" + ".join(r["cublas_kernels"]) for r in at)
        for names, count in kernels.most_common():
            print(f"  {count:3d}x cuBLAS ran: {names}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="256,512")
    parser.add_argument("--each", type=int, default=3)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if args.report:
        report(args.out)
    else:
        run(args.out, [int(s) for s in args.sizes.split(",")], args.each)


if __name__ == "__main__":
    main()
