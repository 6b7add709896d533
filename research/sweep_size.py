"""How much code the prepare kernel's instruction-cache sweep needs, and what it costs (issues 13, 16, 17).

    python research/sweep_size.py 0,4096,8192,16384,32768

For each sweep size in FFMAs (0: no sweep) in one process: the prepare kernel alone between two events (median
of 300, with its flush), then cuBLAS's CUPTI median after the naive kernel (little code) and after step 8 (much
code) at 256^3 and 1024^3, through the worker's own backend. Too little code leaves cuBLAS's code warm after the
naive kernel: its time then differs between the two.
"""

from __future__ import annotations

import statistics
import sys
import time

from flush_compare import time_case  # research/, beside this script

from pytest_gemm.records.request import TimingSettings
from pytest_gemm.worker.backend import GpuBackend
from pytest_gemm.worker.rounds import PREPARE_KERNEL, prepare_source


def main() -> None:
    backend = GpuBackend()
    cp, timer = backend.cp, backend.timer
    c = cp.zeros(1 << 20, dtype=cp.uint8)
    settings = TimingSettings(timer="cupti")
    for n in [int(x) for x in sys.argv[1].split(",")]:
        start = time.time()
        if n:
            timer._prepare = cp.RawKernel(prepare_source(n), PREPARE_KERNEL)
            timer._prepare.compile()
        timer.sweep_code = n > 0
        compiled = time.time() - start
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(300)]
        with backend.runner.stream as stream:
            for before, after in events:
                before.record(stream)
                timer.prepare(c, c, True)
                after.record(stream)
            stream.synchronize()
        prepare_us = statistics.median(cp.cuda.get_elapsed_time(a, z) for a, z in events) * 1e3
        line = [f"sweep {n:6d} ({n * 16 >> 10:4d} KB): compile {compiled:5.1f} s, prepare {prepare_us:6.1f} us"]
        for name, size in (("naive", 256), ("warp", 256), ("naive", 1024), ("warp", 1024)):
            r = time_case(backend, name, size, settings)
            line.append(f"{name}{size}: k {r['kernel_s'] * 1e6:7.3f} cuBLAS {r['cublas_s'] * 1e6:6.3f}")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()
